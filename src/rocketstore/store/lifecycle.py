"""Opening a store (the lock, odd files, recovery or the read-only end, the services) and closing it;
flush, retention and delayed delivery on demand."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any, Self

from rocketstore._types import Clock
from rocketstore.config import FlushMode, StoreConfig
from rocketstore.errors import (
    StoreError,
    StoreLayoutError,
    StoreReadOnlyError,
)
from rocketstore.format.consume_queue import UNIT_SIZE, kept_prefix
from rocketstore.format.message import (
    StoredMessage,
)
from rocketstore.format.store_dirs import (
    COMMITLOG_DIR,
    CONFIG_DIR,
    CONSUME_QUEUE_DIR,
    QUARANTINE_DIR,
    STORE_CONFIG_FILE,
)
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.log.checkpoint import StoreCheckpoint
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.derived_ends import DerivedEnds, Ends, QueueKey, snapshot
from rocketstore.log.geometry import infer_geometry
from rocketstore.log.json_config import StateFileProblem, load_state
from rocketstore.message import Message
from rocketstore.services import odd_files, recovery
from rocketstore.services.cleanup import CleanupReport, CleanupService
from rocketstore.services.dispatch import DISPATCH_BATCH, DispatchRequest, packed_from, request_from_message
from rocketstore.services.flush import CommitLogFlushService, GroupCommitService, QueueFlushService
from rocketstore.services.schedule import ScheduleService
from rocketstore.services.service import Service
from rocketstore.storage import fs
from rocketstore.storage.marker_files import StoreLock, abort_file_exists, create_abort_file, remove_abort_file
from rocketstore.store.core import DISK_FULL_REASON, StoreCore, _check_int, _system_clock
from rocketstore.store.queue_order import QueueOrder

log = logging.getLogger("rocketstore.store")
_LAST_MS_OF_YEAR_9999 = 253_402_300_799_999  # local time (retention's delete hour) ends there
def _set_queue_end_read_only(cq: ConsumeQueue, phy_end: int) -> None:
    """Find a queue's end in memory (no writes): the valid entries pointing below `phy_end`."""
    files = cq.queue.files
    checked = max(0, len(files) - recovery.NORMAL_RECOVERY_FILES)  # older files are whole, as recovery assumes
    for mf in files[:checked]:
        mf.wrote_position = mf.flushed_position = mf.file_size
    for mf in files[checked:]:
        kept, last_end = kept_prefix(mf.mm, phy_end)
        if last_end is not None:
            cq.max_physic_offset = last_end
        end = kept * UNIT_SIZE
        mf.wrote_position = mf.flushed_position = end
        if end < mf.file_size:
            idx = cq.queue.files.index(mf)
            for later in cq.queue.files[idx + 1:]:
                later.close()
            del cq.queue.files[idx + 1:]
            break


def _queue_key(name: str) -> QueueKey:
    """(topic, queue id) of a `topic/queue id` name (a topic may hold no slash, RocketMQ's rule)."""
    topic, _, queue_id = name.rpartition("/")
    return topic, int(queue_id)


