"""StoreCore: what every part of `MessageStore` shares: the store's files and services, its locks, the
table of consume queues, the state files (consumer offsets, topics), and the checks every call makes."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore._types import Clock
from rocketstore.config import StoreConfig
from rocketstore.errors import (
    InvalidArgumentError,
    StoreClosedError,
    StoreReadOnlyError,
)
from rocketstore.format.hosts import parse_host
from rocketstore.format.layout import JAVA_INT_MAX, JAVA_LONG_MAX, JAVA_LONG_MIN
from rocketstore.format.msgid import msg_id_prefix
from rocketstore.format.store_dirs import (
    queue_dirs,
)
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.log.checkpoint import StoreCheckpoint
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.consumer_offsets import ConsumerOffsets
from rocketstore.log.index_service import IndexService
from rocketstore.log.topic_config import TopicConfigs
from rocketstore.message import Message
from rocketstore.results import PutResult
from rocketstore.services import recovery
from rocketstore.services.cleanup import CleanupService
from rocketstore.services.dispatch import (
    DISPATCH_BATCH,
    Dispatcher,
    DispatchRequest,
    packed_from,
)
from rocketstore.services.flush import CommitLogFlushService, GroupCommitService, QueueFlushService
from rocketstore.services.schedule import ScheduleService
from rocketstore.storage.marker_files import StoreLock
from rocketstore.store.pending_put import PutCombiner
from rocketstore.store.prepare import Prepared, Preparer, topic_part

DISK_FULL_REASON = "disk full"
LONG_MAX = JAVA_LONG_MAX
LONG_MIN = JAVA_LONG_MIN
log = logging.getLogger("rocketstore.store")


def _system_clock() -> int:
    return time.time_ns() // 1_000_000


def _is_int(value: object) -> bool:
    """An int argument: an int or a subclass of int other than bool."""
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def _check_int(what: str, value: object, maximum: int, minimum: int = 0) -> None:
    """Raises InvalidArgumentError unless `value` is an int (not a bool) in [minimum, maximum]."""
    if not _is_int(value) or not minimum <= value <= maximum:  # type: ignore[operator]
        raise InvalidArgumentError(f"{what} must be an int in [{minimum}, {maximum}], not {value!r}")


def _check_optional_int(what: str, value: object, minimum: int = LONG_MIN, maximum: int = LONG_MAX) -> None:
    """Raises InvalidArgumentError unless `value` is None or an int (not a bool) in [minimum, maximum]."""
    if value is not None:
        _check_int(what, value, maximum, minimum)


def _check_queue(what: str, topic: object, queue_id: object) -> None:
    """Raises InvalidArgumentError unless `topic` is a str and `queue_id` an int (not a bool): a queue's
    name (an unknown queue is no error: it is empty)."""
    if not isinstance(topic, str):
        raise InvalidArgumentError(f"{what}: topic must be a str, not {type(topic).__name__}")
    if not _is_int(queue_id):
        raise InvalidArgumentError(f"{what}: queue_id must be an int, not {queue_id!r}")


class StoreCore:
    """The state of an open store (`MessageStore` adds the rest); not used on its own."""

    if TYPE_CHECKING:  # the parts call each other through the whole MessageStore
        def _append_locked(self, prepared: list[Prepared]) -> list[PutResult]: ...

        def put(self, message: Message) -> PutResult: ...

        def _put_delivered(self, message: Message) -> PutResult: ...

        def _put_behind_or_none(self) -> Callable[[Message], PutResult | None] | None: ...

    def __init__(self, root: Path, config: StoreConfig, *, read_only: bool, clock: Clock) -> None:
        self.path = root
        self.config = config
        self.read_only = read_only
        self.clock = clock
        self.recovery: recovery.RecoveryReport = recovery.RecoveryReport(recovery.RecoveryMode.READ_ONLY)
        self.geometry_inferred: dict[str, int] = {}
        """The geometry fields a read-only open took from the files of a store that recorded none (one
        RocketMQ wrote), where they differ from the defaults; empty otherwise."""
        self._is_closed = False
        self._misplaced: dict[tuple[str, int], int] = {}
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
        self._max_query_results = config.max_query_results  # the config is frozen
        self._max_get_count = max(1, config.max_get_count)
        # A plain ASYNC put writes its record only (`_put_behind`, see StoreWritePath.put); its queue entry
        # and index keys follow in `_dispatch_behind`, as RocketMQ's ReputMessageService dispatches behind the
        # log. Records below `_dispatched_to` are dispatched; `_behind_to` is the end of the newest record
        # written without dispatch.
        self._put_behind: Callable[[Message], PutResult | None] | None = None
        self._dispatched_to = 0
        self._behind_to = 0

    @property
    def _closed(self) -> bool:
        """Whether the store was closed (what `close` sets once its final flush is done)."""
        return self._is_closed

    @_closed.setter
    def _closed(self, closed: bool) -> None:
        """Mark the store closed: from now on every call raises StoreClosedError. A consumer offset
        committed while `close` flushed (after the flush wrote consumerOffset.json) is written now: a
        `commit_offset` racing `close` either lands on disk or raises."""
        self._is_closed = closed
        if closed and self.offsets.seal() and self._read_only_reason is None and not self.read_only:
            try:
                self.offsets.persist()
            except Exception as exc:  # close releases the store's files and lock after this: never raise here
                log.warning("%s: consumer offsets committed during close were not written: %s", self.path, exc)

    def _check_open(self) -> None:
        if self._is_closed:
            raise StoreClosedError(f"store {self.path} is closed")

    def misplaced_entries(self) -> dict[tuple[str, int], int]:
        """(topic, queue id) -> how many consume-queue entries reads have passed over since the open
        because they point at a record of another topic, queue or queue offset (a damaged queue, which
        `rocketstore recover` rebuilds); empty when none did.

        Raises:
            StoreClosedError: the store was closed.
        """
        self._check_open()
        return dict(self._misplaced)

    def _passed_over(self, topic: str, queue_id: int, offsets: list[int]) -> None:
        """Reads passed over the misplaced entries `offsets` of a queue: counted, and a warning once a
        queue."""
        key = (topic, queue_id)
        seen = self._misplaced.get(key, 0)
        self._misplaced[key] = seen + len(offsets)
        if not seen:
            log.warning("%s: the consume queue %s-%d has an entry at queue offset %d that points at a record "
                        "of another queue or queue offset; reads pass over such entries (this is logged once "
                        "a queue); run `rocketstore recover` to rebuild the queue", self.path, topic, queue_id,
                        offsets[0])

    def _disk_failed(self) -> bool:
        """True after a write or sync failed (a merely full disk still flushes and closes cleanly)."""
        reason = self._read_only_reason
        return reason is not None and not reason.startswith(DISK_FULL_REASON)

    def _turn_read_only(self, reason: str) -> None:
        self._put_behind = None
        if self._read_only_reason is None:
            self._read_only_reason = reason

    def _dispatch_behind(self) -> None:
        """Dispatch the records puts left behind, before anything reads the queues or the index.

        Raises:
            StoreReadOnlyError: a queue or index file could not be written: the store turned read-only,
                and the records not dispatched stay in the log only, for the next open's recovery to
                dispatch (later reads answer from what was dispatched).
        """
        if self._behind_to > self._dispatched_to:
            with self._lock:
                self._dispatch_behind_locked()

    def _dispatch_behind_locked(self) -> None:
        """`_dispatch_behind` with the store lock held: the queue entries and index keys of every record from
        `_dispatched_to` to the end of the log, in batches (`packed_from`, `Dispatcher.write_packed`),
        and the queue-entry callbacks."""
        start = self._dispatched_to
        if self._behind_to <= start:
            return
        try:
            for packed in packed_from(self.commitlog, start, self._delay_millis, DISPATCH_BATCH, start, start,
                                      True):
                self._dispatcher.write_packed(packed.runs, packed.groups)
        except OSError as exc:
            self._turn_read_only(f"dispatch failed: {exc}")
            self._behind_to = 0  # given up: recovery dispatches the rest
            raise StoreReadOnlyError(self._read_only_reason or str(exc)) from exc
        self._dispatched_to = self.commitlog.max_offset

    def _caught_up_queues(self) -> list[ConsumeQueue]:
        """Every consume queue, after the catch-up (the store lock held: the queue flush's view)."""
        self._dispatch_behind_locked()
        return list(self._queues.values())

    def _check_writable(self) -> None:
        self._check_open()
        if self._read_only_reason is not None:
            raise StoreReadOnlyError(self._read_only_reason)

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

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: `callback` is not callable.
        """
        self._check_open()
        if not callable(callback):
            raise InvalidArgumentError(f"add_arrival_listener: callback must be callable, not {callback!r}")
        with self._lock:  # a listener hears of each put at once: puts stop leaving their dispatch behind
            self._dispatch_behind_locked()
            self._arrival_listeners.append(callback)
            self._put_behind = None

        def remove() -> None:
            with self._lock:
                if callback in self._arrival_listeners:
                    self._arrival_listeners.remove(callback)
                self._put_behind = self._put_behind_or_none()

        return remove

    def ensure_topic(self, topic: str, queue_nums: int) -> None:
        """Record `topic` with at least `queue_nums` queues in config/topics.json (written at flush).

        Raises:
            StoreClosedError: the store was closed.
            InvalidMessageError: a topic name a put would refuse.
            InvalidArgumentError: `queue_nums` is not an int in 1..2**31 - 1.
            StoreReadOnlyError: the store is read-only.
        """
        self._check_open()
        if self.read_only:
            raise StoreReadOnlyError(self._read_only_reason or "opened read-only")
        topic_part(topic)
        _check_int("ensure_topic: queue_nums", queue_nums, JAVA_INT_MAX, 1)
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
        self._check_open()
        if self.read_only:
            raise StoreReadOnlyError(self._read_only_reason or "opened read-only")
        topic_part(topic)
        for name, value, low, high in (("read_queue_nums", read_queue_nums, 1, 65535),
                                       ("write_queue_nums", write_queue_nums, 1, 65535), ("perm", perm, 0, 7)):
            if not _is_int(value) or not low <= value <= high:
                raise InvalidArgumentError(f"record_topic: {name} {value!r} is not in {low}..{high}")
        for key, text in (attributes or {}).items():
            if not isinstance(key, str) or not isinstance(text, str):
                raise InvalidArgumentError(f"record_topic: attribute {key!r}={text!r} is not a string pair")
        self.topics.put(topic, read_queue_nums, write_queue_nums, perm, attributes)

    def check_message(self, message: Message) -> None:
        """Apply every put-time rule to `message` without writing (works on read-only stores too).

        Raises:
            InvalidMessageError: the message breaks a rule (or is not a Message); `.status` says which kind.
            StoreClosedError: the store was closed.
        """
        self._check_open()
        self._preparer.prepare(message)

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
        self._check_open()
        if self.read_only:
            raise StoreReadOnlyError(self._read_only_reason or "opened read-only")
        for name, value in (("group", group), ("topic", topic)):
            if not isinstance(value, str) or not value or "@" in value:
                raise InvalidArgumentError(f"commit_offset: {name} {value!r} must be a non-empty str without '@'")
        _check_int("commit_offset: queue_id", queue_id, JAVA_INT_MAX)
        _check_int("commit_offset: offset", offset, JAVA_LONG_MAX)
        self.offsets.commit(group, topic, queue_id, offset)

    def committed_offset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset `group` committed for (topic, queue_id), None if never.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: a group or topic that is not a str, a queue id that is not an int.
        """
        self._check_open()
        if not isinstance(group, str):
            raise InvalidArgumentError(f"committed_offset: group must be a str, not {type(group).__name__}")
        _check_queue("committed_offset", topic, queue_id)
        return self.offsets.get(group, topic, queue_id)

    def consumer_offsets(self) -> dict[str, dict[tuple[str, int], int]]:
        """Every committed offset: group -> (topic, queue id) -> offset.

        Raises:
            StoreClosedError: the store was closed.
        """
        self._check_open()
        return self.offsets.all()

    def topic_config(self) -> dict[str, dict[str, Any]]:
        """Topics known to config/topics.json (RocketMQ field names).

        Raises:
            StoreClosedError: the store was closed.
        """
        self._check_open()
        self._dispatch_behind()  # a queue's first entry records its topic
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
        from rocketstore.store.topic_delete import delete_topic  # the store's parts import core

        return delete_topic(self, topic)  # type: ignore[arg-type]  # self is the whole MessageStore
