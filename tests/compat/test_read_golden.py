"""rocketstore reads a store written by the real RocketMQ 4.9.8 and answers as it did."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from rocketstore import GetStatus, MessageStore, StoreConfig
from tests.conftest import GOLDEN_DIR, copy_golden_store

LONG_MAX = 2**63 - 1


@pytest.fixture(scope="module")
def golden_copy(tmp_path_factory) -> Path:
    return copy_golden_store(tmp_path_factory.mktemp("golden") / "store")


@pytest.fixture(scope="module")
def store(golden_expected: dict[str, Any], golden_copy: Path):
    config = StoreConfig.from_rocketmq(golden_expected["store_config"])
    with MessageStore.open(golden_copy, config, read_only=True) as s:
        yield s


def test_golden_copy_is_intact(golden_expected):
    """The repository's golden store holds exactly the bytes RocketMQ wrote (expected.json `files`)."""
    on_disk = sorted(p.relative_to(GOLDEN_DIR / "store").as_posix()
                     for p in (GOLDEN_DIR / "store").rglob("*") if p.is_file())
    assert on_disk == sorted(f["path"] for f in golden_expected["files"])
    for f in golden_expected["files"]:
        data = (GOLDEN_DIR / "store" / f["path"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (f["size"], f["sha256"]), f["path"]


def _stored_fields(m) -> dict[str, Any]:
    return {
        "commitLogOffset": m.phy_offset, "storeSize": m.size, "topic": m.topic, "queueId": m.queue_id,
        "queueOffset": m.queue_offset, "tags": m.tags, "keys": m.properties.get("KEYS"),
        "uniqKey": m.uniq_key, "storeTimestamp": m.store_timestamp, "magicCode": f"0x{m.magic:08X}",
        "bodyCRC": m.body_crc, "flag": m.flag, "sysFlag": m.sys_flag, "bornTimestamp": m.born_timestamp,
        "bornHost": m.born_host, "storeHost": m.store_host, "reconsumeTimes": m.reconsume_times,
        "preparedTransactionOffset": m.prepared_transaction_offset, "msgId": m.msg_id,
        "bodyLength": len(m.body), "bodyHex": m.body.hex().upper(),
        "topicByteLength": len(m.topic.encode()), "propertiesLength": len(m.properties_string.encode()),
        "propertiesString": m.properties_string, "properties": [list(kv) for kv in m.properties.items()],
    }


def test_config_from_rocketmq_names_matches_golden_geometry(golden_expected, golden_config):
    config = StoreConfig.from_rocketmq(golden_expected["store_config"])
    assert config.geometry() == golden_config.geometry()
    assert config.consume_queue_file_size == 2000
    assert config.index_file_size == 8440


def test_every_record_equals_expected(store, golden_expected):
    expected = golden_expected["messages_in_commitlog_order"]
    ours = list(store.scan())
    assert len(ours) == len(expected) == 520
    for message, exp in zip(ours, expected, strict=True):
        got = _stored_fields(message)
        want = {k: exp[k] for k in got}
        if exp["bodyUtf8"] is not None:
            assert message.body.decode("utf-8") == exp["bodyUtf8"]
        assert got == want


def test_commitlog_bounds_equal_expected(store, golden_expected):
    assert store.min_phy_offset == golden_expected["commitlog"]["minPhyOffset"]
    assert store.max_phy_offset == golden_expected["commitlog"]["maxPhyOffset"]


def test_message_at_and_by_id_return_the_recorded_record(store, golden_expected):
    for exp in golden_expected["messages_in_commitlog_order"][::37]:
        assert store.message_at(exp["commitLogOffset"]).msg_id == exp["msgId"]
        by_id = store.message_by_id(exp["msgId"])
        assert by_id.phy_offset == exp["commitLogOffset"]
        assert by_id.uniq_key == exp["uniqKey"]


def test_consume_queues_equal_expected_entry_for_entry(store, golden_expected):
    queues = golden_expected["queues"]
    assert store.queues() == {t: sorted(int(q) for q in qs) for t, qs in queues.items()}
    for topic, per_queue in queues.items():
        for qid, exp in per_queue.items():
            queue_id = int(qid)
            assert store.min_offset(topic, queue_id) == exp["minOffset"]
            assert store.max_offset(topic, queue_id) == exp["maxOffset"]
            units = list(store.queue_entries(topic, queue_id))
            got = [[i, u.phy_offset, u.size, u.tags_code] for i, u in enumerate(units)]
            assert got == exp["cqEntries_queueOffset_commitLogOffset_size_tagsCode"]
            messages = list(store.iter_queue(topic, queue_id))
            assert [m.phy_offset for m in messages] == [m["commitLogOffset"] for m in exp["messages"]]
            assert [m.queue_offset for m in messages] == [m["queueOffset"] for m in exp["messages"]]


def test_index_lookup_answers_exactly_as_rocketmq(store, golden_expected):
    for case in golden_expected["queries"]["queryMessage"]:
        offsets = store.index_lookup(case["topic"], case["key"], max_count=case["maxNum"],
                                     begin_ms=case["begin"], end_ms=case["end"])
        expected = [m["commitLogOffset"] for m in case["result"]["messages"]]
        assert offsets == expected, case


def test_query_returns_only_messages_that_carry_the_key(store, golden_expected):
    for case in golden_expected["queries"]["queryMessage"]:
        topic, key = case["topic"], case["key"]
        found = store.query(topic, key, max_count=case["maxNum"], begin_ms=case["begin"],
                            end_ms=None if case["end"] == LONG_MAX else case["end"])
        assert all(m.topic == topic and (key in m.keys or m.uniq_key == key) for m in found)
        assert [m.phy_offset for m in found] == sorted(m.phy_offset for m in found)
        # Every true match RocketMQ returned (collisions removed) that lies in the ms window is found.
        rocketmq_true = [m["commitLogOffset"] for m in case["result"]["messages"]
                         if key in (m.get("keys") or "").split(" ") or m.get("uniqKey") == key]
        in_window = [o for o in rocketmq_true
                     if case["begin"] <= store.message_at(o).store_timestamp <= case["end"]]
        if len(in_window) < min(case["maxNum"], 64):
            assert set(in_window) <= {m.phy_offset for m in found}, case


def test_query_removes_hash_collisions(golden_copy):
    config = StoreConfig(commitlog_file_size=65536, consume_queue_file_entries=100, index_hash_slots=100,
                         index_max_entries=400)
    with MessageStore.open(golden_copy, config, read_only=True) as s:
        aa = s.query("TopicA", "Aa")
        bb = s.query("TopicA", "BB")
        assert aa and bb
        assert all("Aa" in m.keys for m in aa)
        assert all("BB" in m.keys for m in bb)
        assert not {m.phy_offset for m in aa} & {m.phy_offset for m in bb}
        raw = s.index_lookup("TopicA", "Aa")
        assert set(raw) > {m.phy_offset for m in aa}


def test_get_in_rocketmq_mode_answers_exactly_as_rocketmq(store, golden_expected):
    for case in golden_expected["queries"]["getMessage"]:
        result = store.get(case["topic"], case["queueId"], case["offset"], case["maxMsgNums"],
                           tags=case["subExpression"], stop_at_file_end=True)
        exp = case["result"]
        assert result.status == GetStatus[exp["status"]], case
        assert (result.next_offset, result.min_offset, result.max_offset) == (
            exp["nextBeginOffset"], exp["minOffset"], exp["maxOffset"]), case
        assert [m.queue_offset for m in result.messages] == [m["queueOffset"] for m in exp["messages"]]
        assert [m.phy_offset for m in result.messages] == [m["commitLogOffset"] for m in exp["messages"]]


def test_get_crosses_consume_queue_files_by_default(store):
    rocketmq = store.get("TopicA", 0, 95, 10, stop_at_file_end=True)
    assert [m.queue_offset for m in rocketmq.messages] == [95, 96, 97, 98, 99]
    ours = store.get("TopicA", 0, 95, 10)
    assert [m.queue_offset for m in ours.messages] == list(range(95, 105))
    assert ours.next_offset == 105


def test_filtered_get_crossing_files_continues_the_same_sequence(store):
    first = store.get("TopicA", 0, 0, 32, tags="TagA", stop_at_file_end=True)
    ours = store.get("TopicA", 0, 0, 32, tags="TagA")
    assert [m.queue_offset for m in ours.messages][:len(first.messages)] == [m.queue_offset for m in first.messages]
    assert len(ours.messages) == 32
    assert all(m.tags == "TagA" for m in ours.messages)


def test_offset_by_time_uses_stored_timestamps(store, golden_expected):
    for topic, per_queue in golden_expected["queues"].items():
        for qid, exp in per_queue.items():
            times = [m["storeTimestamp"] for m in exp["messages"]]
            for i in range(0, len(times), 7):
                first = next(j for j, t in enumerate(times) if t >= times[i])
                assert store.offset_by_time(topic, int(qid), times[i]) == first
            assert store.offset_by_time(topic, int(qid), 0) == 0
            assert store.offset_by_time(topic, int(qid), times[-1] + 1) == len(times)


def test_lookups_store_time(store, golden_expected):
    for case in golden_expected["queries"]["lookups"]:
        assert store.message_at(case["commitLogOffset"]).store_timestamp == case["messageStoreTimeStamp"]


def test_read_only_open_writes_nothing(tmp_path: Path, golden_expected):
    from tests.conftest import copy_golden_store

    root = copy_golden_store(tmp_path / "s")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    mtimes = {p: p.stat().st_mtime_ns for p in before}
    config = StoreConfig.from_rocketmq(golden_expected["store_config"])
    with MessageStore.open(root, config, read_only=True) as s:
        assert s.max_phy_offset == 224272
        list(s.scan())
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert after == before
    assert {p: p.stat().st_mtime_ns for p in after} == mtimes