def _resolve_config(root: Path, config: StoreConfig | None, *, read_only: bool = False,
                    inferred: dict[str, int] | None = None) -> StoreConfig:
    """The config to open with: `config` checked against the geometry the store recorded, or that one;
    for a read-only open of a store that recorded none (one RocketMQ wrote), the geometry its files
    give (`inferred_geometry`). With `config` given, a recorded geometry that cannot be read is left to
    the open, which sets it aside (`_set_aside_damaged_record`) and records `config`'s.

    Raises:
        StoreLayoutError: `config/` is not a directory, the recorded geometry differs from `config`,
            or, without `config`, it is not readable (not JSON, an unknown field, a value that is not a
            positive int).
    """
    if (root / CONFIG_DIR).exists() and not (root / CONFIG_DIR).is_dir():
        raise StoreLayoutError(f"{root / CONFIG_DIR} is a file, not the store's config directory")
    recorded_path = root / CONFIG_DIR / STORE_CONFIG_FILE
    recorded: dict[str, int] = {}
    levels: Any = None
    if recorded_path.exists():
        try:
            data = json.loads(recorded_path.read_text(encoding="utf-8"))
            recorded = _recorded_geometry(data)
            levels = data.get("delay_levels")
        except (ValueError, AttributeError, KeyError) as exc:
            if config is None:
                raise StoreLayoutError(f"{recorded_path}: {exc} (give the store's geometry to open it: "
                                       "`rocketstore recover` with its file sizes)") from None
    if config is None:
        if not recorded_path.exists() and read_only:
            recorded = inferred_geometry(root) if inferred is None else inferred  # the caller's, if it read them
        resolved = StoreConfig().with_geometry(recorded)
        if isinstance(levels, str) and levels != resolved.delay_levels:  # the levels the store was written with
            try:
                resolved = dataclasses.replace(resolved, delay_levels=levels)
                resolved.delay_level_millis()
            except (ValueError, KeyError, IndexError):
                raise StoreLayoutError(f"{recorded_path}: delay_levels {levels!r} is not a list of delays "
                                       "(give the levels to open it)") from None
        return resolved
    if recorded:
        differing = {k: (v, getattr(config, k)) for k, v in recorded.items()
                     if k in config.geometry() and int(v) != getattr(config, k)}
        if differing:
            detail = ", ".join(f"{k}: store has {a}, config says {b}" for k, (a, b) in differing.items())
            raise StoreLayoutError(f"{root}: geometry differs from the store's ({detail})")
    return config


def inferred_geometry(root: Path) -> dict[str, int]:
    """The geometry a store that recorded none (one RocketMQ wrote) is read with: what its files answer
    without doubt (`log.geometry.infer_geometry`) where it differs from RocketMQ's defaults; nothing
    for a store that recorded its own."""
    if (root / CONFIG_DIR / STORE_CONFIG_FILE).exists() or not (root / COMMITLOG_DIR).is_dir():
        return {}
    defaults = StoreConfig()
    return {name: value for name, value in infer_geometry(root).items() if value != getattr(defaults, name)}


def _recorded_geometry(data: Any) -> dict[str, int]:
    """The geometry of `config/rocketstore.json`'s content.

    Raises:
        ValueError: not an object, an unknown field, a value that is not a positive int.
    """
    if not isinstance(data, dict):
        raise ValueError("not valid JSON: not an object")
    recorded = data.get("geometry", {})
    if not isinstance(recorded, dict):
        raise ValueError("geometry is not an object")
    geometry_fields = StoreConfig().geometry()
    for name, value in recorded.items():
        if name not in geometry_fields:
            raise ValueError(f"unknown geometry field {name!r} (known: {', '.join(geometry_fields)})")
        if type(value) is not int or value <= 0:
            raise ValueError(f"geometry field {name!r} is {value!r}, not a positive int")
    return recorded


def _set_aside_damaged_record(root: Path, quarantine: Path | None) -> StateFileProblem | None:
    """A `config/rocketstore.json` that cannot be read (the open was given the geometry): copied to
    `quarantine` and removed, so that the open records the given geometry (a read-only open, with no
    `quarantine`, only reports it).

    Raises:
        OSError: the copy failed (the file is then still in place).
    """
    path = root / CONFIG_DIR / STORE_CONFIG_FILE
    _, problem = load_state(root, path, _recorded_geometry, dict, quarantine=quarantine)
    return problem


def _record_geometry(root: Path, config: StoreConfig) -> None:
    """Record the geometry and store host once, and the delay levels whenever they differ from the
    recorded ones (a record without them stands for the default levels): readers that compute the
    delivery tags codes of delayed records (`rocketstore verify`) take the levels from here."""
    path = root / CONFIG_DIR / STORE_CONFIG_FILE
    data: dict[str, Any]
    if path.exists():
        data = json.loads(path.read_text(encoding="utf-8"))  # readable: a damaged one was set aside
        if data.get("delay_levels", StoreConfig().delay_levels) == config.delay_levels:
            return
        data["delay_levels"] = config.delay_levels
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"geometry": config.geometry(), "store_host": config.store_host, "delay_levels": config.delay_levels}
    fs.atomic_write(path, json.dumps(data, indent=2).encode("utf-8"), keep_backup=False)


