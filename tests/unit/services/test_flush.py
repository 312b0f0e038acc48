"""Flush services driven one step at a time, the checkpoint file they keep, and the abort marker."""

from __future__ import annotations

import errno
import threading
import time
from pathlib import Path

import pytest

from rocketstore import FlushMode, Message, MessageStore, PutStatus, StoreConfig, StoreReadOnlyError
from rocketstore.format.checkpoint import FIELDS_V4, FIELDS_V5, PAGE_SIZE
from rocketstore.format.index import index_file_size
from rocketstore.log.checkpoint import StoreCheckpoint
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.index_service import IndexService
from rocketstore.services.flush import CommitLogFlushService, GroupCommitService, QueueFlushService
from rocketstore.storage import fs

T0 = 1_800_000_000_000
FILE = 64 * 1024


class Clock:
    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def msyncs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """Every msync of the test, (start, end)."""
    calls: list[tuple[int, int]] = []
    real = fs.msync

    def counting(mm, start, end):
        calls.append((start, end))
        real(mm, start, end)

    monkeypatch.setattr(fs, "msync", counting)
    return calls


def _log(root: Path) -> tuple[CommitLog, StoreCheckpoint]:
    commitlog = CommitLog(root, FILE)
    commitlog.load()
    return commitlog, StoreCheckpoint(root)


def _append(commitlog: CommitLog, size: int) -> int:
    mf = commitlog.file_for_append(size)
    mf.append(b"\x01" * size)
    return commitlog.max_offset


def test_one_group_commit_sync_releases_every_put_written_before_it(tmp_path, msyncs):
    commitlog, checkpoint = _log(tmp_path)
    service = GroupCommitService(commitlog, checkpoint, last_store_timestamp=lambda: T0, lock=threading.Lock())
    ends = [_append(commitlog, 100) for _ in range(3)]
    service.run_once()
    assert service.syncs == 1 and len(msyncs) == 1
    assert all(service.wait_flushed(end, timeout_ms=0) for end in ends)
    assert checkpoint.values.physic_msg_timestamp == T0
    service.run_once()
    assert service.syncs == 1, "nothing new written: no sync"
    assert not service.wait_flushed(_append(commitlog, 10), timeout_ms=0)


def test_a_failed_group_commit_releases_waiters_unconfirmed(tmp_path, monkeypatch):
    commitlog, checkpoint = _log(tmp_path)
    service = GroupCommitService(commitlog, checkpoint, last_store_timestamp=lambda: T0, lock=threading.Lock())
    end = _append(commitlog, 100)

    def broken(mm, start, end):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(fs, "msync", broken)
    with pytest.raises(OSError):
        service.run_once()
    service.fail(OSError(errno.EIO, "I/O error"))
    assert not service.wait_flushed(end, timeout_ms=10_000)
    assert service.flushed_offset == 0 and checkpoint.values.physic_msg_timestamp == 0


