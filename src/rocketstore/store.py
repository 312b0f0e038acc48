"""MessageStore: the facade over commitlog, consume queues, index, checkpoint and services."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from functools import partial
from operator import itemgetter
from pathlib import Path
from typing import Any

from rocketstore._types import Clock
from rocketstore.append_run import PerQueue, pack_run, pack_run_py
from rocketstore.config import FlushMode, StoreConfig
from rocketstore.errors import (
    InvalidArgumentError,
    MessageNotFoundError,
    StoreClosedError,
    StoreError,
    StoreLayoutError,
    StoreReadOnlyError,
)
from rocketstore.format.consume_queue import UNIT, UNIT_SIZE, CqUnit, iter_written_units
from rocketstore.format.hosts import parse_host
from rocketstore.format.javahash import java_hash
from rocketstore.format.message import (
    MAGIC_V1,
    STORE_TIMESTAMP_HEAD,
    StoredMessage,
    store_timestamp_in,
)
from rocketstore.format.msgid import decode_msg_id, msg_id_prefix
from rocketstore.format.store_dirs import (
    COMMITLOG_DIR,
    CONFIG_DIR,
    CONSUME_QUEUE_DIR,
    QUARANTINE_DIR,
    STORE_CONFIG_FILE,
    queue_dirs,
)
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.log.checkpoint import StoreCheckpoint
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.consumer_offsets import ConsumerOffsets
from rocketstore.log.entry_run import EntryReader
from rocketstore.log.index_service import IndexService
from rocketstore.log.json_config import JAVA_INT_MAX, JAVA_LONG_MAX
from rocketstore.log.topic_config import TopicConfigs
from rocketstore.message import Message
from rocketstore.native import speedups
from rocketstore.pending_put import PendingPut, PutCombiner, with_status
from rocketstore.prepare import (
    BLANK_RECORD_SIZE,
    Prepared,
    Preparer,
    checked_topic,
)
from rocketstore.results import GetResult, GetStatus, PutResult, PutStatus
from rocketstore.services import odd_files, recovery
from rocketstore.services.cleanup import CleanupReport, CleanupService
from rocketstore.services.dispatch import (
    Dispatcher,
    DispatchRequest,
    delivery_tags_code,
    request_from_message,
)
from rocketstore.services.flush import CommitLogFlushService, GroupCommitService, QueueFlushService
from rocketstore.services.schedule import ScheduleService
from rocketstore.services.service import Service
from rocketstore.storage import fs
from rocketstore.storage.marker_files import StoreLock, abort_file_exists, create_abort_file, remove_abort_file

DISK_FULL_REASON = "disk full"
MAX_TRANSFER_BYTES = 256 * 1024  # RocketMQ maxTransferBytesOnMessageInMemory
CQ_SCAN_ENTRIES = 800  # RocketMQ scans at most 16000 bytes of consume queue per get
LONG_MAX = 2**63 - 1


def _system_clock() -> int:
    return time.time_ns() // 1_000_000


def _put_result_factory() -> Callable[..., PutResult]:
    """A `PutResult(...)` maker that fills the slots through their descriptors: the frozen dataclass
    __init__ (object.__setattr__ per field) costs about twice as much per put, and the compiled
    `fill_slots` a fifth (0.54 us a result in Python here). Falls back to the class itself if its
    fields ever change."""
    fields = ("status", "phy_offset", "queue_offset", "size", "msg_id", "store_timestamp", "topic", "queue_id")
    if tuple(f.name for f in dataclasses.fields(PutResult)) != fields:
        return PutResult
    if speedups is not None:
        return partial(speedups.fill_slots, PutResult, tuple(getattr(PutResult, name) for name in fields))
    set_status, set_phy, set_queue_offset, set_size, set_id, set_ts, set_topic, set_queue_id = (
        getattr(PutResult, name).__set__ for name in fields)
    new = object.__new__

    def make(status: PutStatus, phy_offset: int, queue_offset: int, size: int, msg_id: str, store_timestamp: int,
             topic: str, queue_id: int) -> PutResult:
        result = new(PutResult)
        set_status(result, status)
        set_phy(result, phy_offset)
        set_queue_offset(result, queue_offset)
        set_size(result, size)
        set_id(result, msg_id)
        set_ts(result, store_timestamp)
        set_topic(result, topic)
        set_queue_id(result, queue_id)
        return result

    return make


_put_result = _put_result_factory()


def put_results_py(status: PutStatus, prefix: str, prepared: list[Prepared],
                   placed: list[tuple[int, int, int]]) -> list[PutResult]:
    """The PutResult of each prepared message at its (phy, queue offset, store timestamp), the message
    id being `prefix` and the physical offset in 16 hex digits. The twin of the compiled put_results."""
    return [_put_result(status, phy, queue_offset, p.size, f"{prefix}{phy:016X}", store_ts, p.topic,
                        p.queue_id)
            for p, (phy, queue_offset, store_ts) in zip(prepared, placed, strict=True)]


def _put_results_factory() -> Callable[[PutStatus, str, list[Prepared], list[tuple[int, int, int]]],
                                       list[PutResult]]:
    """The compiled put_results bound to PutResult's slots, or the twin (no compiled module, or the
    fields changed: `_put_result_factory` then falls back to the class too)."""
    if speedups is None or _put_result is PutResult:
        return put_results_py
    descriptors = tuple(getattr(PutResult, f.name) for f in dataclasses.fields(PutResult))
    return partial(speedups.put_results, PutResult, descriptors)


_put_results = _put_results_factory()


class MessageStore:
    """A RocketMQ broker store directory, opened for reading and (unless read-only) writing.

    Use `MessageStore.open()`; the store is a context manager and safe to share between threads
    (puts are serialised, reads run concurrently).
    """

    def __init__(self, root: Path, config: StoreConfig, *, read_only: bool, clock: Clock) -> None:
        self.path = root
        self.config = config
        self.read_only = read_only
        self.clock = clock
        self.recovery: recovery.RecoveryReport = recovery.RecoveryReport(recovery.RecoveryMode.READ_ONLY)
        self._closed = False
        self._lock = threading.Lock()
        self._read_only_reason: str | None = "opened read-only" if read_only else None
        self._store_ip, self._store_port = parse_host(config.store_host)
        self._msg_id_prefix = msg_id_prefix(self._store_ip, self._store_port)
        self._delay_millis = config.delay_level_millis()
        self._preparer = Preparer(config, self._store_ip, self._delay_millis)
        self._queue_table: dict[tuple[str, int], int] = {}
        self._arrival_listeners: list[Callable[[str, int, int], object]] = []
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._last_store_timestamp = 0
        self._lock_file: StoreLock | None = None
        self.commitlog = CommitLog(root, config.commitlog_file_size, read_only=read_only)
        self.index = IndexService(root, config.index_hash_slots, config.index_max_entries, read_only=read_only,
                                  clock=clock)
        self.checkpoint: StoreCheckpoint | None = None
        self.offsets = ConsumerOffsets(root)
        self.topics = TopicConfigs(root, clock)
        self._dispatcher = Dispatcher(self._queue_for, self.index, self._on_queue_entry)
        self._flush_service: CommitLogFlushService | GroupCommitService | None = None
        self._queue_flush: QueueFlushService | None = None
        self._cleanup: CleanupService | None = None
        self._schedule: ScheduleService | None = None
        self._combiner = PutCombiner(self._append_locked)

    # -- opening and closing ---------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path, config: StoreConfig | None = None, *, read_only: bool = False,
             clock: Clock | None = None, repair: bool = False) -> MessageStore:
        """Open (and, unless read-only, create) the store at `path`.

        Args:
            path: the store root directory (RocketMQ's storePathRootDir).
            config: settings; None reads the geometry recorded in `config/rocketstore.json`.
            read_only: take no lock, write nothing, run no recovery (safe beside a live broker).
            clock: epoch-milliseconds clock for store timestamps (default: the system clock).
            repair: also repair what an open refuses: commitlog files of the wrong size are copied to
                `quarantine/` and resized, and the log is walked from them (`rocketstore recover`).

        Raises:
            FileNotFoundError: read-only open of a directory that does not exist.
            StoreLockedError: another process holds the store's lock.
            StoreLayoutError: files that do not match the geometry.
            OSError: the directory cannot be created or read.
        """
        root = Path(path)
        if read_only and not root.is_dir():
            raise FileNotFoundError(f"no store directory at {root}")
        config = _resolve_config(root, config)
        store = cls(root, config, read_only=read_only, clock=clock or _system_clock)
        try:
            store._open(repair)
        except BaseException:
            store._release()
            raise
        return store

    def _open(self, repair: bool) -> None:
        root = self.path
        if not self.read_only:
            root.mkdir(parents=True, exist_ok=True)
            (root / COMMITLOG_DIR).mkdir(exist_ok=True)
            (root / CONSUME_QUEUE_DIR).mkdir(exist_ok=True)
            self._lock_file = StoreLock(root)
            self._lock_file.acquire()
        abnormal = abort_file_exists(root)
        odd = None
        if not self.read_only:
            cfg = self.config
            odd = odd_files.set_aside(root, root / QUARANTINE_DIR,
                                      commitlog_file_size=cfg.commitlog_file_size, index_slots=cfg.index_hash_slots,
                                      index_max_entries=cfg.index_max_entries, resize_commitlog=repair)
        self.checkpoint = StoreCheckpoint(root, read_only=self.read_only)
        self.commitlog.load()
        self._load_queues()
        self.index.load()
        if not self.read_only:  # the files matched the geometry: now it is the store's
            _record_geometry(root, self.config)
        quarantine = None if self.read_only else root / QUARANTINE_DIR / CONFIG_DIR
        state_files = [p for p in (self.offsets.load(quarantine=quarantine), self.topics.load(quarantine=quarantine))
                       if p is not None]
        if self.read_only:
            self._open_read_only()
            self.recovery.state_files = state_files
        else:
            assert odd is not None
            self._recover(abnormal or odd.first_resized_offset is not None, odd)
            self.recovery.state_files = state_files
            create_abort_file(root)
            self._start_services()

    def _open_read_only(self) -> None:
        end = recovery.find_end(self.commitlog)
        self.commitlog.queue.forget_after(end)  # a pre-allocated next file holds nothing yet
        for mf in self.commitlog.queue.files:
            mf.wrote_position = mf.flushed_position = max(0, min(mf.file_size, end - mf.file_from_offset))
        for cq in self._queues.values():
            _set_queue_end_read_only(cq, end)
        self.recovery = recovery.RecoveryReport(recovery.RecoveryMode.READ_ONLY, end_offset=end)
        self._rebuild_queue_table()

    def _recover(self, abnormal: bool, odd: odd_files.OddFiles) -> None:
        assert self.checkpoint is not None
        report = recovery.recover(self.path, self.commitlog, list(self._queues.values()), self.index,
                                  self.checkpoint.values, abnormal=abnormal,
                                  check_crc=self.config.check_crc_on_recover, walk_from=odd.first_resized_offset)
        report.odd_files = odd.files
        self.recovery = report
        self._rebuild_queue_table()
        self._catch_up(abnormal, report)
        self._rebuild_queue_table()

    def _catch_up(self, abnormal: bool, report: recovery.RecoveryReport) -> None:
        """Dispatch the records the consume queues or the index do not hold yet.

        A record whose queue offset does not follow its queue's last entry means a queue lost entries
        before the scan's start: the scan is redone once from the oldest record. A record that still
        does not fit (a damaged queue-offset field, which no CRC covers) is left out of its queue but
        indexed, and listed in `report.dispatch_skipped`.
        """
        min_phy = self.commitlog.min_offset
        cq_from = max((cq.max_physic_offset for cq in self._queues.values()), default=-1)
        cq_from = max(cq_from, min_phy)
        if abnormal:
            cq_from = min(cq_from, report.start_offset)
        if report.queues_rebuilt:
            self._rebuild_queues({(q.topic, q.queue_id) for q in report.queues_rebuilt}, min_phy, cq_from)
        index_from = self.index.files[-1].header.end_phy_offset if self.index.files else -1
        start = max(min(cq_from, max(index_from, min_phy)), min_phy)
        try:
            self._dispatch_from(start, cq_from, index_from, abnormal, report, skip_gaps=False)
        except StoreError:
            self._dispatch_from(min_phy, min_phy, index_from, abnormal, report, skip_gaps=True)

    def _rebuild_queues(self, keys: set[tuple[str, int]], start: int, end: int) -> None:
        """Write the entries of the queues `keys` (emptied by recovery) for the records in [start, end);
        the catch-up that follows dispatches every queue from `end` on."""
        for msg in self.commitlog.scan(start, end):
            if (msg.topic, msg.queue_id) in keys:
                self._dispatcher.dispatch(request_from_message(msg, self._delay_millis), index=False)

    def _dispatch_from(self, start: int, cq_from: int, index_from: int, abnormal: bool,
                       report: recovery.RecoveryReport, *, skip_gaps: bool) -> None:
        for msg in self.commitlog.scan(start):
            req = request_from_message(msg, self._delay_millis)
            with_index = msg.phy_offset >= index_from if abnormal else msg.phy_offset > index_from
            with_queue = msg.phy_offset >= cq_from
            try:
                queued, indexed = self._dispatcher.dispatch(req, queues=with_queue, index=with_index)
            except StoreError as exc:
                if not skip_gaps:
                    raise
                report.dispatch_skipped.append(f"{msg.phy_offset}: {exc}")
                queued, indexed = self._dispatcher.dispatch(req, queues=False, index=with_index)
            report.queue_entries_dispatched += queued  # what was added, not what was looked at
            report.index_records_dispatched += indexed
            self._last_store_timestamp = msg.store_timestamp

    def _start_services(self) -> None:
        assert self.checkpoint is not None
        cfg = self.config
        if cfg.flush_mode is FlushMode.SYNC:
            self._flush_service = GroupCommitService(self.commitlog, self.checkpoint,
                                                     last_store_timestamp=lambda: self._last_store_timestamp,
                                                     lock=self._lock)
            self._flush_service.before_sync = self._combiner.drain  # puts queued by put_nowait
        else:
            self._flush_service = CommitLogFlushService(
                self.commitlog, self.checkpoint, self.clock, interval_ms=cfg.flush_interval_ms,
                least_pages=cfg.flush_least_pages, thorough_interval_ms=cfg.flush_thorough_interval_ms,
                last_store_timestamp=lambda: self._last_store_timestamp, lock=self._lock)
        self._queue_flush = QueueFlushService(
            lambda: list(self._queues.values()), self.index, self.checkpoint, self.clock,
            interval_ms=cfg.flush_consume_queue_interval_ms,
            thorough_interval_ms=cfg.flush_consume_queue_thorough_interval_ms, lock=self._lock,
            least_pages=cfg.flush_consume_queue_least_pages)
        self._cleanup = CleanupService(
            self.path, self.commitlog, lambda: list(self._queues.values()), self.index, self.clock,
            file_reserved_hours=cfg.file_reserved_hours, delete_when=cfg.delete_when,
            disk_max_used_ratio=cfg.disk_max_used_ratio, lock=self._lock, on_disk_full=self._on_disk_full,
            interval_ms=cfg.clean_interval_ms)
        self.index.on_file_flushed = self._on_index_file_flushed
        services: list[Service] = [self._flush_service, self._queue_flush, self._cleanup]
        if cfg.deliver_delayed_messages:
            self._schedule = ScheduleService(
                self.path, self._delay_millis, queue_for=lambda qid: self._queues.get((SCHEDULE_TOPIC, qid)),
                read=self.commitlog.message_at, deliver=self._deliver_delayed, clock=self.clock,
                interval_ms=cfg.schedule_interval_ms)
            problem = self._schedule.load(quarantine=self.path / QUARANTINE_DIR / CONFIG_DIR)
            if problem is not None:
                self.recovery.state_files.append(problem)
            services.append(self._schedule)
        for service in services:
            service.on_error = self._on_service_error
            service.start()

    def _deliver_delayed(self, parked: StoredMessage, topic: str, queue_id: int, properties: dict[str, str]) -> None:
        """Store the due copy of a delayed record (the schedule service's output)."""
        self.put(Message(topic, parked.body, queue_id=queue_id, properties=properties, flag=parked.flag,
                         born_timestamp=parked.born_timestamp, born_host=parked.born_host,
                         sys_flag=parked.sys_flag, reconsume_times=parked.reconsume_times,
                         prepared_transaction_offset=parked.prepared_transaction_offset))

    def _on_service_error(self, exc: BaseException) -> None:
        """A background step failed: after a disk error nothing more is acknowledged."""
        if isinstance(exc, (OSError, StoreReadOnlyError)):
            self._turn_read_only(f"background flush or cleanup failed: {exc}")

    def _on_index_file_flushed(self, end_timestamp: int) -> None:
        """A full index file is on disk: record it as RocketMQ's indexMsgTimestamp (called under the lock)."""
        assert self.checkpoint is not None
        if end_timestamp > 0:
            self.checkpoint.values.index_msg_timestamp = end_timestamp
            self.checkpoint.flush()

    def _on_disk_full(self, full: bool, used_ratio: float) -> None:
        if full:
            self._turn_read_only(f"{DISK_FULL_REASON}: {used_ratio:.0%} of the disk is used")
        elif self._read_only_reason is not None and self._read_only_reason.startswith(DISK_FULL_REASON):
            self._read_only_reason = None

    def _load_queues(self) -> None:
        for topic, queue_id, _ in queue_dirs(self.path):
            cq = ConsumeQueue(self.path, topic, queue_id, self.config.consume_queue_file_entries,
                              read_only=self.read_only)
            cq.load()
            self._queues[(cq.topic, cq.queue_id)] = cq

    def _rebuild_queue_table(self) -> None:
        min_phy = self.commitlog.min_offset
        for key, cq in self._queues.items():
            self._queue_table[key] = cq.max_offset
            cq.correct_min_offset(min_phy)

    def _queue_for(self, topic: str, queue_id: int) -> ConsumeQueue:
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            cq = ConsumeQueue(self.path, topic, queue_id, self.config.consume_queue_file_entries,
                              read_only=self.read_only)
            self._queues[(topic, queue_id)] = cq
        return cq

    def _on_queue_entry(self, req: DispatchRequest) -> None:
        self._queue_advanced(req.topic, req.queue_id, req.queue_offset, req.store_timestamp)

    def _queue_advanced(self, topic: str, queue_id: int, queue_offset: int, store_timestamp: int) -> None:
        """A queue took the entry for `queue_offset`: the flush checkpoint's time, topics.json, listeners."""
        if self._queue_flush is not None:
            self._queue_flush.logics_timestamp = store_timestamp
        if topic != SCHEDULE_TOPIC:
            self.topics.ensure(topic, queue_id + 1)
        for listener in self._arrival_listeners:
            listener(topic, queue_id, queue_offset + 1)

    def add_arrival_listener(self, callback: Callable[[str, int, int], object]) -> Callable[[], None]:
        """Call `callback(topic, queue_id, max_offset)` whenever new entries reach a queue (puts,
        delayed deliveries, recovery). It runs on the writing thread under the store lock: keep it
        short and never call back into the store (hand the event to your own loop instead).

        Returns:
            a function that removes the listener.
        """
        self._arrival_listeners.append(callback)

        def remove() -> None:
            if callback in self._arrival_listeners:
                self._arrival_listeners.remove(callback)

        return remove

    def ensure_topic(self, topic: str, queue_nums: int) -> None:
        """Record `topic` with at least `queue_nums` queues in config/topics.json (written at flush).

        Raises:
            InvalidMessageError: a topic name a put would refuse.
            StoreReadOnlyError: the store is read-only.
        """
        if self.read_only:
            raise StoreReadOnlyError(self._read_only_reason or "opened read-only")
        checked_topic(topic)
        if queue_nums < 1:
            raise ValueError(f"queue_nums must be at least 1, not {queue_nums}")
        self.topics.ensure(topic, queue_nums)

    def record_topic(self, topic: str, read_queue_nums: int, write_queue_nums: int, perm: int) -> None:
        """Record `topic` in config/topics.json with these queue counts and permission (RocketMQ's
        updateAndCreateTopic), replacing what was recorded; written at flush and close.

        Raises:
            InvalidMessageError: a topic name a put would refuse.
            InvalidArgumentError: queue counts outside 1..65535 or a permission outside 0..7.
            StoreReadOnlyError: the store is read-only.
        """
        if self.read_only:
            raise StoreReadOnlyError(self._read_only_reason or "opened read-only")
        checked_topic(topic)
        for name, value, low, high in (("read_queue_nums", read_queue_nums, 1, 65535),
                                       ("write_queue_nums", write_queue_nums, 1, 65535), ("perm", perm, 0, 7)):
            if not isinstance(value, int) or not low <= value <= high:
                raise InvalidArgumentError(f"record_topic: {name} {value!r} is not in {low}..{high}")
        self.topics.put(topic, read_queue_nums, write_queue_nums, perm)

    def check_message(self, message: Message) -> None:
        """Apply every put-time rule to `message` without writing (works on read-only stores too).

        Raises:
            InvalidMessageError: the message breaks a rule; `.status` says which kind.
        """
        self._preparer.prepare(message)

    @staticmethod
    def config_of(path: str | Path, **overrides: Any) -> StoreConfig:
        """The config a store at `path` opens with by default (its recorded geometry), with
        `overrides` (e.g. `store_host`, `flush_mode`) applied; geometry overrides must match.

        Raises:
            StoreLayoutError: a geometry override that differs from the store's.
            ValueError: an unknown field or a value out of range.
        """
        recorded = _resolve_config(Path(path), None)
        if not overrides:
            return recorded
        config = dataclasses.replace(recorded, **overrides)
        return _resolve_config(Path(path), config)

    def flush(self) -> None:
        """Force everything written so far to disk: commitlog, queues, index, checkpoint, JSON files.

        Raises:
            StoreClosedError: the store was closed.
            StoreReadOnlyError: a disk error now or earlier (a failed sync is never retried: the kernel
                may have dropped the pages it could not write).
        """
        self._check_open()
        if self.read_only:
            return
        self._combiner.write_now()  # what put_nowait queued goes to disk too
        if self._disk_failed():
            raise StoreReadOnlyError(self._read_only_reason or "disk error")
        try:
            with self._lock:
                flushed = self.commitlog.queue.flush(0)
                if isinstance(self._flush_service, GroupCommitService):
                    self._flush_service.flushed_to(flushed)  # releases the puts waiting for it
                for cq in self._queues.values():
                    cq.flush(0)
                self.index.flush()
                assert self.checkpoint is not None
                if self._last_store_timestamp:
                    self.checkpoint.values.physic_msg_timestamp = self._last_store_timestamp
                    self.checkpoint.values.logics_msg_timestamp = self._last_store_timestamp
                self.checkpoint.flush()
            self.offsets.persist()
            self.topics.persist()
            if self._schedule is not None:
                self._schedule.persist()
        except OSError as exc:
            self._turn_read_only(f"flush failed: {exc}")
            raise StoreReadOnlyError(self._read_only_reason or str(exc)) from exc

    def close(self) -> None:
        """Stop the services, flush, remove the abort file and release the lock (idempotent).

        After a disk error nothing is flushed and the abort file stays: the next open recovers.

        Raises:
            StoreReadOnlyError: the final flush failed (the abort file then stays).
        """
        if self._closed:
            return
        clean = False
        try:
            self._combiner.write_now()  # every queued put is written (or failed) before the services stop
            for service in (self._schedule, self._cleanup, self._flush_service, self._queue_flush):
                if service is not None:
                    service.stop()
            if not self.read_only and not self._disk_failed():
                self.flush()
                clean = True
        finally:
            self._closed = True
            if clean:
                remove_abort_file(self.path)
            self._release()

    def clean_expired(self, now_ms: int | None = None) -> CleanupReport:
        """Run one retention pass now (the background pass runs every `clean_interval_ms`).

        Deletes the commitlog files older than `file_reserved_hours` when the local hour of `now_ms`
        is one of `delete_when` or the disk is fuller than `disk_max_used_ratio` (all but the file being
        written above 85 %), then the consume-queue and index files whose messages are all gone; min
        offsets move, and `get()` answers OFFSET_TOO_SMALL below them.

        Args:
            now_ms: the time to judge ages by (default: the store clock).

        Returns:
            what was deleted.

        Raises:
            StoreClosedError: the store was closed.
            StoreReadOnlyError: the store was opened read-only.
            InvalidArgumentError: `now_ms` is not an epoch-milliseconds time before the year 10000.
            OSError: the disk could not be measured or a file not deleted.
        """
        self._check_open()
        if now_ms is not None:
            _check_int("clean_expired: now_ms", now_ms, _LAST_MS_OF_YEAR_9999)
        if self.read_only or self._cleanup is None:
            raise StoreReadOnlyError(self._read_only_reason or "opened read-only")
        return self._cleanup.run_once(now_ms)

    def deliver_delayed(self, now_ms: int | None = None) -> int:
        """Move every delayed message due at `now_ms` to its real topic now (the background pass runs
        every `schedule_interval_ms`).

        Args:
            now_ms: the time to judge delivery times by (default: the store clock).

        Returns:
            how many messages were delivered.

        Raises:
            StoreClosedError: the store was closed.
            StoreReadOnlyError: the store was opened read-only or does not deliver
                (`deliver_delayed_messages`). A store that turned read-only later delivers nothing (0)
                until it is writable again.
            OSError: the progress file could not be written.
        """
        self._check_open()
        if self._schedule is None:
            raise StoreReadOnlyError(self._read_only_reason or "delayed delivery is off for this store")
        return self._schedule.run_once(now_ms)

    def _release(self) -> None:
        if self._cleanup is not None:
            self._cleanup.close_retired()
        self.commitlog.close()
        for cq in self._queues.values():
            cq.close()
        self.index.close()
        if self.checkpoint is not None:
            self.checkpoint.close()
        if self._lock_file is not None:
            self._lock_file.release()
            self._lock_file = None

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError(f"store {self.path} is closed")

    def _disk_failed(self) -> bool:
        """True after a write or sync failed (a merely full disk still flushes and closes cleanly)."""
        reason = self._read_only_reason
        return reason is not None and not reason.startswith(DISK_FULL_REASON)

    def _turn_read_only(self, reason: str) -> None:
        if self._read_only_reason is None:
            self._read_only_reason = reason

    # -- writing -------------------------------------------------------------------------------------

    def put(self, message: Message) -> PutResult:
        """Append one message and dispatch it to its consume queue and the index.

        Returns:
            where it went; status FLUSH_DISK_TIMEOUT in SYNC mode when the disk did not confirm in
            `sync_flush_timeout_ms` (the message is in the log but maybe not durable).

        Raises:
            InvalidMessageError: the message breaks a rule (nothing was written).
            StoreReadOnlyError: the store is read-only (opened so, or after a disk error).
            StoreClosedError: the store was closed.
        """
        self._check_writable()
        return self._write([self._preparer.prepare(message)])[0]

    def put_nowait(self, message: Message) -> PendingPut:
        """Put one message without waiting for it to be written and, in SYNC mode, flushed:
        `PendingPut.result()` waits (see rocketstore.pending_put). A producer keeping several puts
        pending lets one sync of the group commit confirm all of them. In ASYNC mode the message is
        written before this returns, as by `put`.

        Raises:
            the errors of `put` about the message and the store, at once (nothing is queued then).
        """
        self._check_writable()
        prepared = self._preparer.prepare(message)
        service = self._flush_service
        if not isinstance(service, GroupCommitService):
            return PendingPut.settled(self._write([prepared])[0])
        pending = PendingPut(service if prepared.wait else None, self.config.sync_flush_timeout_ms,
                             self._on_flush_error, self._combiner)
        self._combiner.submit(prepared, pending)
        service.wakeup()
        return pending

    def put_batch(self, messages: Iterable[Message]) -> list[PutResult]:
        """Append many messages under one lock (each its own record, in order).

        All messages are validated before any is written: one invalid message rejects the batch.

        Raises:
            InvalidMessageError: a message breaks a rule (nothing was written).
            StoreReadOnlyError: the store is read-only.
            StoreClosedError: the store was closed.
        """
        self._check_writable()
        prepared = self._preparer.prepare_many(messages)
        if not prepared:
            return []
        return self._write(prepared)

    def put_broker_records(self, messages: Iterable[Message]) -> list[PutResult]:
        """`put_batch` for the records a broker writes itself: transaction half messages, their end
        records and discarded halves (format.topics.BROKER_WRITTEN_TOPICS). Every other rule of `put`
        applies; producers' puts to these topics stay refused.

        Raises:
            InvalidMessageError: a message is not for one of those topics, or breaks a rule (nothing
                was written).
            StoreReadOnlyError: the store is read-only.
            StoreClosedError: the store was closed.
        """
        self._check_writable()
        prepared = [self._preparer.prepare_py(m, broker_written=True) for m in messages]
        return self._write(prepared) if prepared else []

    def _check_writable(self) -> None:
        self._check_open()
        if self._read_only_reason is not None:
            raise StoreReadOnlyError(self._read_only_reason)

    def _write(self, prepared: list[Prepared]) -> list[PutResult]:
        """Append prepared messages, then wait for the flush SYNC mode asks for."""
        if self._combiner.used:  # after the puts queued so far, among them this thread's own
            with self._combiner.exclusive():
                results = self._append_locked(prepared)
        else:
            results = self._append_locked(prepared)
        return self._await_flush(prepared, results)

    def _append_locked(self, prepared: list[Prepared]) -> list[PutResult]:
        """Append prepared messages under the lock; a write error turns the store read-only."""
        with self._lock:
            if self._read_only_reason is not None:
                raise StoreReadOnlyError(self._read_only_reason)
            try:
                return [self._append_one(prepared[0])] if len(prepared) == 1 else self._append(prepared)
            except OSError as exc:
                self._turn_read_only(f"write failed: {exc}")
                raise StoreReadOnlyError(self._read_only_reason or str(exc)) from exc

    def _await_flush(self, prepared: list[Prepared], results: list[PutResult]) -> list[PutResult]:
        service = self._flush_service
        if not isinstance(service, GroupCommitService) or not results:
            return results
        if not any(p.wait for p in prepared):
            service.wakeup()
            return results
        last = results[-1]
        if service.confirm(last.phy_offset + last.size, self.config.sync_flush_timeout_ms, self._on_flush_error):
            return results
        return [with_status(r, PutStatus.FLUSH_DISK_TIMEOUT) if p.wait else r
                for p, r in zip(prepared, results, strict=True)]

    def _on_flush_error(self, error: BaseException) -> None:
        self._turn_read_only(f"flush failed: {error}")

    def _append(self, prepared: list[Prepared]) -> list[PutResult]:
        """Write the records, one run and one mmap write per commitlog file touched (`pack_run`), all
        with one store timestamp (as RocketMQ's putMessages stamps a batch), then dispatch them to the
        consume queues and, in one pass, to the index. Called under the lock."""
        commitlog = self.commitlog
        store_ts = self.clock()
        per_queue: PerQueue = {}
        index_keys = bytearray()
        placed: list[tuple[int, int, int]] = []
        run_args = (store_ts, self._queue_table, self._store_ip, self._store_port, per_queue, index_keys, placed)
        i, n = 0, len(prepared)
        while i < n:
            mf = commitlog.queue.last
            if mf is None or prepared[i].size + BLANK_RECORD_SIZE > mf.file_size - mf.wrote_position:
                mf = commitlog.file_for_append(prepared[i].size)
            phy = mf.file_from_offset + mf.wrote_position
            room = mf.file_size - mf.wrote_position - BLANK_RECORD_SIZE
            parts: list[bytes] = []
            while i < n:  # the compiled run takes what it can; the twin takes one message it declined
                start = i
                if pack_run is not None:
                    i, records = pack_run(prepared, i, n, phy, room, *run_args)
                if i == start:  # without the compiled loop the twin takes the whole run
                    i, records = pack_run_py(prepared, i, n if pack_run is None else i + 1, phy, room, *run_args,
                                             self._delay_millis)
                if i == start:
                    break  # the file is full
                parts.append(records)
                phy += len(records)
                room -= len(records)
            if parts:
                mf.append(parts[0] if len(parts) == 1 else b"".join(parts))
        self._last_store_timestamp = store_ts
        self._dispatch_appended(per_queue, index_keys, store_ts, prepared)
        return _put_results(PutStatus.PUT_OK, self._msg_id_prefix, prepared, placed)

    def _append_one(self, p: Prepared) -> PutResult:
        """`_append` for a single message (a plain `put`) without the batch set-up: the same steps,
        record, queue entry, queue callback, index keys. Called under the lock."""
        (topic, queue_id, queue_key, body, crc, head, tail, flag, _, record_flag, born_ts, born_ip, born_port,
         reconsume, prepared_offset, size, _, in_queue, indexed, delay_level, code, keys, uniq_key) = p
        commitlog = self.commitlog
        mf = commitlog.queue.last
        if mf is None or size + BLANK_RECORD_SIZE > mf.file_size - mf.wrote_position:
            mf = commitlog.file_for_append(size)
        phy = mf.file_from_offset + mf.wrote_position
        store_ts = self.clock()
        queue_offset = 0
        if in_queue:
            queue_offset = self._queue_table.get(queue_key, 0)
            self._queue_table[queue_key] = queue_offset + 1
        store_ip, store_port = self._store_ip, self._store_port
        mf.append(b"".join((head.pack(  # one copy of the record (`+` would copy the body twice)
            size, MAGIC_V1, crc, queue_id, flag, queue_offset, phy, record_flag,
            store_ts if born_ts is None else born_ts, born_ip, born_port, store_ts,
            store_ip, store_port, reconsume, prepared_offset, len(body)), body, tail)))
        self._last_store_timestamp = store_ts
        if in_queue:
            if delay_level:
                code = delivery_tags_code(store_ts, delay_level, self._delay_millis)
            if self._queue_for(topic, queue_id).put(phy, size, code, queue_offset):
                self._queue_advanced(topic, queue_id, queue_offset, store_ts)
        if indexed:
            self.index.build(topic, phy, store_ts, keys, uniq_key)
        return _put_result(PutStatus.PUT_OK, phy, queue_offset, size, f"{self._msg_id_prefix}{phy:016X}", store_ts,
                           topic, queue_id)

    def _dispatch_appended(self, per_queue: PerQueue, index_keys: bytearray, store_ts: int,
                           prepared: list[Prepared]) -> None:
        """The Dispatcher's rules for the `prepared` records just written, all with store timestamp
        `store_ts`: each queue's entries in order (`ConsumeQueue.put_units`), the index keys in one
        batch (`IndexService.build_keys`), and the queue-entry callback once per queue with its newest
        entry."""
        newest: list[tuple[int, str, int, int]] = []
        for (topic, queue_id), (first, units) in per_queue.items():
            last = self._queue_for(topic, queue_id).put_units(first, units)
            if last >= 0:
                newest.append((UNIT.unpack_from(units, last * UNIT_SIZE)[0], topic, queue_id, first + last))
        keyless = _last_indexed_keyless(prepared)
        if keyless is not None:  # as `build` of each: even keyless messages roll a full index file
            self.index.build_keys(index_keys, store_ts, keyless)
        for _, topic, queue_id, queue_offset in sorted(newest, key=itemgetter(0)):
            self._queue_advanced(topic, queue_id, queue_offset, store_ts)

    # -- consumer offsets ----------------------------------------------------------------------------

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record that `group` will next consume `offset` of (topic, queue_id).

        Persisted to config/consumerOffset.json at `flush()` and `close()`.

        Raises:
            StoreReadOnlyError: the store is read-only.
            InvalidArgumentError: an empty group or topic, `@` in either (the file's key separator), a
                queue id outside [0, 2**31 - 1] or an offset outside [0, 2**63 - 1] (RocketMQ's Java
                int and long could not read them back).
        """
        if self.read_only:
            raise StoreReadOnlyError(self._read_only_reason or "opened read-only")
        for name, value in (("group", group), ("topic", topic)):
            if not isinstance(value, str) or not value or "@" in value:
                raise InvalidArgumentError(f"commit_offset: {name} {value!r} must be a non-empty str without '@'")
        _check_int("commit_offset: queue_id", queue_id, JAVA_INT_MAX)
        _check_int("commit_offset: offset", offset, JAVA_LONG_MAX)
        self.offsets.commit(group, topic, queue_id, offset)

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset `group` committed for (topic, queue_id), None if never."""
        return self.offsets.get(group, topic, queue_id)

    def consumer_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """Every committed offset: group -> (topic, queue id) -> offset."""
        return self.offsets.all()

    # -- reading -------------------------------------------------------------------------------------

    @property
    def min_phy_offset(self) -> int:
        """Physical offset of the oldest stored byte."""
        return self.commitlog.min_offset

    @property
    def max_phy_offset(self) -> int:
        """Physical offset one past the last record."""
        return self.commitlog.max_offset

    def queues(self) -> dict[str, list[int]]:
        """Topic -> its queue ids that hold or held messages."""
        result: dict[str, list[int]] = {}
        for topic, queue_id in sorted(self._queues):
            result.setdefault(topic, []).append(queue_id)
        return result

    def min_offset(self, topic: str, queue_id: int) -> int:
        """First queue offset still readable (0 for an unknown queue)."""
        cq = self._queues.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """One past the last queue offset (0 for an unknown queue)."""
        cq = self._queues.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def message_at(self, phy_offset: int) -> StoredMessage:
        """The record starting at `phy_offset`.

        Raises:
            MessageNotFoundError: no record starts there.
        """
        self._check_open()
        return self.commitlog.message_at(phy_offset)

    def message_by_id(self, msg_id: str) -> StoredMessage:
        """The record an offset message id names.

        Raises:
            MessageNotFoundError: a malformed id, or no record at its offset.
        """
        from rocketstore.errors import FormatError

        try:
            _, phy_offset = decode_msg_id(msg_id)
        except FormatError as exc:
            raise MessageNotFoundError(str(exc)) from None
        return self.message_at(phy_offset)

    def queue_entries(self, topic: str, queue_id: int, start: int | None = None,
                      end: int | None = None) -> Iterator[CqUnit]:
        """Raw consume-queue entries of [start, end) (default: min to max)."""
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return iter(())
        lo = cq.min_offset if start is None else start
        hi = cq.max_offset if end is None else end
        return iter(cq.units(lo, hi))

    def iter_queue(self, topic: str, queue_id: int, start: int | None = None,
                   end: int | None = None, *, chunk: int = 1024) -> Iterator[StoredMessage]:
        """Every message of a queue in [start, end) queue offsets, no count cap (fillers skipped)."""
        self._check_open()
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return
        lo = cq.min_offset if start is None else max(start, cq.min_offset)
        hi = cq.max_offset if end is None else min(end, cq.max_offset)
        reader = EntryReader(self.commitlog, None, LONG_MAX, LONG_MAX)
        while lo < hi:
            entries = cq.entry_bytes(lo, min(hi, lo + chunk))
            if not entries:
                return
            reader.read(entries)
            yield from reader.messages
            reader.messages.clear()
            lo += len(entries) // UNIT_SIZE

    def scan(self, start: int | None = None, end: int | None = None) -> Iterator[StoredMessage]:
        """Every record of the commitlog in log order from physical offset `start` (a record start).

        Raises:
            StoreClosedError: the store was closed.
            MessageNotFoundError: `start` is inside the stored log but no record starts there.
        """
        self._check_open()
        if start is not None and self.commitlog.min_offset <= start < self.commitlog.max_offset:
            self.commitlog.message_at(start)  # raises, naming the offset, unless a record starts there
        return self.commitlog.scan(start, end)

    def get(self, topic: str, queue_id: int, offset: int, max_count: int = 32, *, tags: str | None = None,
            stop_at_file_end: bool = False) -> GetResult:
        """Read up to `max_count` messages of a queue from `offset` (RocketMQ's getMessage).

        Args:
            tags: subscription expression ("TagA || TagB"; None or "*" for all).
            stop_at_file_end: stop at a consume-queue file boundary as RocketMQ 4.9.8 does.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: `max_count` below 1 (RocketMQ's broker answers one message then; a
                caller asking for none is more likely a bug).
        """
        self._check_open()
        if type(max_count) is not int or max_count < 1:
            raise InvalidArgumentError(f"get: max_count must be an int of at least 1, not {max_count!r}")
        cq = self._queues.get((topic, queue_id))
        if cq is None or cq.max_offset == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0)
        lo, hi = cq.min_offset, cq.max_offset
        if offset < lo:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi)
        if offset == hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
        if offset > hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, hi, lo, hi)
        max_count = max(1, min(max_count, self.config.max_get_count))
        scan_end = min(hi, offset + max(CQ_SCAN_ENTRIES, max_count))
        if stop_at_file_end:
            per_file = self.config.consume_queue_file_entries
            scan_end = min(scan_end, offset - offset % per_file + per_file)
        reader = EntryReader(self.commitlog, _subscription_codes(tags), max_count, MAX_TRANSFER_BYTES)
        messages = reader.messages
        consumed = 0
        position, window = offset, max_count
        while not reader.full and position < scan_end:
            # read the queue in growing windows: a plain get needs max_count entries, not 800
            want = min(scan_end, position + window) - position
            entries = cq.entry_bytes(position, position + want)
            consumed += reader.read(entries)
            if len(entries) < want * UNIT_SIZE or len(messages) >= max_count:
                break
            position += want
            window *= 4
        if messages:
            status = GetStatus.FOUND
        else:
            status = GetStatus.MESSAGE_WAS_REMOVING if reader.removed else GetStatus.NO_MATCHED_MESSAGE
        return GetResult(status, offset + consumed, lo, hi, messages)

    def index_lookup(self, topic: str, key: str, *, max_count: int = 64, begin_ms: int = 0,
                     end_ms: int | None = None) -> list[int]:
        """RocketMQ's exact queryMessage answer: physical offsets whose index entries match the key's
        32-bit hash (collisions included), second-granular time bounds, ascending."""
        self._check_open()
        max_count = min(max_count, self.config.max_query_results)
        offsets = self.index.query(topic, key, max_count, begin_ms, LONG_MAX if end_ms is None else end_ms)
        return sorted(offsets)

    def query(self, topic: str, key: str, *, max_count: int = 64, begin_ms: int = 0,
              end_ms: int | None = None) -> list[StoredMessage]:
        """Messages of `topic` carrying `key` as a KEYS token or as UNIQ_KEY, stored in
        [begin_ms, end_ms]: the newest `max_count` (capped at `max_query_results`), ascending.

        Unlike RocketMQ, hash collisions are removed and time bounds are exact to the millisecond.
        With no bound given (begin_ms <= 0, end_ms None) every store time matches.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: `max_count` below 1.
        """
        self._check_open()
        if type(max_count) is not int or max_count < 1:
            raise InvalidArgumentError(f"query: max_count must be an int of at least 1, not {max_count!r}")
        max_count = min(max_count, self.config.max_query_results)
        end = LONG_MAX if end_ms is None else end_ms
        any_time = begin_ms <= 0 and end_ms is None
        widened_begin = 0 if begin_ms <= 1000 else begin_ms - 1000  # index times: whole seconds after the file's begin
        limit = max_count
        message_at = self.commitlog.message_at
        while True:
            offsets = self.index.query(topic, key, limit, widened_begin, end)
            found: dict[int, StoredMessage] = {}
            for phy in offsets:
                if phy in found:
                    continue
                try:
                    msg = message_at(phy)
                except MessageNotFoundError:
                    continue
                if msg.topic != topic or not (any_time or begin_ms <= msg.store_timestamp <= end):
                    continue
                if msg.carries_key(key):
                    found[phy] = msg
            if len(found) >= max_count or len(offsets) < limit:
                break
            limit *= 4
        if len(found) <= 1:
            return list(found.values())
        return [found[phy] for phy in sorted(found)][-max_count:]

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose message was stored at or after `timestamp_ms` (max offset when
        none was), from the stored timestamps.

        Raises:
            StoreClosedError: the store was closed.
        """
        self._check_open()
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return 0
        lo, hi = cq.min_offset, cq.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            if self._store_time_at(cq, mid) < timestamp_ms:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def store_timestamp_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        """Store time of the message at a queue offset, -1 when there is none."""
        cq = self._queues.get((topic, queue_id))
        return -1 if cq is None else self._store_time_at(cq, queue_offset)

    def _store_time_at(self, cq: ConsumeQueue, queue_offset: int) -> int:
        unit = cq.unit_at(queue_offset)
        if unit is None or not unit.valid or unit.filler:
            return -1
        try:
            head = self.commitlog.read(unit.phy_offset, STORE_TIMESTAMP_HEAD)
        except MessageNotFoundError:
            return -1
        return store_timestamp_in(head)

    def topic_config(self) -> dict[str, dict[str, Any]]:
        """Topics known to config/topics.json (RocketMQ field names)."""
        return self.topics.topics()


def _last_indexed_keyless(prepared: list[Prepared]) -> bool | None:
    """Whether the last of the messages that get index entries has no key to index; None when none of
    them gets index entries."""
    for p in reversed(prepared):
        if p.indexed:
            return not (p.uniq_key or any(p.keys))
    return None


def _subscription_codes(expression: str | None) -> set[int] | None:
    if expression is None or expression.strip() in ("", "*"):
        return None
    return {java_hash(t.strip()) for t in expression.split("||") if t.strip()}


_LAST_MS_OF_YEAR_9999 = 253_402_300_799_999  # local time (retention's delete hour) ends there


def _check_int(what: str, value: object, maximum: int) -> None:
    """Raises InvalidArgumentError unless `value` is an int in [0, maximum]."""
    if type(value) is not int or not 0 <= value <= maximum:
        raise InvalidArgumentError(f"{what} must be an int in [0, {maximum}], not {value!r}")


def _set_queue_end_read_only(cq: ConsumeQueue, phy_end: int) -> None:
    """Find a queue's end in memory (no writes): the valid entries pointing below `phy_end`."""
    files = cq.queue.files
    checked = max(0, len(files) - recovery.NORMAL_RECOVERY_FILES)  # older files are whole, as recovery assumes
    for mf in files[:checked]:
        mf.wrote_position = mf.flushed_position = mf.file_size
    for mf in files[checked:]:
        end = 0
        for unit in iter_written_units(mf.mm):
            if not unit.valid or (unit.phy_offset + unit.size > phy_end and not unit.filler):
                break
            end += UNIT_SIZE
            cq.max_physic_offset = unit.phy_offset + unit.size
        mf.wrote_position = mf.flushed_position = end
        if end < mf.file_size:
            idx = cq.queue.files.index(mf)
            for later in cq.queue.files[idx + 1:]:
                later.close()
            del cq.queue.files[idx + 1:]
            break