class StoreLifecycle(StoreCore):
    """Opening and closing (a part of `MessageStore`)."""

    @classmethod
    def open(cls, path: str | Path, config: StoreConfig | None = None, *, read_only: bool = False,
             clock: Clock | None = None, repair: bool = False) -> Self:
        """Open (and, unless read-only, create) the store at `path`.

        Args:
            path: the store root directory (RocketMQ's storePathRootDir).
            config: settings; None reads the geometry recorded in `config/rocketstore.json`.
            read_only: take no lock, write nothing, run no recovery (safe beside a live broker).
            clock: epoch-milliseconds clock for store timestamps (default: the system clock).
            repair: also repair what an open refuses (`rocketstore recover`): commitlog files of the wrong
                size are copied to `quarantine/` and resized, and the log is walked from them; and check
                every consume-queue entry against the log (a plain open checks the first and last entry
                of each file).

        Raises:
            FileNotFoundError: read-only open of a directory that does not exist.
            StoreLockedError: another process holds the store's lock.
            StoreLayoutError: files that do not match the geometry.
            OSError: the directory cannot be created or read.
        """
        root = Path(path)
        if read_only and not root.is_dir():
            raise FileNotFoundError(f"no store directory at {root}")
        inferred = inferred_geometry(root) if config is None and read_only else {}
        config = _resolve_config(root, config, read_only=read_only, inferred=inferred)
        store = cls(root, config, read_only=read_only, clock=clock or _system_clock)
        store.geometry_inferred = inferred
        if inferred:
            log.info("%s: geometry inferred from its files: %s", root,
                     ", ".join(f"{name} {value}" for name, value in inferred.items()))
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
            for name in fs.remove_staged(root):
                log.info("%s: removed %s, a store file a crash left half made", root, name)
        self._derived_ends = DerivedEnds(root)
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
        quarantine = None if self.read_only else root / QUARANTINE_DIR / CONFIG_DIR
        record_problem = _set_aside_damaged_record(root, quarantine)
        if not self.read_only:  # the files matched the geometry: now it is the store's
            _record_geometry(root, self.config)
        state_files = [p for p in (record_problem, self.offsets.load(quarantine=quarantine),
                                   self.topics.load(quarantine=quarantine)) if p is not None]
        if self.read_only:
            self._open_read_only()
            self.recovery.state_files = state_files
        else:
            assert odd is not None
            recorded, problem = self._derived_ends.load(quarantine=quarantine)
            if problem is not None:
                state_files.append(problem)
            self._recover(abnormal or odd.first_resized_offset is not None, odd, recorded, thorough=repair,
                          recorded_whole=problem is None)
            self.recovery.state_files = state_files
            create_abort_file(root)
            self._dispatched_to = self.commitlog.max_offset
            self._start_services()
            self._put_behind = self._put_behind_or_none()

    def _open_read_only(self) -> None:
        end = recovery.find_end(self.commitlog)
        self.commitlog.queue.forget_after(end)  # a pre-allocated next file holds nothing yet
        for mf in self.commitlog.queue.files:
            mf.wrote_position = mf.flushed_position = max(0, min(mf.file_size, end - mf.file_from_offset))
        for cq in self._queues.values():
            _set_queue_end_read_only(cq, end)
        self.recovery = recovery.RecoveryReport(recovery.RecoveryMode.READ_ONLY, end_offset=end)
        self._rebuild_queue_table()

    def _recover(self, abnormal: bool, odd: odd_files.OddFiles, recorded: Ends | None, *, thorough: bool,
                 recorded_whole: bool) -> None:
        """Recover (`services.recovery`), then catch up. `recorded`: the queue and index ends recorded
        at the last flush (None: no record); not `recorded_whole`: the record was damaged or missing and
        `recorded` is its older backup, or nothing."""
        assert self.checkpoint is not None
        for key in recorded.queues if recorded else ():
            self._queue_for(*key)  # a queue whose files are all gone is checked (and rebuilt) too
        report = recovery.recover(self.path, self.commitlog, list(self._queues.values()), self.index,
                                  self.checkpoint.values, abnormal=abnormal,
                                  check_crc=self.config.check_crc_on_recover, walk_from=odd.first_resized_offset,
                                  recorded=recorded, thorough=thorough)
        report.odd_files = odd.files
        self.recovery = report
        self._rebuild_queue_table()
        self._catch_up(report, from_walk=abnormal or recorded is None or not recorded_whole)
        self._rebuild_queue_table()
        if (recorded is None or not recorded_whole or report.queues_rebuilt or report.queues_truncated
                or report.index_files_dropped):
            self._derived_ends.persist(snapshot(self._queues.values(), self.index, self.commitlog.min_offset,
                                                self.commitlog.queue.flushed_offset))

    def _catch_up(self, report: recovery.RecoveryReport, *, from_walk: bool) -> None:
        """Dispatch the records the consume queues or the index do not hold yet: the queues' from the
        newest queue end on, or from where the recovery walk started when `from_walk` (an abnormal exit,
        or a store without recorded queue ends, whose queues are then checked against the walked
        records), and from the end of any queue recovery cut back; the index from the record its newest
        entry points at (keys of that record already there are not added again).

        A record whose queue offset does not follow its queue's last entry means a queue lost entries
        before the scan's start: the scan is redone once from the oldest record. A record that still
        does not fit (a damaged queue-offset field, which no CRC covers) is left out of its queue but
        indexed, and listed in `report.dispatch_skipped`.
        """
        min_phy = self.commitlog.min_offset
        cq_from = max((cq.max_physic_offset for cq in self._queues.values()), default=-1)
        for name in report.queues_truncated:  # a queue cut back catches up from its own end
            cut = self._queues[_queue_key(name)].max_physic_offset
            if cut >= 0:
                cq_from = min(cq_from, cut)
        cq_from = max(cq_from, min_phy)
        if from_walk:
            cq_from = min(cq_from, report.start_offset)
        if report.queues_rebuilt:
            self._rebuild_queues({(q.topic, q.queue_id) for q in report.queues_rebuilt}, min_phy, cq_from, report)
        index_from = self.index.files[-1].header.end_phy_offset if self.index.files else -1
        start = max(min(cq_from, max(index_from, min_phy)), min_phy)
        try:
            self._dispatch_from(start, cq_from, index_from, report, skip_gaps=False)
        except StoreError:
            self._dispatch_from(min_phy, min_phy, index_from, report, skip_gaps=True)

    def _rebuild_queues(self, keys: set[tuple[str, int]], start: int, end: int,
                        report: recovery.RecoveryReport) -> None:
        """Write the entries of the queues `keys` (emptied by recovery) for the records in [start, end),
        keeping each queue's sequence (`QueueOrder`: a record out of it is listed in
        `report.dispatch_skipped`); the catch-up that follows dispatches every queue from `end` on."""
        order = self._queue_order(report)
        for msg in self.commitlog.scan(start, end):
            if (msg.topic, msg.queue_id) in keys:
                order.add(request_from_message(msg, self._delay_millis))
        order.finish()

    def _queue_order(self, report: recovery.RecoveryReport) -> QueueOrder:
        def write(req: DispatchRequest) -> bool:
            return self._dispatcher.dispatch(req, index=False)[0]

        def skipped(req: DispatchRequest, why: str) -> None:
            report.dispatch_skipped.append(f"{req.phy_offset}: {why}")

        return QueueOrder(write, self._queue_for, skipped)

    def _dispatch_from(self, start: int, cq_from: int, index_from: int, report: recovery.RecoveryReport, *,
                       skip_gaps: bool) -> None:
        """Dispatch the records from `start` on: queue entries from `cq_from`, index keys from
        `index_from` (the record there may have been indexed in part: `IndexService` adds only the
        keys it lacks)."""
        if not skip_gaps:  # the usual catch-up: batches of records, as puts dispatch them
            for packed in packed_from(self.commitlog, start, self._delay_millis, DISPATCH_BATCH, cq_from, index_from,
                                      True):
                queued, indexed = self._dispatcher.write_packed(packed.runs, packed.groups)
                report.queue_entries_dispatched += queued
                report.index_records_dispatched += indexed
                if packed.last_store_timestamp is not None:
                    self._last_store_timestamp = packed.last_store_timestamp
            return
        order = self._queue_order(report)  # from the oldest record: each queue's sequence kept
        for msg in self.commitlog.scan(start):
            req = request_from_message(msg, self._delay_millis)
            if msg.phy_offset >= cq_from:
                report.queue_entries_dispatched += order.add(req)  # what was added, not what was looked at
            report.index_records_dispatched += self._dispatcher.dispatch(req, queues=False,
                                                                         index=msg.phy_offset >= index_from)[1]
            self._last_store_timestamp = msg.store_timestamp
        report.queue_entries_dispatched += order.finish()

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
            self._caught_up_queues, self.index, self.checkpoint, self.clock, derived_ends=self._derived_ends,
            log_bounds=lambda: (self.commitlog.min_offset, self.commitlog.queue.flushed_offset),
            interval_ms=cfg.flush_consume_queue_interval_ms,
            thorough_interval_ms=cfg.flush_consume_queue_thorough_interval_ms, lock=self._lock,
            least_pages=cfg.flush_consume_queue_least_pages)
        self._cleanup = CleanupService(
            self.path, self.commitlog, self._caught_up_queues, self.index, self.clock,
            file_reserved_hours=cfg.file_reserved_hours, delete_when=cfg.delete_when,
            disk_max_used_ratio=cfg.disk_max_used_ratio, clean_forcibly_ratio=cfg.disk_clean_forcibly_ratio,
            disk_full_ratio=cfg.disk_full_ratio, lock=self._lock, on_disk_full=self._on_disk_full,
            interval_ms=cfg.clean_interval_ms)
        self.index.on_file_flushed = self._on_index_file_flushed
        services: list[Service] = [self._flush_service, self._queue_flush, self._cleanup]
        if cfg.deliver_delayed_messages:
            self._schedule = ScheduleService(
                self.path, self._delay_millis, queue_for=self._schedule_queue,
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
        self._put_delivered(Message(
            topic, parked.body, queue_id=queue_id, properties=properties, flag=parked.flag,
            born_timestamp=parked.born_timestamp, born_host=parked.born_host, sys_flag=parked.sys_flag,
            reconsume_times=parked.reconsume_times, prepared_transaction_offset=parked.prepared_transaction_offset))

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
            self._put_behind = self._put_behind_or_none()

    @staticmethod
    def config_of(path: str | Path, *, read_only: bool = False, **overrides: Any) -> StoreConfig:
        """The config a store at `path` opens with by default (its recorded geometry; for a read-only
        open of a store that recorded none, the geometry its files give), with `overrides` (e.g.
        `store_host`, `flush_mode`) applied; geometry overrides must match.

        Raises:
            StoreLayoutError: a geometry override that differs from the store's.
            ValueError: an unknown field or a value out of range.
        """
        recorded = _resolve_config(Path(path), None, read_only=read_only)
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
        self._dispatch_behind()
        try:
            with self._lock:
                flushed = self.commitlog.queue.flush(0)
                if isinstance(self._flush_service, GroupCommitService):
                    self._flush_service.flushed_to(flushed)  # releases the puts waiting for it
                for cq in self._queues.values():
                    cq.flush(0)
                ends = snapshot(self._queues.values(), self.index, self.commitlog.min_offset, flushed)
                self.index.flush()
                self._derived_ends.persist(ends)  # before the checkpoint, under the lock a topic deletion takes
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
        self._put_behind = None
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
            self._behind_to = 0  # what a failed store kept behind its log is the next open's to dispatch
            if clean:
                remove_abort_file(self.path)
            self._release()

    def clean_expired(self, now_ms: int | None = None) -> CleanupReport:
        """Run one retention pass now (the background pass runs every `clean_interval_ms`).

        Deletes the commitlog files older than `file_reserved_hours` when the local hour of `now_ms`
        is one of `delete_when` or the disk is fuller than `disk_max_used_ratio` (all but the file being
        written above `disk_clean_forcibly_ratio`), then the consume-queue and index files whose messages
        are all gone; min offsets move, and `get()` answers OFFSET_TOO_SMALL below them.

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
            InvalidArgumentError: `now_ms` is not an epoch-milliseconds time before the year 10000.
            OSError: the progress file could not be written.
        """
        self._check_open()
        if now_ms is not None:
            _check_int("deliver_delayed: now_ms", now_ms, _LAST_MS_OF_YEAR_9999)
        if self._schedule is None:
            raise StoreReadOnlyError(self._read_only_reason or "delayed delivery is off for this store")
        return self._schedule.run_once(now_ms)

    def _schedule_queue(self, queue_id: int) -> ConsumeQueue | None:
        """The schedule topic's queue `queue_id`, after the catch-up (what delayed delivery reads)."""
        self._dispatch_behind()
        return self._queues.get((SCHEDULE_TOPIC, queue_id))

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

