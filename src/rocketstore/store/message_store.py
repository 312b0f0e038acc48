"""MessageStore: the facade over a store directory, put together from parts that own their state: the
commit log, the consume queues (`queues`), the index, the write path (puts and their dispatch), the read
path, the open's recovery (`open_recovery`), the background services (`background`), and the state files
(consumer offsets, topics). The facade checks arguments, orchestrates opening and closing, and hands each
call to the part that answers it."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Self, TypeVar

from rocketstore import kernels
from rocketstore._types import Clock
from rocketstore.config import StoreConfig
from rocketstore.errors import InvalidArgumentError, StoreReadOnlyError
from rocketstore.format.consume_queue import CqUnit
from rocketstore.format.hosts import parse_host
from rocketstore.format.layout import JAVA_INT_MAX, JAVA_LONG_MAX
from rocketstore.format.message import StoredMessage
from rocketstore.format.msgid import msg_id_prefix
from rocketstore.format.store_dirs import COMMITLOG_DIR, CONFIG_DIR, CONSUME_QUEUE_DIR, QUARANTINE_DIR
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.log.checkpoint import StoreCheckpoint
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.consumer_offsets import ConsumerOffsets
from rocketstore.log.derived_ends import DerivedEnds, snapshot
from rocketstore.log.index_service import IndexService
from rocketstore.log.topic_config import TopicConfigs
from rocketstore.message import Message
from rocketstore.results import GetResult, PutResult
from rocketstore.services import odd_files, recovery
from rocketstore.services.cleanup import CleanupReport
from rocketstore.services.dispatch import Dispatcher, DispatchRequest
from rocketstore.services.flush import GroupCommitService
from rocketstore.storage import fs
from rocketstore.storage.marker_files import StoreLock, abort_file_exists, create_abort_file, remove_abort_file
from rocketstore.store.background import Background
from rocketstore.store.checks import check_int, check_queue, is_int, system_clock
from rocketstore.store.geometry_record import (
    inferred_geometry,
    record_geometry,
    resolve_config,
    set_aside_damaged_record,
)
from rocketstore.store.open_recovery import OpenRecovery
from rocketstore.store.pending_put import PendingPut
from rocketstore.store.prepare import Preparer, topic_part
from rocketstore.store.queues import ConsumeQueues
from rocketstore.store.read_path import ReadPath
from rocketstore.store.running_flags import DISK_FULL_REASON, RunningFlags
from rocketstore.store.topic_delete import TopicParts, delete_topic
from rocketstore.store.write_path import WritePath

log = logging.getLogger("rocketstore.store")
_LAST_MS_OF_YEAR_9999 = 253_402_300_799_999  # local time (retention's delete hour) ends there
_F = TypeVar("_F", bound=Callable[..., Any])


def _documented_by(part_method: Callable[..., Any]) -> Callable[[_F], _F]:
    """Give a facade method the docstring of the part's method it hands the call to (one text for both)."""
    def document(method: _F) -> _F:
        method.__doc__ = part_method.__doc__
        return method
    return document


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
        self.geometry_inferred: dict[str, int] = {}
        """The geometry fields a read-only open took from the files of a store that recorded none (one
        RocketMQ wrote), where they differ from the defaults; empty otherwise."""
        self._flags = RunningFlags(root, read_only=read_only)
        self._lock = kernels.store_lock()  # the compiled put takes it inside its call
        """The store lock: puts, the dispatch, flushes, retention and topic deletion take it."""
        store_ip, store_port = parse_host(config.store_host)
        self._delay_millis = config.delay_level_millis()
        self._arrival_listeners: list[Callable[[str, int, int], object]] = []
        self._lock_file: StoreLock | None = None
        self._derived_ends = DerivedEnds(root)
        self.commitlog = CommitLog(root, config.commitlog_file_size, read_only=read_only)
        self._queues = ConsumeQueues(root, config.consume_queue_file_entries, read_only=read_only)
        self.index = IndexService(root, config.index_hash_slots, config.index_max_entries, read_only=read_only,
                                  clock=clock)
        self.checkpoint: StoreCheckpoint | None = None
        self.offsets = ConsumerOffsets(root)
        self.topics = TopicConfigs(root, clock)
        self._background = Background()
        self._dispatcher = Dispatcher(self._queues.queue_for, self.index, self._on_queue_entry)
        self._writes = WritePath(self.commitlog, self._queues, self.index, self._dispatcher,
                                 Preparer(config, store_ip, self._delay_millis), self._flags, self._lock, clock,
                                 store_host=(store_ip, store_port), msg_id_prefix=msg_id_prefix(store_ip, store_port),
                                 delay_millis=self._delay_millis, sync_flush_timeout_ms=config.sync_flush_timeout_ms,
                                 on_queue_entry=self._queue_advanced)
        self._reads = ReadPath(config, self.commitlog, self._queues, self.index, self._flags, self._writes)
        # The hot calls go to their part without the facade's frame (it cost 5-7 % of a query): the methods
        # below document them, these bound methods of the parts answer them.
        self.put = self._writes.put  # type: ignore[method-assign]
        self.get = self._reads.get  # type: ignore[method-assign]
        self.query = self._reads.query  # type: ignore[method-assign]

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
        config = resolve_config(root, config, read_only=read_only, inferred=inferred)
        store = cls(root, config, read_only=read_only, clock=clock or system_clock)
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
        abnormal = abort_file_exists(root)
        odd = None
        if not self.read_only:
            cfg = self.config
            odd = odd_files.set_aside(root, root / QUARANTINE_DIR, commitlog_file_size=cfg.commitlog_file_size,
                                      index_slots=cfg.index_hash_slots, index_max_entries=cfg.index_max_entries,
                                      resize_commitlog=repair)
        self.checkpoint = StoreCheckpoint(root, read_only=self.read_only)
        self.commitlog.load()
        self._queues.load()
        self.index.load()
        quarantine = None if self.read_only else root / QUARANTINE_DIR / CONFIG_DIR
        record_problem = set_aside_damaged_record(root, quarantine)
        if not self.read_only:  # the files matched the geometry: now it is the store's
            record_geometry(root, self.config)
        state_files = [p for p in (record_problem, self.offsets.load(quarantine=quarantine),
                                   self.topics.load(quarantine=quarantine)) if p is not None]
        opening = OpenRecovery(root, self.commitlog, self._queues, self.index, self._dispatcher, self._delay_millis,
                               check_crc=self.config.check_crc_on_recover)
        if self.read_only:
            self.recovery = opening.read_only_end()
            self.recovery.state_files = state_files
            return
        assert odd is not None
        recorded, problem = self._derived_ends.load(quarantine=quarantine)
        if problem is not None:
            state_files.append(problem)
        self.recovery = opening.recover(self.checkpoint, self._derived_ends,
                                        abnormal or odd.first_resized_offset is not None, odd, recorded,
                                        thorough=repair, recorded_whole=problem is None)
        self.recovery.state_files = state_files
        create_abort_file(root)
        self.index.on_file_flushed = self._on_index_file_flushed
        schedule_problem = self._background.start(
            root, self.config, self.commitlog, self.checkpoint, self.index, self._writes, self._derived_ends,
            self.clock, self._lock, on_error=self._on_service_error, on_disk_full=self._on_disk_full,
            schedule_queue=self._schedule_queue, deliver=self._deliver_delayed, delay_millis=self._delay_millis)
        if schedule_problem is not None:
            self.recovery.state_files.append(schedule_problem)
        assert self._background.flush is not None
        self._writes.start(self._background.flush, last_store_timestamp=opening.last_store_timestamp)

    # -- the write path

    @_documented_by(WritePath.put)
    def put(self, message: Message) -> PutResult:
        return self._writes.put(message)

    @_documented_by(WritePath.put_nowait)
    def put_nowait(self, message: Message) -> PendingPut:
        return self._writes.put_nowait(message)

    @_documented_by(WritePath.put_batch)
    def put_batch(self, messages: Iterable[Message]) -> list[PutResult]:
        return self._writes.put_batch(messages)

    @_documented_by(WritePath.put_broker_records)
    def put_broker_records(self, messages: Iterable[Message]) -> list[PutResult]:
        return self._writes.put_broker_records(messages)

    def check_message(self, message: Message) -> None:
        """Apply every put-time rule to `message` without writing (works on read-only stores too).

        Raises:
            InvalidMessageError: the message breaks a rule (or is not a Message); `.status` says which kind.
            StoreClosedError: the store was closed.
        """
        self._flags.check_open()
        self._writes.preparer.prepare(message)

    # -- the read path

    @property
    @_documented_by(ReadPath.min_phy_offset.fget)  # type: ignore[attr-defined]
    def min_phy_offset(self) -> int:
        return self._reads.min_phy_offset

    @property
    @_documented_by(ReadPath.max_phy_offset.fget)  # type: ignore[attr-defined]
    def max_phy_offset(self) -> int:
        return self._reads.max_phy_offset

    @_documented_by(ReadPath.queues)
    def queues(self) -> dict[str, list[int]]:
        return self._reads.queues()

    @_documented_by(ReadPath.min_offset)
    def min_offset(self, topic: str, queue_id: int) -> int:
        return self._reads.min_offset(topic, queue_id)

    @_documented_by(ReadPath.max_offset)
    def max_offset(self, topic: str, queue_id: int) -> int:
        return self._reads.max_offset(topic, queue_id)

    @_documented_by(ReadPath.message_at)
    def message_at(self, phy_offset: int) -> StoredMessage:
        return self._reads.message_at(phy_offset)

    @_documented_by(ReadPath.message_by_id)
    def message_by_id(self, msg_id: str) -> StoredMessage:
        return self._reads.message_by_id(msg_id)

    @_documented_by(ReadPath.queue_entries)
    def queue_entries(self, topic: str, queue_id: int, start: int | None = None,
                      end: int | None = None) -> Iterator[CqUnit]:
        return self._reads.queue_entries(topic, queue_id, start, end)

    @_documented_by(ReadPath.iter_queue)
    def iter_queue(self, topic: str, queue_id: int, start: int | None = None,
                   end: int | None = None, *, chunk: int = 1024) -> Iterator[StoredMessage]:
        return self._reads.iter_queue(topic, queue_id, start, end, chunk=chunk)

    @_documented_by(ReadPath.scan)
    def scan(self, start: int | None = None, end: int | None = None) -> Iterator[StoredMessage]:
        return self._reads.scan(start, end)

    @_documented_by(ReadPath.get)
    def get(self, topic: str, queue_id: int, offset: int, max_count: int = 32, *, tags: str | None = None,
            stop_at_file_end: bool = False) -> GetResult:
        return self._reads.get(topic, queue_id, offset, max_count, tags=tags, stop_at_file_end=stop_at_file_end)

    @_documented_by(ReadPath.index_lookup)
    def index_lookup(self, topic: str, key: str, *, max_count: int = 64, begin_ms: int = 0,
                     end_ms: int | None = None) -> list[int]:
        return self._reads.index_lookup(topic, key, max_count=max_count, begin_ms=begin_ms, end_ms=end_ms)

    @_documented_by(ReadPath.query)
    def query(self, topic: str, key: str, *, max_count: int = 64, begin_ms: int = 0,
              end_ms: int | None = None) -> list[StoredMessage]:
        return self._reads.query(topic, key, max_count=max_count, begin_ms=begin_ms, end_ms=end_ms)

    @_documented_by(ReadPath.offset_by_time)
    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self._reads.offset_by_time(topic, queue_id, timestamp_ms)

    @_documented_by(ReadPath.store_timestamp_at)
    def store_timestamp_at(self, topic: str, queue_id: int, queue_offset: int) -> int:
        return self._reads.store_timestamp_at(topic, queue_id, queue_offset)

    def misplaced_entries(self) -> dict[tuple[str, int], int]:
        """(topic, queue id) -> how many consume-queue entries reads have passed over since the open
        because they point at a record of another topic, queue or queue offset (a damaged queue, which
        `rocketstore recover` rebuilds); empty when none did.

        Raises:
            StoreClosedError: the store was closed.
        """
        self._flags.check_open()
        return self._queues.misplaced()


    # -- queue arrivals

    def _on_queue_entry(self, req: DispatchRequest) -> None:
        self._queue_advanced(req.topic, req.queue_id, req.queue_offset, req.store_timestamp)

    def _queue_advanced(self, topic: str, queue_id: int, queue_offset: int, store_timestamp: int) -> None:
        """A queue took the entry for `queue_offset`: the flush checkpoint's time, topics.json, listeners."""
        queue_flush = self._background.queue_flush
        if queue_flush is not None:
            queue_flush.logics_timestamp = store_timestamp
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

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: `callback` is not callable.
        """
        self._flags.check_open()
        if not callable(callback):
            raise InvalidArgumentError(f"add_arrival_listener: callback must be callable, not {callback!r}")
        with self._lock:  # a listener hears of each put at once: puts stop leaving their dispatch behind
            self._writes.dispatch_behind_locked()
            self._arrival_listeners.append(callback)
            self._writes.set_listening(True)

        def remove() -> None:
            with self._lock:
                if callback in self._arrival_listeners:
                    self._arrival_listeners.remove(callback)
                self._writes.set_listening(bool(self._arrival_listeners))

        return remove

    def ensure_topic(self, topic: str, queue_nums: int) -> None:
        """Record `topic` with at least `queue_nums` queues in config/topics.json (written at flush).

        Raises:
            StoreClosedError: the store was closed.
            InvalidMessageError: a topic name a put would refuse.
            InvalidArgumentError: `queue_nums` is not an int in 1..2**31 - 1.
            StoreReadOnlyError: the store is read-only.
        """
        self._flags.check_not_opened_read_only()
        topic_part(topic)
        check_int("ensure_topic: queue_nums", queue_nums, JAVA_INT_MAX, 1)
        self.topics.ensure(topic, queue_nums)

    def record_topic(self, topic: str, read_queue_nums: int, write_queue_nums: int, perm: int,
                     attributes: Mapping[str, str] | None = None) -> None:
        """Record `topic` in config/topics.json with these queue counts and permission (RocketMQ's
        updateAndCreateTopic), replacing what was recorded; written at flush and close. `attributes`
        (RocketMQ 5's, e.g. ``{"message.type": "FIFO"}``) are set over the recorded ones.

        Raises:
            InvalidMessageError: a topic name a put would refuse.
            InvalidArgumentError: queue counts outside 1..65535, a permission outside 0..7, or an
                attribute that is not a string.
            StoreReadOnlyError: the store is read-only.
            StoreClosedError: the store was closed.
        """
        self._flags.check_not_opened_read_only()
        topic_part(topic)
        for name, value, low, high in (("read_queue_nums", read_queue_nums, 1, 65535),
                                       ("write_queue_nums", write_queue_nums, 1, 65535), ("perm", perm, 0, 7)):
            if not is_int(value) or not low <= value <= high:
                raise InvalidArgumentError(f"record_topic: {name} {value!r} is not in {low}..{high}")
        for key, text in (attributes or {}).items():
            if not isinstance(key, str) or not isinstance(text, str):
                raise InvalidArgumentError(f"record_topic: attribute {key!r}={text!r} is not a string pair")
        self.topics.put(topic, read_queue_nums, write_queue_nums, perm, attributes)

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record that `group` will next consume `offset` of (topic, queue_id).

        Persisted to config/consumerOffset.json at `flush()` and `close()`.

        A commit racing `close` either is in the file `close` leaves or raises StoreClosedError.

        Raises:
            StoreClosedError: the store was closed.
            StoreReadOnlyError: the store is read-only.
            InvalidArgumentError: an empty group or topic, `@` in either (the file's key separator), a
                queue id outside [0, 2**31 - 1] or an offset outside [0, 2**63 - 1] (RocketMQ's Java
                int and long could not read them back).
        """
        self._flags.check_not_opened_read_only()
        for name, value in (("group", group), ("topic", topic)):
            if not isinstance(value, str) or not value or "@" in value:
                raise InvalidArgumentError(f"commit_offset: {name} {value!r} must be a non-empty str without '@'")
        check_int("commit_offset: queue_id", queue_id, JAVA_INT_MAX)
        check_int("commit_offset: offset", offset, JAVA_LONG_MAX)
        self.offsets.commit(group, topic, queue_id, offset)

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset `group` committed for (topic, queue_id), None if never.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: a group or topic that is not a str, a queue id that is not an int.
        """
        self._flags.check_open()
        if not isinstance(group, str):
            raise InvalidArgumentError(f"committed_offset: group must be a str, not {type(group).__name__}")
        check_queue("committed_offset", topic, queue_id)
        return self.offsets.get(group, topic, queue_id)

    def consumer_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """Every committed offset: group -> (topic, queue id) -> offset.

        Raises:
            StoreClosedError: the store was closed.
        """
        self._flags.check_open()
        return self.offsets.all()

    def topic_config(self) -> dict[str, dict[str, Any]]:
        """Topics known to config/topics.json (RocketMQ field names).

        Raises:
            StoreClosedError: the store was closed.
        """
        self._flags.check_open()
        self._writes.dispatch_behind()  # a queue's first entry records its topic
        return self.topics.topics()


    def delete_topic(self, topic: str) -> bool:
        """Delete `topic`'s consume queues and its config/topics.json entry; its records stay in the log
        until retention (`rocketstore.store.topic_delete`). True when the store knew the topic.

        Raises:
            StoreClosedError: the store was closed.
            StoreReadOnlyError: the store is read-only.
            InvalidArgumentError: not a non-empty str, or SCHEDULE_TOPIC_XXXX.
            OSError: a file could not be deleted or written.
        """
        self._flags.check_writable()
        return delete_topic(topic, self._parts_of_topics())

    def _parts_of_topics(self) -> TopicParts:
        return TopicParts(self.path, self._lock, self._writes, self._queues, self.topics, self._derived_ends,
                          self.index, self.commitlog)

    # -- the services' callbacks

    def _deliver_delayed(self, parked: StoredMessage, topic: str, queue_id: int, properties: dict[str, str]) -> None:
        """Store the due copy of a delayed record (the schedule service's output)."""
        self._writes.put_delivered(Message(
            topic, parked.body, queue_id=queue_id, properties=properties, flag=parked.flag,
            born_timestamp=parked.born_timestamp, born_host=parked.born_host, sys_flag=parked.sys_flag,
            reconsume_times=parked.reconsume_times, prepared_transaction_offset=parked.prepared_transaction_offset))


    def _on_service_error(self, exc: BaseException) -> None:
        """A background step failed: after a disk error nothing more is acknowledged."""
        if isinstance(exc, (OSError, StoreReadOnlyError)):
            self._writes.turn_read_only(f"background flush or cleanup failed: {exc}")

    def _on_index_file_flushed(self, end_timestamp: int) -> None:
        """A full index file is on disk: record it as RocketMQ's indexMsgTimestamp (called under the lock)."""
        assert self.checkpoint is not None
        if end_timestamp > 0:
            self.checkpoint.values.index_msg_timestamp = end_timestamp
            self.checkpoint.flush()

    def _on_disk_full(self, full: bool, used_ratio: float) -> None:
        if full:
            self._writes.turn_read_only(f"{DISK_FULL_REASON}: {used_ratio:.0%} of the disk is used")
        elif self._flags.disk_has_room():
            self._writes.writable_again()

    # -- flush, close, retention, delayed delivery

    @staticmethod
    def config_of(path: str | Path, *, read_only: bool = False, **overrides: Any) -> StoreConfig:
        """The config a store at `path` opens with by default (its recorded geometry; for a read-only
        open of a store that recorded none, the geometry its files give), with `overrides` (e.g.
        `store_host`, `flush_mode`) applied; geometry overrides must match.

        Raises:
            StoreLayoutError: a geometry override that differs from the store's.
            ValueError: an unknown field or a value out of range.
        """
        recorded = resolve_config(Path(path), None, read_only=read_only)
        if not overrides:
            return recorded
        config = dataclasses.replace(recorded, **overrides)
        return resolve_config(Path(path), config)

    def flush(self) -> None:
        """Force everything written so far to disk: commitlog, queues, index, checkpoint, JSON files.

        Raises:
            StoreClosedError: the store was closed.
            StoreReadOnlyError: a disk error now or earlier (a failed sync is never retried: the kernel
                may have dropped the pages it could not write).
        """
        self._flags.check_open()
        if self.read_only:
            return
        self._writes.combiner.write_now()  # what put_nowait queued goes to disk too
        if self._flags.disk_failed():
            raise StoreReadOnlyError(self._flags.read_only_reason or "disk error")
        self._writes.dispatch_behind()
        try:
            with self._lock:
                flushed = self.commitlog.queue.flush(0)
                if isinstance(self._background.flush, GroupCommitService):
                    self._background.flush.flushed_to(flushed)  # releases the puts waiting for it
                for cq in self._queues.all():
                    cq.flush(0)
                ends = snapshot(self._queues.all(), self.index, self.commitlog.min_offset, flushed)
                self.index.flush()
                self._derived_ends.persist(ends)  # before the checkpoint, under the lock a topic deletion takes
                assert self.checkpoint is not None
                if self._writes.last_store_timestamp:
                    self.checkpoint.values.physic_msg_timestamp = self._writes.last_store_timestamp
                    self.checkpoint.values.logics_msg_timestamp = self._writes.last_store_timestamp
                self.checkpoint.flush()
            self.offsets.persist()
            self.topics.persist()
            if self._background.schedule is not None:
                self._background.schedule.persist()
        except OSError as exc:
            self._writes.turn_read_only(f"flush failed: {exc}")
            raise StoreReadOnlyError(self._flags.read_only_reason or str(exc)) from exc

    def close(self) -> None:
        """Stop the services, flush, remove the abort file and release the lock (idempotent).

        After a disk error nothing is flushed and the abort file stays: the next open recovers.

        Raises:
            StoreReadOnlyError: the final flush failed (the abort file then stays).
        """
        if self._flags.closed:
            return
        clean = False
        self._writes.stop()
        try:
            self._writes.combiner.write_now()  # every queued put is written (or failed) before the services stop
            self._background.stop()
            if not self.read_only and not self._flags.disk_failed():
                self.flush()
                clean = True
        finally:
            self._mark_closed()
            self._writes.forget_behind()  # what a failed store kept behind its log is the next open's to dispatch
            if clean:
                remove_abort_file(self.path)
            self._release()

    def _mark_closed(self) -> None:
        """Mark the store closed: from now on every call raises StoreClosedError. A consumer offset
        committed while `close` flushed (after the flush wrote consumerOffset.json) is written now: a
        `commit_offset` racing `close` either lands on disk or raises."""
        self._flags.close()
        if self.offsets.seal() and self._flags.read_only_reason is None and not self.read_only:
            try:
                self.offsets.persist()
            except Exception as exc:  # close releases the store's files and lock after this: never raise here
                log.warning("%s: consumer offsets committed during close were not written: %s", self.path, exc)

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
        self._flags.check_open()
        if now_ms is not None:
            check_int("clean_expired: now_ms", now_ms, _LAST_MS_OF_YEAR_9999)
        if self.read_only or self._background.cleanup is None:
            raise StoreReadOnlyError(self._flags.read_only_reason or "opened read-only")
        return self._background.cleanup.run_once(now_ms)

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
        self._flags.check_open()
        if now_ms is not None:
            check_int("deliver_delayed: now_ms", now_ms, _LAST_MS_OF_YEAR_9999)
        if self._background.schedule is None:
            raise StoreReadOnlyError(self._flags.read_only_reason or "delayed delivery is off for this store")
        return self._background.schedule.run_once(now_ms)

    def _schedule_queue(self, queue_id: int) -> ConsumeQueue | None:
        """The schedule topic's queue `queue_id`, after the catch-up (what delayed delivery reads)."""
        self._writes.dispatch_behind()
        return self._queues.get(SCHEDULE_TOPIC, queue_id)

    def _release(self) -> None:
        self._background.close_retired()
        self.commitlog.close()
        self._queues.close()
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

