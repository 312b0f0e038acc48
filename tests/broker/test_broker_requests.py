"""Requests a broker subprocess answers, driven with our own remoting client (no RocketMQ client)."""

from __future__ import annotations

import json
import socket
import threading
import time

from rocketstore import MessageStore
from rocketstore.format.msgid import decode_msg_id
from rocketstore.protocol import NEED_DATA, CommandReader, RemotingCommand, RequestCode, ResponseCode, encode_command
from rocketstore.protocol.bodies import BatchItem, encode_batch_body
from rocketstore.protocol.client import RemotingClient, decode_records
from rocketstore.protocol.codes import PULL_SUBSCRIPTION, PULL_SUSPEND
from tests.broker.broker_support import BrokerProcess


def send(client, topic, body, queue_id=0, props="TAGS\x01TagA\x02KEYS\x01key1", code=RequestCode.SEND_MESSAGE):
    fields = {"producerGroup": "P", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
              "queueId": queue_id, "sysFlag": 0, "bornTimestamp": 1_700_000_000_000, "flag": 0,
              "properties": props, "reconsumeTimes": 0, "unitMode": "false"}
    return client.request(code, fields, body)


def pull(client, topic, queue_id, offset, *, suspend_ms=0, expr="*"):
    sys_flag = PULL_SUBSCRIPTION | (PULL_SUSPEND if suspend_ms else 0)
    return client.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "G", "topic": topic, "queueId": queue_id, "queueOffset": offset, "maxMsgNums": 32,
        "sysFlag": sys_flag, "commitOffset": 0, "suspendTimeoutMillis": suspend_ms, "subscription": expr,
        "subVersion": 0})


