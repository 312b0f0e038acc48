"""The write path, a part of `MessageStore`: `put`, `put_nowait`, `put_batch` and the broker's own records.
A message is checked and shaped by `prepare`; one append pipeline (`WritePath._append`) packs the records
(`append_run`) and dispatches them to their consume queues and the index under the store lock, a single
put taking its fast branch (the compiled `put_one`) and a plain ASYNC put leaving the dispatch behind;
`pending_put` queues puts for SYNC group commit. It owns where the log's records are dispatched to (`dispatched_to`),
the puts left behind the dispatch (`behind_to`), and the newest store timestamp."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from functools import partial
from operator import itemgetter
from threading import Lock
from typing import TYPE_CHECKING

from rocketstore import kernels
from rocketstore._types import Clock
from rocketstore.errors import (
    StoreReadOnlyError,
)
from rocketstore.format.consume_queue import UNIT, UNIT_SIZE
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.index_file import HEADER_SLOTS
from rocketstore.log.index_service import IndexService
from rocketstore.message import Message
from rocketstore.native import speedups
from rocketstore.results import PutResult, PutStatus
from rocketstore.services.dispatch import (
    DISPATCH_BATCH,
    Dispatcher,
    delivery_tags_code,
    packed_from,
)
from rocketstore.services.flush import CommitLogFlushService, GroupCommitService
from rocketstore.storage import fs
from rocketstore.storage.mapped_file import MappedFile
from rocketstore.store.append_run import BatchRun, encode_record
from rocketstore.store.checks import system_clock
from rocketstore.store.pending_put import PendingPut, PutCombiner, with_status
from rocketstore.store.prepare import (
    BLANK_RECORD_SIZE,
    Prepared,
    Preparer,
    checked_messages,
)
from rocketstore.store.queues import ConsumeQueues
from rocketstore.store.running_flags import RunningFlags

if TYPE_CHECKING:
    from rocketstore.kernels import AppenderType


class WriteMarks:
    """The marks a put moves on, the fields the compiled `Appender` writes: the end of the newest record
    written without its dispatch (`behind_to`), the end of what was dispatched (`dispatched_to`) and the
    store timestamp of the newest record (`last_store_timestamp`); and whether plain puts may leave their
    dispatch behind (`putting_behind`: the compiled put writes nothing while it is not). The pure-Python twin of
    rocketstore._speedups.WriteMarks, which has the same slots."""

    __slots__ = ("behind_to", "dispatched_to", "last_store_timestamp", "putting_behind")
    behind_to: int
    dispatched_to: int
    last_store_timestamp: int
    putting_behind: bool


if TYPE_CHECKING:
    _WriteMarksBase = WriteMarks  # the compiled base has the same fields
else:
    _WriteMarksBase = WriteMarks if speedups is None else speedups.WriteMarks


def _put_result_factory() -> Callable[..., PutResult]:
    """A `PutResult(...)` maker that fills the slots through their descriptors: the frozen dataclass
    __init__ (object.__setattr__ per field) costs about twice as much per put, and the compiled
    `fill_slots` a fifth (0.54 us a result in Python here). Falls back to the class itself if its
    fields ever change."""
    fields = ("status", "phy_offset", "queue_offset", "size", "msg_id", "store_timestamp", "topic", "queue_id")
    if tuple(f.name for f in dataclasses.fields(PutResult)) != fields:
        return PutResult
    if kernels.fill_slots is not None:
        return partial(kernels.fill_slots, PutResult, tuple(getattr(PutResult, name) for name in fields))
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
    if kernels.put_results is None or _put_result is PutResult:
        return put_results_py
    descriptors = tuple(getattr(PutResult, f.name) for f in dataclasses.fields(PutResult))
    return partial(kernels.put_results, PutResult, descriptors)


_put_results = _put_results_factory()

_WRITE_MAPPED = fs.write_mapped
"""The fs seam's copy into a mapping: the compiled `put_one` writes into the mappings itself, so a single
put takes the append pipeline's general steps (and the seam) while a test has replaced it."""


def put_one_for(store_ip: bytes, store_port: int, msg_id_prefix: str) -> Callable[..., PutResult | None] | None:
    """The compiled `put_one` bound to PutResult's and IndexHeader's slots and the store's host, called
    as put_one(p, log_file, store_ts, queue_offset, tags_code, queue, index_file); None without the
    compiled module or when PutResult's fields changed."""
    if kernels.put_one is None or _put_result is PutResult:
        return None
    descriptors = tuple(getattr(PutResult, f.name) for f in dataclasses.fields(PutResult))
    return partial(kernels.put_one, PutResult, descriptors, PutStatus.PUT_OK, HEADER_SLOTS, store_ip, store_port,
                   msg_id_prefix)


