"""A plain ASYNC put leaves its queue entry and index keys behind the log (`WritePath.dispatch_behind`):
when the catch-up runs (every read of the queues or the index, 1 MiB of log, the queue flush pass,
listeners, SYNC mode), and that a reader never sees less than what was put. The bytes it writes are
held equal to the at-once path's by tests/unit/store/test_put_one.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from rocketstore import FlushMode, Message, MessageStore, StoreClosedError, StoreConfig
from rocketstore.format.consume_queue import UNIT_SIZE
from rocketstore.format.store_dirs import CONSUME_QUEUE_DIR
from rocketstore.store.write_path import PUT_BEHIND_BYTES

CONFIG = StoreConfig(commitlog_file_size=4 * 1024 * 1024, consume_queue_file_entries=50_000,
                     flush_consume_queue_interval_ms=3_600_000, deliver_delayed_messages=False)


def _entries_on_disk(root: Path, topic: str, queue_id: int) -> int:
    """Consume-queue entries in the queue's files (the mapping's bytes, as another process sees them)."""
    directory = root / CONSUME_QUEUE_DIR / topic / str(queue_id)
    if not directory.is_dir():  # made by the queue's first dispatch
        return 0
    count = 0
    for path in sorted(directory.iterdir()):
        data = path.read_bytes()
        for pos in range(0, len(data), UNIT_SIZE):
            if data[pos:pos + UNIT_SIZE] == bytes(UNIT_SIZE):
                return count
            count += 1
    return count


def test_every_read_sees_the_puts_before_it(tmp_path):
    with MessageStore.open(tmp_path, CONFIG) as store:
        for i in range(30):
            r = store.put(Message("T", b"m%d" % i, queue_id=i % 2, keys=(f"k{i}",)))
            assert r.queue_offset == i // 2
        assert store._writes.behind_to > store._writes.dispatched_to  # left behind so far
        assert store.max_offset("T", 1) == 15
        assert store._writes.behind_to <= store._writes.dispatched_to
        store.put(Message("T", b"last", keys=("k-last",)))
        assert [m.body for m in store.query("T", "k-last")] == [b"last"]
        store.put(Message("T", b"more", queue_id=1))
        assert store.get("T", 1, 15).messages[0].body == b"more"
        store.put(Message("U", b"new topic"))
        assert "U" in store.topic_config()
        assert store.queues() == {"T": [0, 1], "U": [0]}


def test_a_put_past_the_bound_dispatches_what_is_behind(tmp_path):
    body = b"x" * 1000
    with MessageStore.open(tmp_path, CONFIG) as store:
        count = 3 * PUT_BEHIND_BYTES // len(body)
        for _ in range(count):
            store.put(Message("T", body))
            assert store._writes.behind_to - store._writes.dispatched_to <= PUT_BEHIND_BYTES + 2 * len(body)
        on_disk = _entries_on_disk(tmp_path, "T", 0)
        assert count - PUT_BEHIND_BYTES // len(body) <= on_disk < count


def test_the_queue_flush_pass_dispatches_what_is_behind(tmp_path):
    config = StoreConfig(flush_consume_queue_interval_ms=20, deliver_delayed_messages=False)
    with MessageStore.open(tmp_path, config) as store:
        for i in range(5):
            store.put(Message("T", b"m%d" % i))
        deadline = time.monotonic() + 10
        while _entries_on_disk(tmp_path, "T", 0) < 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _entries_on_disk(tmp_path, "T", 0) == 5


def test_a_listener_hears_of_each_put_as_it_happens(tmp_path):
    heard: list[tuple[str, int, int]] = []
    with MessageStore.open(tmp_path, CONFIG) as store:
        store.put(Message("T", b"before"))
        remove = store.add_arrival_listener(lambda topic, queue_id, end: heard.append((topic, queue_id, end)))
        assert heard == [] and store._writes.dispatched_to == store.max_phy_offset  # the catch-up ran first
        store.put(Message("T", b"heard"))
        assert heard == [("T", 0, 2)]  # during the put: the broker's long polling wakes at once
        remove()
        store.put(Message("T", b"behind again"))
        assert heard == [("T", 0, 2)]
        assert store._writes.behind_to > store._writes.dispatched_to
        assert store.max_offset("T", 0) == 3
        assert heard == [("T", 0, 2)]  # a listener removed hears nothing of the catch-up


def test_sync_puts_and_batches_dispatch_at_once(tmp_path):
    with MessageStore.open(tmp_path / "sync", StoreConfig(flush_mode=FlushMode.SYNC)) as store:
        store.put(Message("T", b"sync"))
        assert store._writes._put_behind is None and _entries_on_disk(tmp_path / "sync", "T", 0) == 1
    with MessageStore.open(tmp_path / "async", CONFIG) as store:
        store.put(Message("T", b"behind"))
        store.put_batch([Message("T", b"batch %d" % i) for i in range(3)])  # the catch-up first, then its own
        assert store._writes.dispatched_to == store.max_phy_offset
        assert _entries_on_disk(tmp_path / "async", "T", 0) == 4


def test_a_store_closed_with_puts_behind_reopens_clean_with_all_of_them(tmp_path):
    with MessageStore.open(tmp_path, CONFIG) as store:
        for i in range(100):
            store.put(Message("T", b"m%d" % i, keys=(f"k{i}",)))
        assert store._writes.behind_to > store._writes.dispatched_to
    assert _entries_on_disk(tmp_path, "T", 0) == 100
    with MessageStore.open(tmp_path, CONFIG) as store:
        assert store.recovery.mode.value == "normal"
        assert store.recovery.queue_entries_dispatched == 0
        assert [m.body for m in store.query("T", "k99")] == [b"m99"]


def test_what_the_compiled_put_declines_goes_behind_too(tmp_path):
    """Properties, a record of 16 KiB or more and a record that rolls the commitlog file are written by
    the Python twin, still without their dispatch, and read back."""
    config = StoreConfig(commitlog_file_size=64 * 1024, flush_consume_queue_interval_ms=3_600_000,
                         deliver_delayed_messages=False)
    with MessageStore.open(tmp_path, config) as store:
        store.put(Message("T", b"first"))
        store.max_offset("T", 0)
        bodies = [b"p" * 10, b"B" * (17 * 1024), b"r" * 30_000, b"s" * 30_000, b"after the roll"]
        results = [store.put(Message("T", body, keys=(f"k{i}",), properties={"A": "b"} if i == 0 else None))
                   for i, body in enumerate(bodies)]
        assert store._writes.behind_to == results[-1].phy_offset + results[-1].size > store._writes.dispatched_to
        assert results[-1].phy_offset >= config.commitlog_file_size  # a file rolled
        assert _entries_on_disk(tmp_path, "T", 0) == 1
        got = store.get("T", 0, 1, 8)
        assert [m.body for m in got.messages] == bodies
        assert [m.body for m in store.query("T", "k3")] == [bodies[3]]
        assert store.get("T", 0, 0, 1).messages[0].properties.get("A") is None
        assert store.get("T", 0, 1, 1).messages[0].properties["A"] == "b"


def test_a_store_closed_after_a_write_failure_with_puts_behind_answers_as_closed(tmp_path):
    """close() skips the flush of a failed store: what stayed behind is left to the next open, and a
    read of the closed store says the store is closed (it does not try to dispatch into closed files)."""
    store = MessageStore.open(tmp_path, CONFIG)
    for i in range(3):
        store.put(Message("T", b"m%d" % i))
    store._writes.turn_read_only("write failed: test")
    store.close()
    with pytest.raises(StoreClosedError, match=f"store {tmp_path} is closed"):
        store.get("T", 0, 0)
    with pytest.raises(StoreClosedError, match=f"store {tmp_path} is closed"):
        store.max_offset("T", 0)
    with MessageStore.open(tmp_path, CONFIG) as reopened:
        assert [m.body for m in reopened.get("T", 0, 0).messages] == [b"m0", b"m1", b"m2"]
