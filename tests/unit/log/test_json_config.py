"""RocketMQ's JSON dialect: lenient reading, fastjson-style writing, `.bak` fallback."""

from __future__ import annotations

from rocketstore.log.json_config import dumps_fastjson, loads_lenient, read_json, write_json

ROCKETMQ_CONSUMER_OFFSETS = (
    '{\n\t"offsetTable":{\n\t\t"TopicTest@please_rename_unique_group_name_4":{0:250,1:250,2:248,3:251\n\t\t},'
    '\n\t\t"%RETRY%g@g":{0:0\n\t\t}\n\t}\n}'
)


def test_reads_unquoted_integer_keys_as_rocketmq_writes_them():
    data = loads_lenient(ROCKETMQ_CONSUMER_OFFSETS)
    assert data["offsetTable"]["TopicTest@please_rename_unique_group_name_4"] == {
        "0": 250, "1": 250, "2": 248, "3": 251}


def test_strings_that_look_like_keys_are_left_alone():
    assert loads_lenient('{"a":"{0:1,2:3}", 5 : {"x": [1, 2]}}') == {"a": "{0:1,2:3}", "5": {"x": [1, 2]}}


def test_writes_the_fastjson_pretty_layout():
    text = dumps_fastjson({"offsetTable": {"TopicTest@please_rename_unique_group_name_4": {0: 250, 1: 250, 2: 248,
                                                                                           3: 251},
                                           "%RETRY%g@g": {0: 0}}})
    assert text == ROCKETMQ_CONSUMER_OFFSETS
    assert dumps_fastjson({"offsetTable": {1: 0, 2: 15, 3: 7}}) == '{\n\t"offsetTable":{1:0,2:15,3:7\n\t}\n}'
    assert dumps_fastjson({"a": {}}) == '{\n\t"a":{}\n}'


def test_write_keeps_a_backup_and_read_falls_back_to_it(tmp_path):
    path = tmp_path / "config" / "consumerOffset.json"
    write_json(path, {"offsetTable": {"T@g": {0: 1}}})
    write_json(path, {"offsetTable": {"T@g": {0: 2}}})
    assert loads_lenient(path.with_name("consumerOffset.json.bak").read_text())["offsetTable"]["T@g"] == {"0": 1}
    assert read_json(path)["offsetTable"]["T@g"] == {"0": 2}
    path.write_text("{broken")
    assert read_json(path)["offsetTable"]["T@g"] == {"0": 1}
    path.write_text("")
    assert read_json(path)["offsetTable"]["T@g"] == {"0": 1}
    assert read_json(tmp_path / "missing.json") is None