PUT_BEHIND_BYTES = 1 << 20
"""How far (bytes of records) plain puts may run ahead of the dispatch: the put that goes further
dispatches everything behind it (`WritePath.dispatch_behind`); readers and the queue flush catch up first."""


def appender_for(preparer: Preparer, store_ip: bytes, store_port: int, msg_id_prefix: str,
                 next_offsets: dict[tuple[str, int], int], clock: Clock, lock: Lock) -> AppenderType | None:
    """The compiled `Appender`: PutResult's slots, the store host, the limits and prepare's arguments,
    the queues' next offsets (which it advances), the clock and the store lock (which it takes); None
    with the pure backend, when PutResult's fields changed or when the lock is not the compiled one."""
    if kernels.Appender is None or _put_result is PutResult or kernels.StoreLock is None \
            or not isinstance(lock, kernels.StoreLock):
        return None
    descriptors = tuple(getattr(PutResult, f.name) for f in dataclasses.fields(PutResult))
    return kernels.Appender(PutResult, descriptors, PutStatus.PUT_OK, store_ip, store_port, msg_id_prefix,
                            fs.PWRITE_MIN, BLANK_RECORD_SIZE, preparer.plain_arguments, next_offsets,
                            None if clock is system_clock else clock, lock)


def _last_indexed_keyless(prepared: list[Prepared]) -> bool | None:
    """Whether the last of the messages that get index entries has no key to index; None when none of
    them gets index entries."""
    for p in reversed(prepared):
        if p.indexed:
            return not (p.uniq_key or any(p.keys))
    return None


QueueEntryCallback = Callable[[str, int, int, int], None]
"""(topic, queue id, queue offset, store timestamp): a queue took the entry at that offset."""


