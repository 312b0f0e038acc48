"""put_nowait: the record is written at once, `PendingPut.result()` waits for the flush SYNC mode asks
for, and one sync confirms every put pending before it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from rocketstore import (
    FlushMode,
    InvalidMessageError,
    Message,
    MessageStore,
    PendingPut,
    PutStatus,
    StoreConfig,
    StoreReadOnlyError,
)
from rocketstore.storage import fs
from rocketstore.store.pending_put import WRITE_THRESHOLD

pytestmark = pytest.mark.timeout(120)  # a put that never settles fails the test instead of hanging it


def _config(**kw: object) -> StoreConfig:
    values: dict[str, object] = dict(commitlog_file_size=64 * 1024, consume_queue_file_entries=64,
                                     index_hash_slots=16, index_max_entries=64, deliver_delayed_messages=False,
                                     flush_consume_queue_interval_ms=3_600_000, clean_interval_ms=3_600_000)
    values.update(kw)
    return StoreConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, list[int]]]:
    """Every msync waits for the event once it is cleared; the list holds each msync's end."""
    opened = threading.Event()
    opened.set()
    calls: list[int] = []
    real = fs.msync

    def gated(mm, start, end):
        calls.append(end)
        opened.wait()
        real(mm, start, end)

    monkeypatch.setattr(fs, "msync", gated)
    yield opened, calls
    opened.set()  # a failed test must not leave the flush thread hanging (close() joins it)


def test_in_async_mode_the_result_is_final_at_once(tmp_path):
    with MessageStore.open(tmp_path, _config()) as store:
        pending = store.put_nowait(Message("T", b"one", keys=("k",)))
        assert isinstance(pending, PendingPut) and pending.done()
        result = pending.result()
        assert result.ok and result.phy_offset == 0
        assert store.message_at(result.phy_offset).body == b"one"
        assert store.query("T", "k")[0].body == b"one"


def test_one_sync_confirms_every_put_pending_before_it(tmp_path, gate):
    opened, calls = gate
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC)) as store:
        opened.clear()  # the first sync hangs
        try:
            first = store.put_nowait(Message("T", b"m0"))
            while not calls:  # the group commit wrote the queued put and syncs it
                time.sleep(0.001)
            assert store.max_offset("T", 0) == 1
            rest = [store.put_nowait(Message("T", b"m%d" % i)) for i in range(1, 20)]
            assert not first.done() and not any(p.done() for p in rest)
            syncs_before = len(calls)
        finally:
            opened.set()
        assert [p.result().status for p in [first, *rest]] == [PutStatus.PUT_OK] * 20
        assert len(calls) - syncs_before <= 1, "the 19 puts queued behind the hung sync shared the next one"
        assert [m.body for m in store.get("T", 0, 0).messages] == [b"m%d" % i for i in range(20)]


def test_a_queued_put_is_written_by_the_next_group_commit(tmp_path):
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC)) as store:
        pending = store.put_nowait(Message("T", b"seen", properties={"WAIT": "false"}))
        deadline = time.monotonic() + 10
        while store.max_offset("T", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert [m.body for m in store.get("T", 0, 0).messages] == [b"seen"], "nobody asked for the result"
        assert pending.result().ok and pending.done()


def test_queued_puts_and_direct_puts_of_a_thread_keep_its_order(tmp_path):
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC)) as store:
        store._background.flush.before_sync = None  # only the thread itself writes its queue
        queued = [store.put_nowait(Message("T", b"q%d" % i)) for i in range(3)]
        assert store.max_offset("T", 0) == 0, "fewer than the write threshold: still queued"
        assert store.put(Message("T", b"direct")).ok
        assert store.put_batch([Message("T", b"batch")])[0].ok
        assert all(p.result().ok for p in queued)
        assert [m.body for m in store.get("T", 0, 0).messages] == [b"q0", b"q1", b"q2", b"direct", b"batch"]


def test_a_producer_writes_the_queue_once_it_reaches_the_threshold(tmp_path):
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC)) as store:
        store._background.flush.before_sync = None
        pending = [store.put_nowait(Message("T", b"%d" % i)) for i in range(WRITE_THRESHOLD)]
        assert store.max_offset("T", 0) == WRITE_THRESHOLD
        assert [p.result().queue_offset for p in pending] == list(range(WRITE_THRESHOLD))


def test_a_put_the_disk_does_not_confirm_in_time_reports_flush_disk_timeout(tmp_path, gate):
    opened, _ = gate
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC, sync_flush_timeout_ms=50)) as store:
        opened.clear()
        try:
            pending = store.put_nowait(Message("T", b"late"))
            result = pending.result()
            assert result.status is PutStatus.FLUSH_DISK_TIMEOUT and pending.done()
            assert pending.result() is result, "the answer is kept"
            assert store.message_at(result.phy_offset).body == b"late", "the message is in the log"
        finally:
            opened.set()
        assert store.put_nowait(Message("T", b"again")).result().ok


def test_a_message_with_wait_false_does_not_wait_for_the_sync(tmp_path, gate):
    opened, calls = gate
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC)) as store:
        opened.clear()
        try:
            store.put_nowait(Message("T", b"hangs"))
            while not calls:  # a sync hangs
                time.sleep(0.001)
            pending = store.put_nowait(Message("T", b"fire and forget", properties={"WAIT": "false"}))
            assert pending.result().ok, "written, not waiting for the hung sync"
            assert pending.done()
        finally:
            opened.set()


def test_the_stores_own_flush_confirms_pending_puts(tmp_path):
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC, sync_flush_timeout_ms=60_000)) as store:
        store._background.flush.stop()  # no group commit runs: only flush() writes and confirms
        pending = [store.put_nowait(Message("T", b"m%d" % i)) for i in range(3)]
        assert not any(p.done() for p in pending)
        store.flush()
        assert all(p.done() for p in pending)
        assert [p.result().status for p in pending] == [PutStatus.PUT_OK] * 3


def test_a_flush_error_reports_flush_disk_timeout_and_turns_the_store_read_only(tmp_path, failing_msync):
    store = MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC))
    assert store.put_nowait(Message("T", b"kept")).result().ok
    failing_msync.broken = True
    assert store.put_nowait(Message("T", b"unconfirmed")).result().status is PutStatus.FLUSH_DISK_TIMEOUT
    with pytest.raises(StoreReadOnlyError, match="I/O error"):
        store.put_nowait(Message("T", b"refused"))
    store.close()
    failing_msync.broken = False
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC)) as again:
        assert [m.body for m in again.get("T", 0, 0).messages][:1] == [b"kept"]


def test_an_invalid_message_is_refused_at_once_and_nothing_is_written(tmp_path):
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC)) as store:
        with pytest.raises(InvalidMessageError, match="topic"):
            store.put_nowait(Message("bad topic!", b"x"))
        assert store.max_phy_offset == 0


def test_producer_threads_with_puts_pending_get_every_put_confirmed(tmp_path):
    with MessageStore.open(tmp_path, _config(flush_mode=FlushMode.SYNC)) as store:
        statuses: list[PutStatus] = []

        def producer(t: int) -> None:
            pending = [store.put_nowait(Message("T", b"%d-%d" % (t, i), queue_id=t)) for i in range(200)]
            statuses.extend(p.result().status for p in pending)

        threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert statuses == [PutStatus.PUT_OK] * 800
        assert store._background.flush.syncs < 800
        for t in range(4):
            assert [m.body for m in store.iter_queue("T", t)] == [b"%d-%d" % (t, i) for i in range(200)]
