"""Admin requests driven with our own remoting client: bodies as RocketMQ's clients parse them, and the
protocol's error codes (never a crash) for bad input. The same answers against the real mqadmin:
test_admin_mqadmin.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rocketstore import MessageStore
from rocketstore.format.msgid import decode_msg_id
from rocketstore.log.json_config import read_json
from rocketstore.log.subscription_groups import DEFAULT_GROUPS, MAX_GROUPS, SubscriptionGroups, group_config
from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.bodies import decode_json_body, encode_json_body, encode_mq_keyed_body
from rocketstore.protocol.client import RemotingClient, decode_records
from tests.broker.broker_support import BrokerProcess
from tests.broker.test_broker_requests import pull, send


def test_mq_keyed_bodies_are_written_as_fastjson_writes_them() -> None:
    body = encode_mq_keyed_body({"consumeTps": 0.0}, {"offsetTable": [
        (("T", "broker-a", 1), {"brokerOffset": 5, "consumerOffset": 2, "lastTimestamp": 7})]})
    assert body == (b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":1,"topic":"T"}:'
                    b'{"brokerOffset":5,"consumerOffset":2,"lastTimestamp":7}}}')
    assert encode_mq_keyed_body({}, {"offsetTable": []}) == b'{"offsetTable":{}}'


def test_subscription_groups_file_round_trip_and_bounds(tmp_path: Path) -> None:
    groups = SubscriptionGroups(tmp_path, lambda: 1234)
    assert groups.load() is None and set(DEFAULT_GROUPS) <= set(groups.encode()["subscriptionGroupTable"])
    groups.update(group_config({"groupName": "G", "retryMaxTimes": 3, "consumeBroadcastEnable": False}))
    assert groups.ensure("H") is True and groups.ensure("H") is False
    data = read_json(tmp_path / "config" / "subscriptionGroup.json")
    assert data is not None and data["subscriptionGroupTable"]["G"]["retryMaxTimes"] == 3
    assert "H" not in data["subscriptionGroupTable"]  # a heartbeat's group waits for persist()
    groups.persist()
    again = SubscriptionGroups(tmp_path, lambda: 1)
    again.load()
    assert again.get("G") == groups.get("G") and again.get("H") is not None
    assert again.encode()["dataVersion"]["counter"] == groups.encode()["dataVersion"]["counter"]
    assert again.delete("G") is True and again.delete("G") is False
    for bad in ({"groupName": ""}, {"groupName": 5}, {"groupName": "x" * 300}, {"groupName": "G", "retryMaxTimes": -1},
                {"groupName": "G", "consumeEnable": "yes"}, {"groupName": "G", "brokerId": 2**40}):
        with pytest.raises(ValueError):
            group_config(bad)
    full = SubscriptionGroups(tmp_path / "full", lambda: 1, read_only=True)
    full.load()
    for i in range(MAX_GROUPS - len(full)):
        full.ensure(f"g{i}")
    assert len(full) == MAX_GROUPS and full.ensure("one-more") is False
    with pytest.raises(ValueError):
        full.update(group_config({"groupName": "one-more"}))
    assert not (tmp_path / "full").exists()  # read-only: nothing written


def _body(response) -> dict:
    data = decode_json_body(response.body)
    assert isinstance(data, dict), response.body
    return data


def test_admin_requests_answer_and_refuse_bad_input(broker: BrokerProcess) -> None:
    with RemotingClient(broker.addr, timeout_s=10) as client:
        for i in range(3):
            assert send(client, "Stats", f"m{i}".encode(), queue_id=i % 2).code == ResponseCode.SUCCESS
        stats = client.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Stats"})
        assert stats.code == ResponseCode.SUCCESS
        assert stats.body.startswith(b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"Stats"}:')
        assert b'"maxOffset":2' in stats.body and b'"maxOffset":1' in stats.body
        missing = client.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Nope"})
        assert (missing.code, missing.remark) == (ResponseCode.TOPIC_NOT_EXIST, "topic[Nope] not exist")
        assert client.request(RequestCode.GET_TOPIC_STATS_INFO, {}).code == ResponseCode.SYSTEM_ERROR

        for queue_id in range(4):  # the topic's 4 queues (a reset needs a committed offset on each)
            assert client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": "CG", "topic": "Stats", "queueId": queue_id, "commitOffset": 1 - queue_id // 2,
            }).code == ResponseCode.SUCCESS
        consume = client.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "CG"})
        assert consume.code == ResponseCode.SUCCESS
        assert consume.body.startswith(b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,')
        assert b'"brokerOffset":2,"consumerOffset":1,"lastTimestamp":1' in consume.body
        none = client.request(RequestCode.GET_CONSUME_STATS, {"consumerGroup": "Nobody"})
        assert none.body == b'{"consumeTps":0.0,"offsetTable":{}}'
        who = client.request(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "Stats"})
        assert _body(who) == {"groupList": ["CG"]}

        runtime = _body(client.request(RequestCode.GET_BROKER_RUNTIME_INFO))["table"]
        assert runtime["msgPutTotalTodayNow"] == "3" and runtime["brokerVersionDesc"] == "V5_1_0"
        assert len(runtime["putTps"].split()) == 3 and int(runtime["earliestMessageTimeStamp"]) > 0
        config = client.request(RequestCode.GET_BROKER_CONFIG)
        assert b"brokerName=broker-a\n" in config.body and "counter" in config.ext_fields["version"]

        for body in (b"not json", b"[1,2]", b'{"groupName":""}', b'{"groupName":"G","retryMaxTimes":"x"}'):
            bad = client.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=body)
            assert bad.code == ResponseCode.SYSTEM_ERROR, body
        good = client.request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
                              body=encode_json_body({"groupName": "G", "retryMaxTimes": 2}))
        assert good.code == ResponseCode.SUCCESS
        table = _body(client.request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))["subscriptionGroupTable"]
        assert table["G"]["retryMaxTimes"] == 2 and "TOOLS_CONSUMER" in table
        assert client.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {}).code == ResponseCode.SYSTEM_ERROR
        assert client.request(RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "G"}).code == 0

        reset = {"topic": "Stats", "group": "CG", "timestamp": 0, "isForce": "true"}
        offline = client.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, reset)
        assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
        assert offline.remark.startswith("Consumer not online, so can not reset offset, Group: CG Topic: Stats")
        for fields in ({**reset, "timestamp": "soon"}, {**reset, "timestamp": 2**62}, {"topic": "Stats"}):
            assert client.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields).code == ResponseCode.SYSTEM_ERROR
        unknown = client.request(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, {**reset, "group": "Never"})
        assert (unknown.code, unknown.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <Never> not exist")

        for topic, remark in (("SCHEDULE_TOPIC_XXXX", "conflict with system topic"),
                              ("TBW102", "conflict with system topic"), ("bad topic!", "illegal characters")):
            refused = client.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})
            assert refused.code == ResponseCode.SYSTEM_ERROR and remark in (refused.remark or ""), topic
        assert client.request(RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "Stats"}).code == 0
        assert client.request(RequestCode.GET_TOPIC_STATS_INFO, {"topic": "Stats"}).code == ResponseCode.TOPIC_NOT_EXIST
    with RemotingClient(broker.namesrv, timeout_s=10) as ns:
        topics = _body(ns.request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))["topicList"]
        assert "Stats" not in topics and {"SELF_TEST_TOPIC", "DefaultCluster", "broker-a"} <= set(topics)
        assert ns.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "Gone"}).code == ResponseCode.SUCCESS
        assert ns.request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {}).code == ResponseCode.SYSTEM_ERROR
        assert b"listenPort=" in ns.request(RequestCode.GET_NAMESRV_CONFIG).body
    assert broker.alive()


def test_a_sent_back_copy_names_its_origin_by_the_records_offset_msg_id(broker: BrokerProcess) -> None:
    """CONSUMER_SEND_MSG_BACK (36): ORIGIN_MESSAGE_ID is the original record's offset msgId (RocketMQ's
    msgExt.getMsgId()), not the UNIQ_KEY the client sends as originMsgId; a second send-back keeps it."""
    uniq = "C0A80001000018B4AAC26F1D3A7B0000"
    with RemotingClient(broker.addr, timeout_s=10) as client:
        sent = send(client, "Back", b"body", props=f"TAGS\x01A\x02UNIQ_KEY\x01{uniq}")
        assert sent.code == ResponseCode.SUCCESS
        offset_id = sent.ext_fields["msgId"]
        assert offset_id != uniq
        phy = decode_msg_id(offset_id)[1]
        back = {"offset": phy, "group": "BG", "delayLevel": 1, "originMsgId": uniq, "maxReconsumeTimes": 16}
        assert client.request(RequestCode.CONSUMER_SEND_MSG_BACK, back).code == ResponseCode.SUCCESS
        deadline = time.monotonic() + 20
        while client.request(RequestCode.GET_MAX_OFFSET, {"topic": "%RETRY%BG", "queueId": 0}).ext_fields[
                "offset"] == "0" and time.monotonic() < deadline:
            time.sleep(0.2)
        (copy,) = decode_records(pull(client, "%RETRY%BG", 0, 0).body)
        assert copy.properties["ORIGIN_MESSAGE_ID"] == offset_id
        assert copy.properties["RETRY_TOPIC"] == "Back" and copy.properties["UNIQ_KEY"] == uniq
        assert copy.reconsume_times == 1
        again = {**back, "offset": copy.phy_offset, "originMsgId": uniq}
        assert client.request(RequestCode.CONSUMER_SEND_MSG_BACK, again).code == ResponseCode.SUCCESS
        deadline = time.monotonic() + 20
        while client.request(RequestCode.GET_MAX_OFFSET, {"topic": "%RETRY%BG", "queueId": 0}).ext_fields[
                "offset"] == "1" and time.monotonic() < deadline:
            time.sleep(0.2)
        second = decode_records(pull(client, "%RETRY%BG", 0, 1).body)[0]
        assert second.properties["ORIGIN_MESSAGE_ID"] == offset_id and second.reconsume_times == 2


def test_connections_consume_queue_stats_and_kv_config_answer_and_refuse_bad_input(broker: BrokerProcess) -> None:
    heartbeat = {"clientID": "c1", "consumerDataSet": [{
        "groupName": "HG", "consumeType": "CONSUME_ACTIVELY", "messageModel": "BROADCASTING",
        "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET", "subscriptionDataSet": [
            {"topic": "Cq", "subString": "A", "codeSet": [65], "tagsSet": ["A"], "classFilterMode": False,
             "expressionType": "TAG", "subVersion": 1}]}], "producerDataSet": [{"groupName": "HP"}]}
    with RemotingClient(broker.addr, timeout_s=10) as client:
        for i in range(3):
            assert send(client, "Cq", f"m{i}".encode(), queue_id=0).code == ResponseCode.SUCCESS
        none = client.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "HG"})
        assert (none.code, none.remark) == (ResponseCode.CONSUMER_NOT_ONLINE, "the consumer group[HG] not online")
        assert client.request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "HP"}).code == \
            ResponseCode.SYSTEM_ERROR
        assert client.request(RequestCode.HEART_BEAT, body=encode_json_body(heartbeat)).code == 0
        consumers = _body(client.request(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "HG"}))
        assert consumers["connectionSet"][0]["clientId"] == "c1" and consumers["messageModel"] == "BROADCASTING"
        assert consumers["consumeType"] == "CONSUME_ACTIVELY"
        assert consumers["subscriptionTable"]["Cq"]["codeSet"] == [65]
        producers = _body(client.request(RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "HP"}))
        assert [c["clientId"] for c in producers["connectionSet"]] == ["c1"]
        for code in (RequestCode.GET_CONSUMER_CONNECTION_LIST, RequestCode.GET_PRODUCER_CONNECTION_LIST):
            assert client.request(code, {}).code == ResponseCode.SYSTEM_ERROR

        cq = _body(client.request(RequestCode.QUERY_CONSUME_QUEUE, {"topic": "Cq", "queueId": 0, "index": 1,
                                                                    "count": 5, "consumerGroup": "HG"}))
        assert (cq["minQueueIndex"], cq["maxQueueIndex"], len(cq["queueData"])) == (0, 3, 2)
        assert cq["subscriptionData"]["subString"] == "A" and cq["filterData"] == "null"
        assert all(entry["eval"] is False and entry["physicSize"] > 0 for entry in cq["queueData"])
        offline = _body(client.request(RequestCode.QUERY_CONSUME_QUEUE, {"topic": "Cq", "queueId": 0, "index": 0,
                                                                         "count": 2**31 - 1, "consumerGroup": "X"}))
        assert offline["filterData"] == "X@Cq is not online!" and len(offline["queueData"]) == 3
        past = client.request(RequestCode.QUERY_CONSUME_QUEUE, {"topic": "Cq", "queueId": 0, "index": 3, "count": 1})
        assert (past.code, past.remark, past.body) == (ResponseCode.SUCCESS, "Index 3 of 0@Cq is not exist!", b"")
        missing = client.request(RequestCode.QUERY_CONSUME_QUEUE, {"topic": "Cq", "queueId": 7, "index": 0, "count": 1})
        assert (missing.code, missing.remark) == (ResponseCode.SYSTEM_ERROR, "7@Cq is not exist!")
        assert client.request(RequestCode.QUERY_CONSUME_QUEUE, {"topic": "Cq", "queueId": "x", "index": 0,
                                                                "count": 1}).code == ResponseCode.SYSTEM_ERROR

        puts = _body(client.request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "TOPIC_PUT_NUMS",
                                                                         "statsKey": "Cq"}))
        assert puts["statsMinute"]["sum"] == puts["statsDay"]["sum"] == 3 and puts["statsDay"]["avgpt"] == 1.0
        unknown = client.request(RequestCode.VIEW_BROKER_STATS_DATA, {"statsName": "X", "statsKey": "Cq"})
        assert (unknown.code, unknown.remark) == (ResponseCode.SYSTEM_ERROR, "The stats <X> <Cq> not exist")
        assert client.request(RequestCode.VIEW_BROKER_STATS_DATA, {}).code == ResponseCode.SYSTEM_ERROR

        stats = client.request(RequestCode.GET_BROKER_CONSUME_STATS, {"isOrder": "false"})
        assert stats.code == ResponseCode.SUCCESS and b'{"HG":[]}' in stats.body and b'"totalDiff":0' in stats.body
    with RemotingClient(broker.namesrv, timeout_s=10) as ns:
        assert ns.request(RequestCode.PUT_KV_CONFIG, {"namespace": "N", "key": "k", "value": "v"}).code == 0
        got = ns.request(RequestCode.GET_KV_CONFIG, {"namespace": "N", "key": "k"})
        assert (got.code, got.ext_fields["value"]) == (ResponseCode.SUCCESS, "v")
        for fields in ({"namespace": "N", "key": "k"}, {"key": "k", "value": "v"}, {}):
            assert ns.request(RequestCode.PUT_KV_CONFIG, fields).code == ResponseCode.SYSTEM_ERROR
        assert ns.request(RequestCode.DELETE_KV_CONFIG, {"namespace": "N", "key": "k"}).code == 0
        assert ns.request(RequestCode.DELETE_KV_CONFIG, {"namespace": "N", "key": "k"}).code == 0
        gone = ns.request(RequestCode.GET_KV_CONFIG, {"namespace": "N", "key": "k"})
        assert (gone.code, gone.remark) == (ResponseCode.QUERY_NOT_FOUND, "No config item, Namespace: N Key: k")
    assert broker.stop() == 0
    with MessageStore.open(broker.store, read_only=True) as store:  # the heartbeat's group and retry topic
        assert store.topic_config()["%RETRY%HG"]["writeQueueNums"] == 1
    groups = read_json(broker.store / "config" / "subscriptionGroup.json")
    assert groups is not None and "HG" in groups["subscriptionGroupTable"]


def test_kv_config_and_stats_items_stay_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from rocketstore.broker import kv_config, stats

    kv = kv_config.KvConfig(tmp_path)
    monkeypatch.setattr(kv_config, "MAX_ENTRIES", 3)
    monkeypatch.setattr(kv_config, "MAX_BYTES", 100)
    for i in range(3):
        kv.put("N", f"k{i}", "v")
    with pytest.raises(ValueError):
        kv.put("N", "k3", "v")
    kv.put("N", "k0", "w")  # a replaced value is no new key
    with pytest.raises(ValueError):
        kv.put("N", "k1", "x" * 100)
    again = kv_config.KvConfig(tmp_path)
    again.load()
    assert again.get("N", "k0") == "w" and again.get("N", "k1") == "v"

    now = [1_000_000]
    items = stats.KeyedStats(lambda: now[0])
    monkeypatch.setattr(stats, "MAX_STATS_KEYS", 2)
    for key in ("a", "b", "a", "c"):
        items.add(stats.TOPIC_PUT_NUMS, key, 1)
    assert items.snapshot(stats.TOPIC_PUT_NUMS, "b") is None  # least recently counted, dropped
    assert items.snapshot(stats.TOPIC_PUT_NUMS, "a")["statsMinute"]["sum"] == 2  # type: ignore[index]
    items.add(stats.GROUP_GET_NUMS, "T@" + "g" * 1000, 1)
    assert items.snapshot(stats.GROUP_GET_NUMS, "T@" + "g" * 1000) is None
    now[0] += 2 * 3_600_000  # two hours on: out of the minute and hour views, still in the day's
    day = items.snapshot(stats.TOPIC_PUT_NUMS, "a")
    assert day is not None and (day["statsMinute"]["sum"], day["statsHour"]["sum"], day["statsDay"]["sum"]) == (0, 0, 2)