class WritePath(_WriteMarksBase):
    """Puts, under the store lock, and the dispatch of what they wrote (a part of `MessageStore`)."""

    def __init__(self, commitlog: CommitLog, queues: ConsumeQueues, index: IndexService, dispatcher: Dispatcher,
                 preparer: Preparer, flags: RunningFlags, lock: Lock, clock: Clock, *, store_host: tuple[bytes, int],
                 msg_id_prefix: str, delay_millis: list[int], sync_flush_timeout_ms: int,
                 on_queue_entry: QueueEntryCallback) -> None:
        self._commitlog = commitlog
        self._queues = queues
        self._next_offsets = queues.next_offsets
        self._index = index
        self._dispatcher = dispatcher
        self.preparer = preparer
        self._flags = flags
        self._lock = lock
        self._clock = clock
        self._store_ip, self._store_port = store_host
        self._msg_id_prefix = msg_id_prefix
        self._delay_millis = delay_millis
        self._sync_flush_timeout_ms = sync_flush_timeout_ms
        self._on_queue_entry = on_queue_entry
        self.combiner = PutCombiner(self._append_locked)
        self.flush_service: CommitLogFlushService | GroupCommitService | None = None
        """The commitlog's flush, once the store's services started (`start`)."""
        self.last_store_timestamp = 0
        """The store timestamp of the newest record written (the checkpoint's physic time)."""
        # A plain ASYNC put writes its record only (`_put_behind`, see `put`); its queue entry and index keys
        # follow in `dispatch_behind`, as RocketMQ's ReputMessageService dispatches behind the log. Records
        # below `dispatched_to` are dispatched; `behind_to` is the end of the newest record written without
        # dispatch.
        self.dispatched_to = 0
        self.behind_to = 0
        self._listening = False
        self._put_behind: Callable[[Message], PutResult | None] | None = None
        """`_put_behind_py` while plain puts leave their dispatch behind, else None."""
        self.putting_behind = False  # `_put_behind` is not None: what the compiled put reads under its lock
        self._put_one = put_one_for(self._store_ip, self._store_port, msg_id_prefix)
        self._appender = appender_for(preparer, self._store_ip, self._store_port, msg_id_prefix, self._next_offsets,
                                      clock, lock)
        self._behind_appender: AppenderType | None = None
        """The compiled appender while plain puts leave their dispatch behind (`put` calls it first), else None."""
        self._appending: MappedFile | None = None  # the commitlog file the appender is attached to

    def start(self, flush_service: CommitLogFlushService | GroupCommitService, *, last_store_timestamp: int) -> None:
        """Start writing after the open's recovery: everything in the log is dispatched, `flush_service`
        flushes what puts write."""
        self.flush_service = flush_service
        self.last_store_timestamp = last_store_timestamp
        self.dispatched_to = self._commitlog.max_offset
        self._set_put_behind()

    def stop(self) -> None:
        """Puts stop leaving their dispatch behind (the store is closing)."""
        self._set_put_behind(off=True)

    def forget_behind(self) -> None:
        """What a closed store kept behind its log is the next open's to dispatch."""
        self.behind_to = 0

    def set_listening(self, listening: bool) -> None:
        """Someone listens for arrivals (or stopped): puts dispatch at once (or may leave it behind again).
        Called under the store lock."""
        self._listening = listening
        self._set_put_behind()

    def turn_read_only(self, reason: str) -> None:
        """Refuse puts from now on, for `reason`."""
        self._set_put_behind(off=True)
        self._flags.turn_read_only(reason)

    def writable_again(self) -> None:
        """The store is writable again (a full disk has room)."""
        self._set_put_behind()

    def _set_put_behind(self, *, off: bool = False) -> None:
        """Whether plain puts leave their dispatch behind, from the store's state now (not with `off`):
        `_put_behind`, `_behind_appender` and `putting_behind` with it."""
        behind = not off and self._may_put_behind()
        self._put_behind = self._put_behind_py if behind else None
        self._behind_appender = self._appender if behind else None
        self.putting_behind = behind

    def _may_put_behind(self) -> bool:
        """Nothing needs a put's dispatch at once: the store is writable, ASYNC, and nobody listens for
        arrivals."""
        return not (self._flags.closed or self._flags.read_only_reason is not None or self._listening
                    or not isinstance(self.flush_service, CommitLogFlushService))

    def dispatch_behind(self) -> None:
        """Dispatch the records puts left behind, before anything reads the queues or the index.

        Raises:
            StoreReadOnlyError: a queue or index file could not be written: the store turned read-only,
                and the records not dispatched stay in the log only, for the next open's recovery to
                dispatch (later reads answer from what was dispatched).
        """
        if self.behind_to > self.dispatched_to:
            with self._lock:
                self.dispatch_behind_locked()

    def dispatch_behind_locked(self) -> None:
        """`dispatch_behind` with the store lock held: the queue entries and index keys of every record from
        `dispatched_to` to the end of the log, in batches (`packed_from`, `Dispatcher.write_packed`), and
        the queue-entry callbacks."""
        start = self.dispatched_to
        if self.behind_to <= start:
            return
        try:
            for packed in packed_from(self._commitlog, start, self._delay_millis, DISPATCH_BATCH, start, start,
                                      True):
                self._dispatcher.write_packed(packed.runs, packed.groups)
        except OSError as exc:
            self.turn_read_only(f"dispatch failed: {exc}")
            self.behind_to = 0  # given up: recovery dispatches the rest
            raise StoreReadOnlyError(self._flags.read_only_reason or str(exc)) from exc
        self.dispatched_to = self._commitlog.max_offset

    def caught_up_queues(self) -> list[ConsumeQueue]:
        """Every consume queue, after the catch-up (the store lock held: the queue flush's view)."""
        self.dispatch_behind_locked()
        return self._queues.all()

    def _attach_appender(self, mf: MappedFile) -> None:
        """Attach the compiled appender to the commitlog file `mf` at its write position (mapping it)."""
        appender = self._appender
        if appender is not None and (self._appending is not mf or appender.position != mf.wrote_position):
            if mf.mm is not None:  # mapped now, if it was not
                appender.attach(mf)
            self._appending = mf

    def _put_behind_py(self, message: Message) -> PutResult | None:
        """A put without its dispatch, for any message: the twin of the compiled `put_behind`, and what
        takes the messages it declines (properties, a record of 16 KiB or more, a file that rolls). The
        record goes at the log's write position, stamped by the clock, with the next queue offset of
        its queue; the consume-queue entry and the index keys are left to `dispatch_behind`. None
        (nothing written) when the store stopped putting behind: the caller's put dispatches at once.

        Raises:
            InvalidMessageError: the message breaks a rule (nothing was written).
            StoreReadOnlyError: the write failed (the store turned read-only).
        """
        p = self.preparer.prepare(message)
        (topic, queue_id, _, _, _, _, _, _, _, _, _, _, _, _, _, size, _, _, _, _, _, _, _) = p
        with self._lock:
            if self._put_behind is None:
                return None
            try:
                mf, phy, queue_offset, store_ts = self._append_record(p)
            except OSError as exc:
                raise self._write_failed(exc) from exc
            self.behind_to = phy + size
            self._attach_appender(mf)
            return _put_result(PutStatus.PUT_OK, phy, queue_offset, size, f"{self._msg_id_prefix}{phy:016X}",
                               store_ts, topic, queue_id)

    def _append_record(self, p: Prepared) -> tuple[MappedFile, int, int, int]:
        """The record of `p` at the log's write position (in a new file when it does not fit there), stamped
        by the clock, with the next queue offset of its queue: the file, its physical offset, the queue
        offset and the store timestamp. Its dispatch is the caller's. The record writer of both Python
        twins (`_put_behind_py`, `_put_one_py`)."""
        (_, _, queue_key, _, _, _, _, _, _, _, _, _, _, _, _, size, _, in_queue, _, _, _, _, _) = p
        mf = self._commitlog.file_for_append(size)
        store_ts = self._clock()
        queue_offset = self._next_offsets.get(queue_key, 0) if in_queue else 0
        phy = mf.file_from_offset + mf.wrote_position
        mf.append(encode_record(p, phy, queue_offset, store_ts, self._store_ip, self._store_port))
        if in_queue:
            self._next_offsets[queue_key] = queue_offset + 1
        self.last_store_timestamp = store_ts
        return mf, phy, queue_offset, store_ts

    def put(self, message: Message) -> PutResult:
        """Append one message and dispatch it to its consume queue and the index (in an ASYNC store with
        no arrival listener, behind the log: before the next read of the queues or the index; see
        docs/architecture.md).

        Returns:
            where it went; status FLUSH_DISK_TIMEOUT in SYNC mode when the disk did not confirm in
            `sync_flush_timeout_ms` (the message is in the log but maybe not durable).

        Raises:
            InvalidMessageError: the message breaks a rule (nothing was written).
            StoreReadOnlyError: the store is read-only (opened so, or after a disk error).
            StoreClosedError: the store was closed.
        """
        appender = self._behind_appender
        if appender is not None and fs.write_mapped is _WRITE_MAPPED:  # the record only, in one compiled call
            try:  # it takes the store lock; it writes nothing while `putting_behind` is not True
                result: PutResult | None = appender.put_behind(message, self)
            except (TypeError, AttributeError, OverflowError, ValueError):
                result = None  # not a Message of the usual types, a closed mapping: nothing written
            if result is not None:  # its dispatch follows in `dispatch_behind`
                if result.phy_offset - self.dispatched_to >= PUT_BEHIND_BYTES:
                    self.dispatch_behind()
                return result
            kernels.declined("put_behind")  # the twin below writes it, or names what is wrong
        put_behind = self._put_behind
        if put_behind is not None:  # the twin: what the appender declines, or the fs seam is replaced
            result = put_behind(message)
            if result is not None:
                if result.phy_offset - self.dispatched_to >= PUT_BEHIND_BYTES:
                    self.dispatch_behind()
                return result
        self._flags.check_writable()
        prepared = self.preparer.prepare(message)
        if self.combiner.used or isinstance(self.flush_service, GroupCommitService):
            return self._write([prepared])[0]
        with self._lock:  # the usual ASYNC put: `_write`'s steps for one message, without its lists
            if self._flags.read_only_reason is not None:
                raise StoreReadOnlyError(self._flags.read_only_reason)
            try:
                return self._append([prepared])[0]
            except OSError as exc:
                raise self._write_failed(exc) from exc

    def put_nowait(self, message: Message) -> PendingPut:
        """Put one message without waiting for it to be written and, in SYNC mode, flushed:
        `PendingPut.result()` waits (see rocketstore.store.pending_put). A producer keeping several puts
        pending lets one sync of the group commit confirm all of them. In ASYNC mode the message is
        written before this returns, as by `put`.

        Raises:
            the errors of `put` about the message and the store, at once (nothing is queued then).
        """
        self._flags.check_writable()
        prepared = self.preparer.prepare(message)
        service = self.flush_service
        if not isinstance(service, GroupCommitService):
            return PendingPut.settled(self._write([prepared])[0])
        pending = PendingPut(service if prepared.wait else None, self._sync_flush_timeout_ms,
                             self._on_flush_error, self.combiner)
        self.combiner.submit(prepared, pending)
        service.wakeup()
        return pending

    def put_batch(self, messages: Iterable[Message]) -> list[PutResult]:
        """Append many messages under one lock (each its own record, in order).

        All messages are validated before any is written: one invalid message rejects the batch.

        Raises:
            InvalidMessageError: a message breaks a rule or is not a Message (nothing was written).
            InvalidArgumentError: `messages` is not an iterable.
            StoreReadOnlyError: the store is read-only.
            StoreClosedError: the store was closed.
        """
        self._flags.check_writable()
        prepared = self.preparer.prepare_many(messages)
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
        self._flags.check_writable()
        prepared = [self.preparer.prepare_py(m, broker_written=True)
                    for m in checked_messages("put_broker_records", messages)]
        return self._write(prepared) if prepared else []

    def put_delivered(self, message: Message) -> PutResult:
        """Put the due copy of a delayed record (the schedule service's delivery): to its own topic and
        queue, the DELAY it carries kept and not acted on.

        Raises:
            the errors of `put`.
        """
        self._flags.check_writable()
        return self._write([self.preparer.prepare_py(message, delivered=True)])[0]

    def _write(self, prepared: list[Prepared]) -> list[PutResult]:
        """Append prepared messages, then wait for the flush SYNC mode asks for."""
        if self.combiner.used:  # after the puts queued so far, among them this thread's own
            with self.combiner.exclusive():
                results = self._append_locked(prepared)
        else:
            results = self._append_locked(prepared)
        return self._await_flush(prepared, results)

    def _append_locked(self, prepared: list[Prepared]) -> list[PutResult]:
        """Append prepared messages under the lock; a write error turns the store read-only."""
        with self._lock:
            if self._flags.read_only_reason is not None:
                raise StoreReadOnlyError(self._flags.read_only_reason)
            try:
                return self._append(prepared)
            except OSError as exc:
                raise self._write_failed(exc) from exc

    def _write_failed(self, exc: OSError) -> StoreReadOnlyError:
        """Turn the store read-only after a failed write; the error to raise."""
        self.turn_read_only(f"write failed: {exc}")
        return StoreReadOnlyError(self._flags.read_only_reason or str(exc))

    def _await_flush(self, prepared: list[Prepared], results: list[PutResult]) -> list[PutResult]:
        service = self.flush_service
        if not isinstance(service, GroupCommitService) or not results:
            return results
        if not any(p.wait for p in prepared):
            service.wakeup()
            return results
        last = results[-1]
        if service.confirm(last.phy_offset + last.size, self._sync_flush_timeout_ms, self._on_flush_error):
            return results
        return [with_status(r, PutStatus.FLUSH_DISK_TIMEOUT) if p.wait else r
                for p, r in zip(prepared, results, strict=True)]

    def _on_flush_error(self, error: BaseException) -> None:
        self.turn_read_only(f"flush failed: {error}")

    def _append(self, prepared: list[Prepared]) -> list[PutResult]:
        """The append pipeline, under the lock: the records written, one run and one mmap write per
        commitlog file touched (`pack_run`), all with one store timestamp (as RocketMQ's putMessages stamps
        a batch), then dispatched to the consume queues and, in one pass, to the index. A single message
        takes the fast branch first, the compiled `put_one` (with the pure backend, its twin
        `_put_one_py`), which writes its record, queue entry and index keys in one call; what the compiled
        call declines takes the steps above as a run of one."""
        if self.behind_to > self.dispatched_to:  # `dispatch_behind`'s test, inline on a hot path
            self.dispatch_behind_locked()
        if len(prepared) == 1:
            result = self._put_one_branch(prepared[0])
            if result is not None:
                return [result]
        commitlog = self._commitlog
        run = BatchRun(self._clock(), self._next_offsets, self._store_ip, self._store_port, self._delay_millis)
        i, n = 0, len(prepared)
        while i < n:
            mf = commitlog.queue.last
            if mf is None or prepared[i].size + BLANK_RECORD_SIZE > mf.file_size - mf.wrote_position:
                mf = commitlog.file_for_append(prepared[i].size)
            i, records = run.fill(prepared, i, n, mf.file_from_offset + mf.wrote_position,
                                  mf.file_size - mf.wrote_position - BLANK_RECORD_SIZE)
            if records:
                mf.append(records)
        self.last_store_timestamp = run.store_ts
        self._dispatch_appended(run, prepared)
        self.dispatched_to = commitlog.max_offset
        return _put_results(PutStatus.PUT_OK, self._msg_id_prefix, prepared, run.placed)

    def _put_one_branch(self, p: Prepared) -> PutResult | None:
        """The append pipeline's fast branch for one message dispatched at once: its record, queue entry,
        queue callback and index keys in one compiled call (`put_one`), or by its twin `_put_one_py` with
        the pure backend. None (nothing written) where the general steps must write it: a record for
        `pwrite`, a file to roll or make, no index file yet, a replaced `fs` seam, or what `put_one`
        declines."""
        put_one = self._put_one
        if put_one is None:
            return self._put_one_py(p)
        (topic, queue_id, queue_key, _, _, _, _, _, _, _, _, _, _, _, _, size, _, in_queue, indexed, delay_level,
         tags_code, _, _) = p  # Prepared's fields in order (tests/unit/store/test_prepared_order.py)
        mf = self._commitlog.queue.last
        index_files = self._index.files
        if (mf is None or size + BLANK_RECORD_SIZE > mf.file_size - mf.wrote_position
                or size >= fs.PWRITE_MIN or fs.write_mapped is not _WRITE_MAPPED or (indexed and not index_files)):
            kernels.declined("put_one")
            return None
        store_ts = self._clock()
        queue_offset = 0
        cq = None
        if in_queue:
            queue_offset = self._next_offsets.get(queue_key, 0)
            if delay_level:
                tags_code = delivery_tags_code(store_ts, delay_level, self._delay_millis)
            cq = self._queues.queue_for(topic, queue_id)
        result = put_one(p, mf, store_ts, queue_offset, tags_code, cq, index_files[-1] if indexed else None)
        if result is None:
            kernels.declined("put_one")
            return None
        if in_queue:
            self._next_offsets[queue_key] = queue_offset + 1
        self.last_store_timestamp = store_ts
        self.dispatched_to = result.phy_offset + size
        if cq is not None:
            self._on_queue_entry(topic, queue_id, queue_offset, store_ts)
        return result

    def _put_one_py(self, p: Prepared) -> PutResult:
        """The twin of the compiled `put_one`, for any single message: its record (`_append_record`), its
        queue entry, queue callback and index keys, through the one-message forms of what a run calls
        (`ConsumeQueue.put`, `IndexService.build`)."""
        (topic, queue_id, _, _, _, _, _, _, _, _, _, _, _, _, _, size, _, in_queue, indexed, delay_level,
         tags_code, keys, uniq_key) = p  # Prepared's fields in order (tests/unit/store/test_prepared_order.py)
        _, phy, queue_offset, store_ts = self._append_record(p)
        if in_queue:
            if delay_level:
                tags_code = delivery_tags_code(store_ts, delay_level, self._delay_millis)
            if self._queues.queue_for(topic, queue_id).put(phy, size, tags_code, queue_offset):
                self._on_queue_entry(topic, queue_id, queue_offset, store_ts)
        if indexed:
            self._index.build(topic, phy, store_ts, keys, uniq_key)
        self.dispatched_to = phy + size
        return _put_result(PutStatus.PUT_OK, phy, queue_offset, size, f"{self._msg_id_prefix}{phy:016X}", store_ts,
                           topic, queue_id)

    def _dispatch_appended(self, run: BatchRun, prepared: list[Prepared]) -> None:
        """The Dispatcher's rules for the `prepared` records just written, all with the run's store
        timestamp: each queue's entries in order (`ConsumeQueue.put_units`), the index keys in one batch
        (`IndexService.build_keys`), then the queue-entry callback once per queue with its newest entry,
        in log order."""
        store_ts = run.store_ts
        newest: list[tuple[int, str, int, int]] = []
        for (topic, queue_id), (first, units) in run.per_queue.items():
            last = self._queues.queue_for(topic, queue_id).put_units(first, units)
            if last >= 0:
                newest.append((UNIT.unpack_from(units, last * UNIT_SIZE)[0], topic, queue_id, first + last))
        keyless = _last_indexed_keyless(prepared)
        if keyless is not None:  # as `build` of each: even keyless messages roll a full index file
            self._index.build_keys(run.index_keys, store_ts, keyless)
        if len(newest) > 1:
            newest.sort(key=itemgetter(0))
        for _, topic, queue_id, queue_offset in newest:
            self._on_queue_entry(topic, queue_id, queue_offset, store_ts)
