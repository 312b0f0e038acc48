"""PopService over an in-process store: redelivery, acknowledgements across a reload of the state file,
filters, FIFO groups, delivery times and the DLQ, with the clock passed in."""

from __future__ import annotations

import json

from rocketstore import Message, MessageStore
from rocketstore.broker.grpc.consumer_state import ConsumerStateTable
from rocketstore.broker.grpc.pop import PopService, tag_filter
from tests.broker.broker_support import create_store


def _pop(store: MessageStore, max_attempts: int = 3) -> PopService:
    table = ConsumerStateTable(store.path)
    table.load()
    return PopService(store, table, max_attempts, on_put=lambda t, q: None, ensure_dlq=lambda t: None)


def test_unacked_comes_back_raised_acked_never_even_after_reload(tmp_path):
    with MessageStore.open(create_store(tmp_path / "s")) as store:
        for i in range(3):
            store.put(Message("T", b"m%d" % i, tags="A" if i != 1 else "B"))
        pop = _pop(store)
        first = pop.receive("G", "T", [0], tag_filter("A"), 10, 10_000, now_ms=1_000)
        assert [(d.message.body, d.attempt) for d in first] == [(b"m0", 1), (b"m2", 1)]
        pop.ack("G", "T", first[0].receipt_handle, now_ms=2_000)
        assert pop.receive("G", "T", [0], tag_filter("A"), 10, 10_000, now_ms=5_000) == []  # still invisible
        again = _pop(store).receive("G", "T", [0], tag_filter("A"), 10, 10_000, now_ms=11_001)  # from the file
        assert [(d.message.body, d.attempt) for d in again] == [(b"m2", 2)]
        state = json.loads((store.path / "config" / "grpcConsumerState.json").read_text())
        assert state["queues"][0]["offset"] == 2  # m0 acked, m1 filtered out; m2 in flight
        assert store.committed_offset("G", "T", 0) == 2


def test_fifo_groups_wait_and_exhausted_messages_go_to_the_dlq(tmp_path):
    dead = []
    with MessageStore.open(create_store(tmp_path / "s")) as store:
        for i in range(2):
            store.put(Message("T", b"f%d" % i, properties={"__SHARDINGKEY": "g"}))
        store.put(Message("T", b"due", properties={"TIMER_DELIVER_MS": "50000"}))
        pop = _pop(store, max_attempts=2)
        pop.ensure_dlq = dead.append
        got = pop.receive("G", "T", [0], None, 10, 10_000, now_ms=1_000)
        assert [d.message.body for d in got] == [b"f0"]  # f1 waits for f0, "due" for its time
        got = pop.receive("G", "T", [0], None, 10, 10_000, now_ms=11_001)
        assert [(d.message.body, d.attempt) for d in got] == [(b"f0", 2)]
        got = pop.receive("G", "T", [0], None, 10, 10_000, now_ms=50_000)
        assert [(d.message.body, d.attempt) for d in got] == [(b"f1", 1), (b"due", 1)]  # f0 went to the DLQ
        assert dead == ["%DLQ%G"]
        (copy,) = list(store.iter_queue("%DLQ%G", 0))
        assert copy.body == b"f0" and copy.properties["DLQ_ORIGIN_TOPIC"] == "T"