def _resident_pages(mm, start: int, end: int) -> int:
    """How many pages of [start, end) of a mapping are in memory (mincore, through ctypes)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    pages = (end - start) // fs.PAGE_SIZE
    vec = (ctypes.c_ubyte * pages)()
    address = ctypes.addressof(ctypes.c_char.from_buffer(mm)) + start
    assert libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(end - start), vec) == 0, ctypes.get_errno()
    return sum(v & 1 for v in vec)


def test_the_async_flush_populates_twice_what_the_log_grew_ahead_of_the_writes(tmp_path, msyncs):
    commitlog = CommitLog(tmp_path, 4 * 1024 * 1024)
    commitlog.load()
    service = CommitLogFlushService(commitlog, StoreCheckpoint(tmp_path), Clock(), interval_ms=500, least_pages=1,
                                    thorough_interval_ms=10_000, last_store_timestamp=lambda: T0,
                                    lock=threading.Lock())
    service.run_once()
    assert service._warmed_to == 0, "nothing written: nothing populated"
    end = _append(commitlog, 64 * 1024)
    mm = commitlog.queue.last.mm
    assert _resident_pages(mm, end, end + 128 * 1024) == 0
    if not fs.populate(mm, 0, fs.PAGE_SIZE):  # a page written already: populating it changes nothing
        pytest.skip("no compiled module or a kernel before Linux 5.14: nothing is populated")
    service.run_once()
    ahead = end + 128 * 1024
    assert service._warmed_to == ahead
    assert _resident_pages(mm, end, ahead) == 128 * 1024 // fs.PAGE_SIZE
    assert bytes(mm[end:ahead]) == bytes(ahead - end), "populating writes no data"
    service.run_once()
    assert service._warmed_to == ahead, "the log did not grow: nothing more"


def test_async_flush_waits_for_least_pages_until_the_thorough_interval(tmp_path, msyncs):
    commitlog, checkpoint = _log(tmp_path)
    clock = Clock()
    service = CommitLogFlushService(commitlog, checkpoint, clock, interval_ms=500, least_pages=4,
                                    thorough_interval_ms=10_000, last_store_timestamp=lambda: T0 + 1,
                                    lock=threading.Lock())
    _append(commitlog, 3 * fs.PAGE_SIZE)
    service.run_once()
    assert msyncs == [] and commitlog.queue.flushed_offset == 0
    _append(commitlog, fs.PAGE_SIZE + 10)
    service.run_once()
    assert commitlog.queue.flushed_offset == 4 * fs.PAGE_SIZE + 10
    assert checkpoint.values.physic_msg_timestamp == 0, "only a thorough flush vouches for a timestamp"
    _append(commitlog, 10)
    clock.now += 10_000
    service.run_once()
    assert commitlog.queue.flushed_offset == commitlog.max_offset
    assert checkpoint.values.physic_msg_timestamp == T0 + 1


def test_queue_flush_writes_the_checkpoint_only_on_a_thorough_pass(tmp_path):
    commitlog, checkpoint = _log(tmp_path)
    index = IndexService(tmp_path, 8, 8, clock=Clock())
    clock = Clock()
    service = QueueFlushService(lambda: [], index, checkpoint, clock, interval_ms=1000,
                                thorough_interval_ms=60_000, lock=threading.Lock())
    service.logics_timestamp = T0 + 5
    service.run_once()
    on_disk = FIELDS_V4.unpack((tmp_path / "checkpoint").read_bytes()[:FIELDS_V4.size])
    assert on_disk == (0, T0 + 5, 0)
    service.logics_timestamp = T0 + 9
    clock.now += 1_000
    service.run_once()
    assert FIELDS_V4.unpack((tmp_path / "checkpoint").read_bytes()[:FIELDS_V4.size])[1] == T0 + 5
    clock.now += 60_000
    service.run_once()
    assert FIELDS_V4.unpack((tmp_path / "checkpoint").read_bytes()[:FIELDS_V4.size])[1] == T0 + 9


def test_the_checkpoint_reads_5x_fields_and_leaves_them_in_place(tmp_path):
    page = bytearray(PAGE_SIZE)
    FIELDS_V5.pack_into(page, 0, 11, 22, 33, 44, 55)
    (tmp_path / "checkpoint").write_bytes(bytes(page))
    cp = StoreCheckpoint(tmp_path)
    values = cp.values
    assert (values.physic_msg_timestamp, values.logics_msg_timestamp, values.index_msg_timestamp,
            values.master_flushed_offset, values.confirm_phy_offset) == (11, 22, 33, 44, 55)
    values.physic_msg_timestamp = 99
    cp.flush()
    cp.close()
    data = (tmp_path / "checkpoint").read_bytes()
    assert len(data) == PAGE_SIZE and FIELDS_V5.unpack_from(data) == (99, 22, 33, 44, 55)


def _small(**kw: object) -> StoreConfig:
    values: dict[str, object] = dict(commitlog_file_size=FILE, consume_queue_file_entries=10,
                                     index_hash_slots=4, index_max_entries=4, deliver_delayed_messages=False)
    values.update(kw)
    return StoreConfig(**values)  # type: ignore[arg-type]


def test_abort_file_marks_an_open_store_and_goes_at_a_clean_close(tmp_path):
    store = MessageStore.open(tmp_path, _small(), clock=Clock())
    assert (tmp_path / "abort").exists()
    store.put(Message("T", b"x"))
    store.close()
    assert not (tmp_path / "abort").exists()
    with MessageStore.open(tmp_path, _small(), clock=Clock()) as again:
        assert again.recovery.mode.value == "normal"


def test_a_full_index_file_on_disk_becomes_the_checkpoints_index_timestamp(tmp_path):
    clock = Clock()
    with MessageStore.open(tmp_path, _small(), clock=clock) as store:
        for i in range(5):  # 3 keys fill a 4-entry index file (entry 0 is unused)
            clock.now += 1000
            store.put(Message("T", b"x", keys=[f"k{i}"]))
        store._writes.dispatch_behind()  # the index keys of puts follow behind the log
        assert len(store.index.files) >= 2
        full_end = store.index.files[0].header.end_timestamp
        on_disk = FIELDS_V4.unpack((tmp_path / "checkpoint").read_bytes()[:FIELDS_V4.size])
        assert on_disk[2] == full_end > 0


def test_sync_put_reports_flush_disk_timeout_when_the_disk_does_not_answer(tmp_path, monkeypatch):
    release = threading.Event()
    real = fs.msync
    hanging = {"on": False}

    def slow(mm, start, end):
        if hanging["on"]:
            release.wait()
        real(mm, start, end)

    monkeypatch.setattr(fs, "msync", slow)
    cfg = _small(flush_mode=FlushMode.SYNC, sync_flush_timeout_ms=50)
    with MessageStore.open(tmp_path, cfg, clock=Clock()) as store:
        assert store.put(Message("T", b"fast")).status is PutStatus.PUT_OK
        hanging["on"] = True
        late = store.put(Message("T", b"slow"))
        assert late.status is PutStatus.FLUSH_DISK_TIMEOUT
        assert store.message_at(late.phy_offset).body == b"slow", "the message is in the log"
        hanging["on"] = False
        release.set()
        assert store.put(Message("T", b"again")).status is PutStatus.PUT_OK


def test_a_sync_flush_error_turns_the_store_read_only(tmp_path, failing_msync):
    store = MessageStore.open(tmp_path, _small(flush_mode=FlushMode.SYNC), clock=Clock())
    assert store.put(Message("T", b"kept")).ok
    failing_msync.broken = True
    assert store.put(Message("T", b"unconfirmed")).status is PutStatus.FLUSH_DISK_TIMEOUT
    with pytest.raises(StoreReadOnlyError, match="I/O error"):
        store.put(Message("T", b"refused"))
    store.close()
    assert (tmp_path / "abort").exists()
    failing_msync.broken = False
    with MessageStore.open(tmp_path, _small(flush_mode=FlushMode.SYNC), clock=Clock()) as again:
        assert again.recovery.mode.value == "abnormal"
        assert [m.body for m in again.get("T", 0, 0).messages][:1] == [b"kept"]


def test_concurrent_sync_puts_share_one_sync(tmp_path, monkeypatch):
    gate = threading.Event()
    real = fs.msync
    calls: list[int] = []

    def gated(mm, start, end):
        calls.append(end)
        gate.wait()
        real(mm, start, end)

    cfg = _small(flush_mode=FlushMode.SYNC, flush_consume_queue_interval_ms=3_600_000,
                 clean_interval_ms=3_600_000)
    with MessageStore.open(tmp_path, cfg, clock=Clock()) as store:
        monkeypatch.setattr(fs, "msync", gated)
        results: list[PutStatus] = []
        threads = [threading.Thread(target=lambda i=i: results.append(store.put(Message("T", b"m%d" % i)).status))
                   for i in range(5)]
        threads[0].start()
        while not calls:  # the first put's sync has started and hangs
            threading.Event().wait(0.001)
        for t in threads[1:]:
            t.start()
        while store.max_offset("T", 0) < 5:  # every put is in the log, waiting for its sync
            threading.Event().wait(0.001)
        gate.set()
        for t in threads:
            t.join()
        assert results == [PutStatus.PUT_OK] * 5
        assert len(calls) == 2, "the four puts that waited behind the first sync shared the second"
        monkeypatch.setattr(fs, "msync", real)


def test_an_async_background_flush_error_turns_the_store_read_only(tmp_path, monkeypatch):
    broken = {"on": False}
    real = fs.msync

    def failing(mm, start, end):
        if broken["on"]:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(mm, start, end)

    monkeypatch.setattr(fs, "msync", failing)
    cfg = _small(flush_interval_ms=1, flush_least_pages=0, flush_thorough_interval_ms=1)
    store = MessageStore.open(tmp_path, cfg, clock=Clock())
    assert store.put(Message("T", b"kept")).ok
    store.flush()
    broken["on"] = True
    assert store.put(Message("T", b"in the page cache")).ok  # ASYNC: acknowledged before any flush
    refused = threading.Event()
    for _ in range(10_000):  # the background flush fails within a few milliseconds
        try:
            store.put(Message("T", b"probe", properties={"WAIT": "false"}))
        except StoreReadOnlyError as exc:
            assert "No space left" in str(exc)
            refused.set()
            break
        threading.Event().wait(0.001)
    assert refused.is_set()
    store.close()
    broken["on"] = False
    with MessageStore.open(tmp_path, cfg, clock=Clock()) as again:
        assert again.recovery.mode.value == "abnormal"
        assert [m.body for m in again.get("T", 0, 0).messages][:2] == [b"kept", b"in the page cache"]


def _held_msync(monkeypatch: pytest.MonkeyPatch, thread: str, size: int) -> tuple[threading.Event, threading.Event]:
    """msync holds the first sync of a file of `size` bytes by the service thread named `thread` until
    the test releases it: (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    real = fs.msync

    def held(mm, start, end):
        if threading.current_thread().name == thread and len(mm) == size and not entered.is_set():
            entered.set()
            release.wait(20)
        real(mm, start, end)

    monkeypatch.setattr(fs, "msync", held)
    return entered, release


def _puts_while_held(store: MessageStore, entered: threading.Event, release: threading.Event) -> float:
    """Seconds 50 puts take while the held sync is under way (the sync is released afterwards)."""
    try:
        assert entered.wait(20), "the service never synced"
        t0 = time.monotonic()
        for i in range(50):
            assert store.put(Message("T", b"during the sync %d" % i, keys=(f"k{i}",))).ok
        took = time.monotonic() - t0
        assert not release.is_set()
        return took
    finally:
        release.set()


@pytest.mark.parametrize("thread, size, cfg", [
    ("rocketstore-commitlog-flush", FILE, {"flush_interval_ms": 1, "flush_least_pages": 0}),
    ("rocketstore-queue-flush", index_file_size(4, 4), {"flush_consume_queue_interval_ms": 1,
                                                        "flush_consume_queue_thorough_interval_ms": 1}),
], ids=["commitlog", "index"])
def test_puts_go_on_while_a_flush_service_syncs(tmp_path, monkeypatch, thread, size, cfg):
    """RocketMQ's flush threads sync without the put lock: a put never waits for the disk in ASYNC mode."""
    entered, release = _held_msync(monkeypatch, thread, size)
    with MessageStore.open(tmp_path, _small(**cfg)) as store:
        assert store.put(Message("T", b"first", keys=("k",))).ok
        took = _puts_while_held(store, entered, release)
        assert took < 10, f"50 puts took {took:.1f} s: they waited for the sync"
        assert len(store.query("T", "k49")) == 1
    with MessageStore.open(tmp_path, _small()) as again:
        assert again.recovery.mode.value == "normal"
        assert again.get("T", 0, 0).max_offset == 51
        assert [m.body for m in again.get("T", 0, 50).messages] == [b"during the sync 49"]


def test_a_file_closed_during_its_flush_is_let_go_after_the_sync(tmp_path, monkeypatch):
    """Retention may delete a file while a flush thread syncs it: the sync finishes on the pinned
    mapping, and a file closed before its flush has nothing left to flush."""
    commitlog, _ = _log(tmp_path)
    end = _append(commitlog, 100)
    mf = commitlog.queue.last
    real = fs.msync

    def closing(mm, start, stop):
        mf.close()  # what retention does from its thread meanwhile
        real(mm, start, stop)

    monkeypatch.setattr(fs, "msync", closing)
    assert mf.flush() == end
    assert mf._mm is None
    monkeypatch.setattr(fs, "msync", real)
    mf.wrote_position += 10
    assert mf.flush() == end, "a closed file is not flushed again"