def test_send_variants_pull_offsets_and_routes(broker: BrokerProcess):
    with RemotingClient(broker.addr, timeout_s=10) as client:
        first = send(client, "T1", b"one", queue_id=1)
        assert first.code == ResponseCode.SUCCESS, first.remark
        assert first.ext_fields["queueId"] == "1" and first.ext_fields["queueOffset"] == "0"
        host, phy = decode_msg_id(first.ext_fields["msgId"])
        assert host == broker.addr  # msgIds point at this broker, so clients can view by id

        short = {"a": "P", "b": "T1", "c": "TBW102", "d": "4", "e": "1", "f": "0", "g": "1", "h": "0",
                 "i": "TAGS\x01TagB", "j": "0", "k": "false", "m": "false"}
        v2 = client.request(RequestCode.SEND_MESSAGE_V2, short, b"two")
        assert (v2.code, v2.ext_fields["queueOffset"]) == (ResponseCode.SUCCESS, "1")

        batch = encode_batch_body([BatchItem(0, b"b%d" % i, f"KEYS\x01bk{i}") for i in range(3)])
        reply = send(client, "T1", batch, queue_id=1, props="", code=RequestCode.SEND_BATCH_MESSAGE)
        assert reply.code == ResponseCode.SUCCESS and len(reply.ext_fields["msgId"].split(",")) == 3
        # The Java producer sends batches with the short V2 header, as RocketMQ's broker reads them.
        v2_batch = client.request(RequestCode.SEND_BATCH_MESSAGE, {**short, "e": "2", "i": "", "m": "true"}, batch)
        assert (v2_batch.code, v2_batch.ext_fields["queueId"]) == (ResponseCode.SUCCESS, "2"), v2_batch.remark
        assert [m.keys for m in decode_records(pull(client, "T1", 2, 0).body)] == [["bk0"], ["bk1"], ["bk2"]]

        found = pull(client, "T1", 1, 0)
        assert found.code == ResponseCode.SUCCESS
        messages = decode_records(found.body)
        assert [m.body for m in messages] == [b"one", b"two", b"b0", b"b1", b"b2"]
        assert messages[0].phy_offset == phy and messages[0].born_host.startswith("127.0.0.1:")
        assert found.ext_fields["nextBeginOffset"] == "5" and found.ext_fields["maxOffset"] == "5"
        tagged = pull(client, "T1", 1, 0, expr="TagB")
        assert [m.body for m in decode_records(tagged.body)] == [b"two"]
        assert pull(client, "T1", 1, 5).code == ResponseCode.PULL_NOT_FOUND
        moved = pull(client, "T1", 1, 99)
        assert (moved.code, moved.ext_fields["nextBeginOffset"]) == (ResponseCode.PULL_OFFSET_MOVED, "5")
        assert pull(client, "Nope", 0, 0).code == ResponseCode.TOPIC_NOT_EXIST

        offsets = {"consumerGroup": "G", "topic": "T1", "queueId": 1}
        fresh = client.request(RequestCode.QUERY_CONSUMER_OFFSET, offsets)
        assert (fresh.code, fresh.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")
        assert client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**offsets, "commitOffset": 4}).code == 0
        assert client.request(RequestCode.QUERY_CONSUMER_OFFSET, offsets).ext_fields["offset"] == "4"
        assert client.request(RequestCode.GET_MAX_OFFSET, {"topic": "T1", "queueId": 1}).ext_fields["offset"] == "5"
        assert client.request(RequestCode.GET_MIN_OFFSET, {"topic": "T1", "queueId": 1}).ext_fields["offset"] == "0"

        back = client.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": phy, "group": "G", "delayLevel": 0, "originMsgId": first.ext_fields["msgId"],
            "maxReconsumeTimes": 0})
        assert back.code == ResponseCode.SUCCESS
        bad = send(client, "T1", b"x", queue_id=9)
        assert bad.code == ResponseCode.SYSTEM_ERROR and "out of range" in bad.remark

    with RemotingClient(broker.namesrv) as ns:
        assert ns.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Unknown"}).code == ResponseCode.TOPIC_NOT_EXIST
        route = ns.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "%RETRY%NewGroup"})
        assert route.code == ResponseCode.SUCCESS
        route = json.loads(ns.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T1"}).body)
        assert route["brokerDatas"][0]["brokerAddrs"] == {"0": broker.addr}
        assert route["queueDatas"][0]["writeQueueNums"] == 4

    assert broker.stop() == 0
    with MessageStore.open(broker.store, read_only=True) as store:
        assert [m.body for m in store.iter_queue("%DLQ%G", 0)] == [b"one"]
        assert store.committed_offset("G", "T1", 1) == 4


def test_held_pull_is_woken_by_a_send_and_times_out_otherwise(broker: BrokerProcess):
    with RemotingClient(broker.addr, timeout_s=10) as client:
        assert send(client, "Hold", b"first").code == ResponseCode.SUCCESS
        started = time.monotonic()
        empty = pull(client, "Hold", 0, 1, suspend_ms=400)
        assert empty.code == ResponseCode.PULL_NOT_FOUND
        assert time.monotonic() - started >= 0.35

    results = {}

    def held_pull():
        with RemotingClient(broker.addr, timeout_s=20) as waiting:
            started = time.monotonic()
            results["reply"] = pull(waiting, "Hold", 0, 1, suspend_ms=15_000)
            results["seconds"] = time.monotonic() - started

    thread = threading.Thread(target=held_pull)
    thread.start()
    time.sleep(0.5)
    with RemotingClient(broker.addr) as client:
        assert send(client, "Hold", b"second").code == ResponseCode.SUCCESS
    thread.join(20)
    assert not thread.is_alive()
    assert results["reply"].code == ResponseCode.SUCCESS
    assert [m.body for m in decode_records(results["reply"].body)] == [b"second"]
    assert results["seconds"] < 5


def test_consumer_list_and_queue_locks(broker: BrokerProcess):
    heartbeat = {"clientID": "client-a", "consumerDataSet": [{
        "groupName": "LockGroup", "consumeType": "CONSUME_PASSIVELY", "messageModel": "CLUSTERING",
        "subscriptionDataSet": [{"topic": "T1", "subString": "*"}]}], "producerDataSet": []}
    mqs = [{"topic": "T1", "brokerName": "broker-a", "queueId": q} for q in (0, 1)]
    with RemotingClient(broker.addr) as a, RemotingClient(broker.addr) as b:
        assert a.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "LockGroup"}).code != 0
        assert a.request(RequestCode.HEART_BEAT, body=json.dumps(heartbeat).encode()).code == 0
        ids = a.request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "LockGroup"})
        assert json.loads(ids.body) == {"consumerIdList": ["client-a"]}

        def lock(client, who, code=RequestCode.LOCK_BATCH_MQ):
            body = json.dumps({"consumerGroup": "LockGroup", "clientId": who, "mqSet": mqs}).encode()
            reply = client.request(code, body=body)
            assert reply.code == 0
            return sorted(mq["queueId"] for mq in json.loads(reply.body)["lockOKMQSet"]) if reply.body else None

        assert lock(a, "client-a") == [0, 1]
        assert lock(b, "client-b") == []
        lock(a, "client-a", RequestCode.UNLOCK_BATCH_MQ)
        assert lock(b, "client-b") == [0, 1]


