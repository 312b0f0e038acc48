"""The real RocketMQ C++ client (PyPI rocketmq 0.4.4) against `python -m rocketstore.broker`."""

from __future__ import annotations

import json
import time
from collections import Counter, defaultdict

import pytest

from rocketstore import MessageStore
from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient
from tests.broker.broker_support import BrokerProcess, finish

pytestmark = pytest.mark.broker

COUNT = 24


def sends(lines):
    return [line for line in lines if "status" in line or "error" in line]


def received(lines):
    return [line for line in lines if "body" in line and "queue_offset" in line]


def test_produce_push_pull_query_and_resume_after_restart(broker: BrokerProcess, real_client, tmp_path):
    results = sends(real_client.run("produce", "--namesrv", broker.namesrv, "--topic", "OrderTopic",
                                    "--count", str(COUNT), "--tags", "TagA,TagB"))
    assert [r.get("status") for r in results] == [0] * COUNT, results
    assert len({r["msg_id"] for r in results}) == COUNT

    # Push consumer, clustering mode, tag filter: every TagA message exactly once, no TagB.
    lines = real_client.run("push", "--namesrv", broker.namesrv, "--topic", "OrderTopic", "--group", "GroupPush",
                            "--expr", "TagA", "--expect", str(COUNT // 2), "--timeout", "40")
    got = received(lines)
    want_a = sorted(r["body"] for r in results if r["tag"] == "TagA")
    assert sorted(m["body"] for m in got) == want_a
    assert {m["tags"] for m in got} == {"TagA"}

    # Pull consumer pages through every queue and sees everything, in queue order.
    pulled = received(real_client.run("pull", "--namesrv", broker.namesrv, "--topic", "OrderTopic",
                                      "--group", "GroupPull"))
    assert sorted(m["body"] for m in pulled) == sorted(r["body"] for r in results)
    per_queue = defaultdict(list)
    for m in pulled:
        per_queue[m["queue_id"]].append(m["queue_offset"])
    assert sorted(per_queue) == [0, 1, 2, 3]
    assert all(offsets == list(range(len(offsets))) for offsets in per_queue.values())

    # Query by key (code 12) and by offset msgId (code 33) with our own client code.
    with RemotingClient(broker.addr) as client:
        by_key = client.query_message("OrderTopic", "k7")
        assert [m.body for m in by_key] == [b"k-body-7"]
        assert by_key[0].keys == ["k7"]
        by_uniq = client.query_message("OrderTopic", results[3]["msg_id"])
        assert [m.body for m in by_uniq] == [b"k-body-3"]
        viewed = client.view_message(by_key[0].msg_id)
        assert (viewed.body, viewed.tags, viewed.phy_offset) == (b"k-body-7", "TagB", by_key[0].phy_offset)
        assert client.query_message("OrderTopic", "no-such-key") == []

    # Offsets survive a restart: the same group only gets what was sent after it.
    assert broker.stop() == 0
    broker.start()
    more = sends(real_client.run("produce", "--namesrv", broker.namesrv, "--topic", "OrderTopic",
                                 "--count", "6", "--key-prefix", "late", "--tags", "TagA,TagB"))
    assert [r.get("status") for r in more] == [0] * 6
    lines = real_client.run("push", "--namesrv", broker.namesrv, "--topic", "OrderTopic", "--group", "GroupPush",
                            "--expr", "TagA", "--expect", "3", "--timeout", "40")
    assert sorted(m["body"] for m in received(lines)) == ["late-body-0", "late-body-2", "late-body-4"]

    assert broker.stop() == 0
    with MessageStore.open(broker.store, read_only=True) as store:
        assert sum(1 for m in store.scan() if m.topic == "OrderTopic") == COUNT + 6
        committed = {q: store.committed_offset("GroupPush", "OrderTopic", q) for q in range(4)}
        assert sum(committed.values()) == COUNT + 6


def test_failed_consumption_comes_back_through_the_retry_topic(broker: BrokerProcess, real_client):
    results = sends(real_client.run("produce", "--namesrv", broker.namesrv, "--topic", "RetryTopic",
                                    "--count", "4", "--tags", "TagR"))
    assert [r.get("status") for r in results] == [0] * 4
    lines = real_client.run("push", "--namesrv", broker.namesrv, "--topic", "RetryTopic", "--group", "GroupRetry",
                            "--expr", "TagR", "--expect", "4", "--timeout", "60", "--fail-first")
    got = received(lines)
    redelivered = {m["body"] for m in got if m["reconsume_times"] >= 1}
    assert redelivered == {r["body"] for r in results}
    assert {m["retry_topic"] for m in got if m["reconsume_times"] >= 1} == {"RetryTopic"}
    assert all(m["topic"] == "RetryTopic" for m in got)

    assert broker.stop() == 0
    with MessageStore.open(broker.store, read_only=True) as store:
        retried = list(store.iter_queue("%RETRY%GroupRetry", 0))
        assert sorted(m.body for m in retried) == sorted(r["body"].encode() for r in results)
        assert {m.properties["RETRY_TOPIC"] for m in retried} == {"RetryTopic"}
        assert {m.reconsume_times for m in retried} == {1}
        parked = Counter(m.topic for m in store.scan())
        assert parked["SCHEDULE_TOPIC_XXXX"] == 4  # each went through delay level 3 first


def test_orderly_consumer_locks_queues_and_gets_each_queue_in_order(broker: BrokerProcess, real_client):
    results = sends(real_client.run("produce", "--namesrv", broker.namesrv, "--topic", "SeqTopic",
                                    "--count", "16", "--tags", "TagQ"))
    assert [r.get("status") for r in results] == [0] * 16
    lines = real_client.run("push", "--namesrv", broker.namesrv, "--topic", "SeqTopic", "--group", "GroupSeq",
                            "--expect", "16", "--timeout", "40", "--orderly")
    got = received(lines)
    assert sorted(m["body"] for m in got) == sorted(r["body"] for r in results)
    per_queue = defaultdict(list)
    for m in got:
        per_queue[m["queue_id"]].append(m["queue_offset"])
    assert {q: offsets for q, offsets in per_queue.items()} == {q: [0, 1, 2, 3] for q in range(4)}


def _bodies(client_process) -> list[str]:
    lines = client_process.out.read_text(errors="replace").splitlines()
    return [json.loads(line)["body"] for line in lines if line.startswith('{"topic"')]


def test_two_push_consumers_of_one_group_share_the_queues_without_duplicates(broker: BrokerProcess, real_client,
                                                                              tmp_path):
    stop = tmp_path / "stop-consumers"
    # The topic exists before the consumers start, so their first route lookup finds its queues
    # (an auto-created topic is only seen at the client's next periodic route refresh).
    with RemotingClient(broker.addr) as admin:
        created = admin.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                {"topic": "ShareTopic", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6})
        assert created.code == ResponseCode.SUCCESS
    consumers = [real_client.start("push", "--namesrv", broker.namesrv, "--topic", "ShareTopic", "--group",
                                   "GroupShare", "--expect", "1000", "--timeout", "60", "--linger", "0",
                                   "--stop-file", str(stop)) for _ in range(2)]
    time.sleep(3)  # both join the group and rebalance before anything is sent
    results = sends(real_client.run("produce", "--namesrv", broker.namesrv, "--topic", "ShareTopic",
                                    "--count", "40", "--tags", "TagS"))
    assert [r.get("status") for r in results] == [0] * 40
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline and sum(len(_bodies(c)) for c in consumers) < 40:
        time.sleep(0.2)
    time.sleep(1.5)  # room for duplicates to show up
    stop.write_text("stop")
    for consumer in consumers:
        finish(consumer, 30)
    first, second = (_bodies(c) for c in consumers)
    assert sorted(first + second) == sorted(r["body"] for r in results)
    assert first and second  # clustering mode: the group's queues are split between its members


def test_large_bodies_compressed_by_the_client_arrive_intact(broker: BrokerProcess, real_client):
    results = sends(real_client.run("produce", "--namesrv", broker.namesrv, "--topic", "BigTopic", "--count", "3",
                                    "--tags", "TagZ", "--body-size", "20000"))
    assert [r.get("status") for r in results] == [0] * 3
    pulled = received(real_client.run("pull", "--namesrv", broker.namesrv, "--topic", "BigTopic",
                                      "--group", "GroupBig"))
    assert sorted(m["body"] for m in pulled) == sorted(r["body"] for r in results)
    assert all(len(m["body"]) == 20000 for m in pulled)
    assert broker.stop() == 0
    with MessageStore.open(broker.store, read_only=True) as store:
        stored = [m for m in store.scan() if m.topic == "BigTopic"]
    assert len(stored) == 3
    assert all(m.sys_flag & 0x1 and len(m.body) < 20000 for m in stored)  # zlib-compressed by the producer


def test_send_batch_stores_each_message(broker: BrokerProcess, real_client):
    lines = real_client.run("produce", "--namesrv", broker.namesrv, "--topic", "BatchTopic", "--count", "5",
                            "--tags", "TagB", "--batch")
    assert lines[0] == {"batch": 5, "status": 0, "offset": 0}
    with RemotingClient(broker.addr) as client:
        assert [m.body for m in client.query_message("BatchTopic", "k3")] == [b"k-body-3"]
    pulled = received(real_client.run("pull", "--namesrv", broker.namesrv, "--topic", "BatchTopic",
                                      "--group", "GroupBatch"))
    assert [m["body"] for m in pulled] == [f"k-body-{i}" for i in range(5)]
    assert [m["queue_offset"] for m in pulled] == list(range(5))
    assert len({m["queue_id"] for m in pulled}) == 1
