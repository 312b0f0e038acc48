"""Broker bookkeeping without sockets: topic table, client registry, queue locks, held pulls."""

from __future__ import annotations

import asyncio

import pytest

from rocketstore.broker.clients import ClientRegistry
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.long_poll import PullWaiters, Wakeup
from rocketstore.broker.topics import PERM_WRITE, TopicTable, valid_topic
from rocketstore.protocol import RequestCode
from rocketstore.protocol.address import split_address


class FakeConnection:
    def __init__(self) -> None:
        self.sent: list[tuple[int, dict[str, str]]] = []

    def send_oneway(self, code, ext_fields, body=b""):
        self.sent.append((code, ext_fields))


def _heartbeat(client_id, group, topics=("T",)):
    return {"clientID": client_id, "consumerDataSet": [{
        "groupName": group, "messageModel": "CLUSTERING",
        "subscriptionDataSet": [{"topic": t, "subString": "TagA || TagB"} for t in topics]}],
        "producerDataSet": [{"groupName": "P"}]}


def test_registry_tracks_members_and_reports_changes_once():
    reg = ClientRegistry(lock_expiry_ms=1000, clock_ms=lambda: 0)
    a, b = FakeConnection(), FakeConnection()
    assert reg.heartbeat(_heartbeat("a", "G"), a) == ["G"]
    assert reg.heartbeat(_heartbeat("a", "G"), a) == []  # a repeated heartbeat changes nothing
    assert reg.heartbeat(_heartbeat("b", "G"), b) == ["G"]
    assert reg.consumer_ids("G") == ["a", "b"]
    assert reg.subscription("G", "T") == "TagA || TagB"
    reg.notify_changed("G")
    assert a.sent == b.sent == [(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "G"})]
    assert reg.connection_closed(b) == ["G"]
    assert reg.consumer_ids("G") == ["a"]
    assert reg.unregister("a", "P", "G") == ["G"]
    assert reg.consumer_ids("G") == [] and reg.producers["P"] == {}


def test_queue_locks_expire_and_are_released_with_their_holder():
    now = [0]
    reg = ClientRegistry(lock_expiry_ms=1000, clock_ms=lambda: now[0])
    mqs = [("T", "b", 0), ("T", "b", 1)]
    conn = FakeConnection()
    reg.heartbeat(_heartbeat("a", "G"), conn)
    assert reg.lock("G", "a", mqs) == mqs
    assert reg.lock("G", "b", mqs) == []
    now[0] = 1001
    assert reg.lock("G", "b", mqs[:1]) == mqs[:1]  # a's lock on queue 0 expired
    assert reg.lock("G", "a", mqs) == mqs[1:]
    reg.connection_closed(conn)
    assert reg.lock("G", "b", mqs) == mqs


def test_topic_table_adopts_store_topics():
    table = TopicTable(default_queue_nums=4)
    table.adopt({"Old": {"writeQueueNums": 8, "perm": 6}, "%RETRY%G": {"writeQueueNums": 1}},
                {"Old": [0, 9], "New": [2], "%RETRY%G": [0], "SCHEDULE_TOPIC_XXXX": [2]})
    assert table.get("Old").write_queue_nums == 10
    assert table.get("New").write_queue_nums == 4
    assert table.get("%RETRY%G").write_queue_nums == 1
    assert table.get("SCHEDULE_TOPIC_XXXX") is None
    assert table.get("TBW102").perm & PERM_WRITE
    assert valid_topic("%RETRY%G-1_a|b") and not valid_topic("bad topic") and not valid_topic("x" * 128)


def test_pull_waiters_wake_only_their_queue_or_owner():
    async def scenario():
        waiters = PullWaiters()
        woken = asyncio.create_task(waiters.wait("T", 0, 5, owner=("conn", "G")))
        released = asyncio.create_task(waiters.wait("T", 1, 5, owner=("conn", "H")))
        timed_out = asyncio.create_task(waiters.wait("T", 2, 0.2, owner=("conn", "H2")))
        await asyncio.sleep(0.05)
        assert waiters.held == 3
        waiters.notify("T", 0)
        waiters.release_matching(lambda owner: owner[1] == "H")
        return await woken, await released, await timed_out, waiters.held

    assert asyncio.run(scenario()) == (Wakeup.ARRIVED, Wakeup.RELEASED, Wakeup.TIMEOUT, 0)


def test_addresses():
    assert split_address("127.0.0.1:10911") == ("127.0.0.1", 10911)
    assert split_address("[::1]:9876") == ("::1", 9876)
    assert BrokerConfig(store_path="s", listen="0.0.0.0:1234").broker_addr == "127.0.0.1:1234"


@pytest.mark.parametrize("bad", ["nohost", "h:", "h:99999", "h:x"])
def test_bad_addresses_are_refused(bad):
    with pytest.raises(ValueError):
        split_address(bad)