def test_one_port_serves_both_roles_with_sync_flush(store_dir, tmp_path):
    proc = BrokerProcess(store_dir, tmp_path / "one-port.log", "--flush", "sync", one_port=True).start()
    try:
        with RemotingClient(proc.addr) as client:
            assert client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"}).code == 0
            reply = send(client, "Durable", b"synced")
            assert reply.code == ResponseCode.SUCCESS
    finally:
        assert proc.stop() == 0, proc.log()
    with MessageStore.open(store_dir, read_only=True) as store:
        assert [m.body for m in store.iter_queue("Durable", 0)] == [b"synced"]


def test_sigterm_with_a_held_pull_stops_promptly(broker: BrokerProcess):
    outcome = {}

    def held_pull():
        try:
            with RemotingClient(broker.addr, timeout_s=25) as client:
                outcome["reply"] = pull(client, "Idle", 0, 1, suspend_ms=20_000)
        except Exception as exc:  # the broker closes the connection on its way down
            outcome["error"] = exc

    with RemotingClient(broker.addr) as client:
        assert send(client, "Idle", b"only").code == ResponseCode.SUCCESS
    thread = threading.Thread(target=held_pull)
    thread.start()
    time.sleep(0.5)
    started = time.monotonic()
    assert broker.stop() == 0
    assert time.monotonic() - started < 10
    thread.join(10)
    assert not thread.is_alive() and "reply" not in outcome


def test_unregistering_consumer_gets_its_held_pulls_answered(broker: BrokerProcess):
    with RemotingClient(broker.addr) as client:
        assert send(client, "Leave", b"m").code == ResponseCode.SUCCESS
    held = RemotingCommand(RequestCode.PULL_MESSAGE, opaque=1, ext_fields={
        "consumerGroup": "G", "topic": "Leave", "queueId": "0", "queueOffset": "1", "maxMsgNums": "32",
        "sysFlag": str(PULL_SUSPEND), "commitOffset": "0", "suspendTimeoutMillis": "15000"})
    leave = RemotingCommand(RequestCode.UNREGISTER_CLIENT, opaque=2,
                            ext_fields={"clientID": "c1", "producerGroup": "", "consumerGroup": "G"})
    reader = CommandReader()
    replies = {}
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(encode_command(held))
        time.sleep(0.5)
        started = time.monotonic()
        sock.sendall(encode_command(leave))
        while len(replies) < 2:
            reader.feed(sock.recv(65536))
            while (cmd := reader.next_command()) is not NEED_DATA:
                replies[cmd.opaque] = cmd
        elapsed = time.monotonic() - started
    assert replies[1].code == ResponseCode.PULL_NOT_FOUND and replies[2].code == ResponseCode.SUCCESS
    assert elapsed < 3


def test_sends_to_system_topics_are_refused_with_no_permission(broker: BrokerProcess):
    with RemotingClient(broker.addr, timeout_s=10) as client:
        for topic in ("SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "rmq_sys_anything"):
            reply = send(client, topic, b"x", props="DELAY\x011")
            assert reply.code == ResponseCode.NO_PERMISSION, (topic, reply.remark)
            assert "forbidden" in reply.remark
        assert send(client, "T1", b"fine").code == ResponseCode.SUCCESS
    with MessageStore.open(broker.store, read_only=True) as store:
        assert [m.topic for m in store.scan()] == ["T1"]


def test_a_created_topic_survives_a_restart_before_its_first_message(broker: BrokerProcess):
    with RemotingClient(broker.addr) as client:
        created = client.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                 {"topic": "Empty", "readQueueNums": 2, "writeQueueNums": 2, "perm": 4})
        assert created.code == ResponseCode.SUCCESS
    assert broker.stop() == 0
    recorded = json.loads((broker.store / "config" / "topics.json").read_text())["topicConfigTable"]["Empty"]
    assert (recorded["readQueueNums"], recorded["writeQueueNums"], recorded["perm"]) == (2, 2, 4)
    broker.start()
    with RemotingClient(broker.addr) as client:
        table = json.loads(client.request(RequestCode.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    assert (table["Empty"]["writeQueueNums"], table["Empty"]["perm"]) == (2, 4)