def _resolve_config(root: Path, config: StoreConfig | None) -> StoreConfig:
    """The config to open with: `config` checked against the geometry the store recorded, or that one.

    Raises:
        StoreLayoutError: `config/` is not a directory, the recorded geometry is not readable (not
            JSON, an unknown field, a value that is not a positive int), or it differs from `config`.
    """
    if (root / CONFIG_DIR).exists() and not (root / CONFIG_DIR).is_dir():
        raise StoreLayoutError(f"{root / CONFIG_DIR} is a file, not the store's config directory")
    recorded_path = root / CONFIG_DIR / STORE_CONFIG_FILE
    recorded: dict[str, Any] = {}
    if recorded_path.exists():
        try:
            recorded = json.loads(recorded_path.read_text(encoding="utf-8")).get("geometry", {})
        except (ValueError, AttributeError):
            raise StoreLayoutError(f"{recorded_path} is not valid JSON") from None
        if not isinstance(recorded, dict):
            raise StoreLayoutError(f"{recorded_path}: geometry is not an object")
        geometry_fields = StoreConfig().geometry()
        for name, value in recorded.items():
            if name not in geometry_fields:
                raise StoreLayoutError(f"{recorded_path}: unknown geometry field {name!r} "
                                       f"(known: {', '.join(geometry_fields)})")
            if type(value) is not int or value <= 0:
                raise StoreLayoutError(f"{recorded_path}: geometry field {name!r} is {value!r}, not a positive int")
    if config is None:
        return StoreConfig().with_geometry(recorded)
    if recorded:
        differing = {k: (v, getattr(config, k)) for k, v in recorded.items()
                     if k in config.geometry() and int(v) != getattr(config, k)}
        if differing:
            detail = ", ".join(f"{k}: store has {a}, config says {b}" for k, (a, b) in differing.items())
            raise StoreLayoutError(f"{root}: geometry differs from the store's ({detail})")
    return config


def _record_geometry(root: Path, config: StoreConfig) -> None:
    path = root / CONFIG_DIR / STORE_CONFIG_FILE
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"geometry": config.geometry(), "store_host": config.store_host}
    fs.atomic_write(path, json.dumps(data, indent=2).encode("utf-8"), keep_backup=False)
