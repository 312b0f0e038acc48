"""The read path, a part of `MessageStore`: `get` (RocketMQ's getMessage), `query` by key, offsets by time,
whole-queue and whole-log iteration, and single records by offset or message id. It writes nothing: what
puts left behind the log is dispatched (by the write path) before a read of the queues or the index."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import fields
from functools import partial
from operator import attrgetter

from rocketstore import kernels
from rocketstore._types import Buffer
from rocketstore.config import StoreConfig
from rocketstore.errors import (
    InvalidArgumentError,
    MessageNotFoundError,
)
from rocketstore.format.consume_queue import UNIT_SIZE, CqUnit
from rocketstore.format.javahash import java_hash
from rocketstore.format.message import (
    STORE_TIMESTAMP_HEAD,
    StoredMessage,
    store_timestamp_in,
)
from rocketstore.format.msgid import decode_msg_id
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.entry_run import EntryReader, get_run, queue_messages
from rocketstore.log.index_file import HEADER_SLOTS
from rocketstore.log.index_service import IndexService
from rocketstore.native import speedups
from rocketstore.results import GetResult, GetStatus
from rocketstore.store.checks import (
    LONG_MAX,
    LONG_MIN,
    check_int,
    check_optional_int,
    check_queue,
    is_int,
)
from rocketstore.store.queues import ConsumeQueues
from rocketstore.store.running_flags import RunningFlags
from rocketstore.store.write_path import WritePath

MAX_TRANSFER_BYTES = 256 * 1024  # RocketMQ maxTransferBytesOnMessageInMemory
CQ_SCAN_ENTRIES = 800  # RocketMQ scans at most 16000 bytes of consume queue per get
_query_records: Callable[..., list[StoredMessage] | None] | None = (
    None if speedups is None else speedups.query_records)
"""The compiled loop of `query_py` and `newest_ascending` (None without the compiled module)."""
_get_result: Callable[[GetStatus, int, int, int, list[StoredMessage]], GetResult] = (
    GetResult if speedups is None
    else partial(speedups.fill_slots, GetResult, tuple(getattr(GetResult, f.name) for f in fields(GetResult))))
"""`GetResult(status, next_offset, min_offset, max_offset, messages)`, its frozen slots filled in one
compiled call (the dataclass's __init__ would set each through object.__setattr__, several times slower)."""
_mapping_of: Callable[[object], Buffer] = attrgetter("mm")
"""The mapping of a commitlog or index file, mapped now if it was not: `query_records` calls it for a file
it finds unmapped."""


def newest_ascending(found: dict[int, StoredMessage], max_count: int) -> list[StoredMessage]:
    """The newest `max_count` messages of `found` (by physical offset) in ascending order: how `query`
    answers (the compiled `query_records` orders its answer the same way)."""
    if len(found) <= 1:
        return list(found.values())
    return [found[phy] for phy in sorted(found)][-max_count:]


def _subscription_codes(expression: str | None) -> set[int] | None:
    """The tags codes a subscription expression wants (None: every code).

    Raises:
        InvalidArgumentError: `expression` is neither None nor a str.
    """
    if expression is not None and not isinstance(expression, str):
        raise InvalidArgumentError(f"get: tags must be None or a str, not {type(expression).__name__}")
    if expression is None or expression.strip() in ("", "*"):
        return None
    return {java_hash(t.strip()) for t in expression.split("||") if t.strip()}


def _check_get(topic: object, queue_id: object, offset: object) -> None:
    """The checks of `get`'s queue and offset, once a quick look found one that is not a plain str or int.

    Raises:
        InvalidArgumentError: a topic that is not a str, a queue id or offset that is not an int.
    """
    check_queue("get", topic, queue_id)
    if not is_int(offset):
        raise InvalidArgumentError(f"get: offset must be an int, not {offset!r}")


def _check_time_bounds(what: str, begin_ms: object, end_ms: object) -> None:
    """Raises InvalidArgumentError unless `begin_ms` is a number (an int or a float) and `end_ms` None or
    a number: epoch milliseconds, compared with the stored times."""
    for name, value in (("begin_ms", begin_ms), ("end_ms", end_ms)):
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            if value is None and name == "end_ms":
                continue
            raise InvalidArgumentError(f"{what}: {name} must be a number of epoch milliseconds, not {value!r}")


class ReadPath:
    """The reads of a store (a part of `MessageStore`)."""

    def __init__(self, config: StoreConfig, commitlog: CommitLog, queues: ConsumeQueues, index: IndexService,
                 flags: RunningFlags, writes: WritePath) -> None:
        self.config = config
        self.commitlog = commitlog
        self._queue_part = queues
        self._queues = queues.by_key  # looked up on every get: the dict itself, which only `queues` changes
        self.index = index
        self._flags = flags
        self._writes = writes
        self._max_query_results = config.max_query_results  # the config is frozen
        self._max_get_count = max(1, config.max_get_count)

    @property
    def min_phy_offset(self) -> int:
        """Physical offset of the oldest stored byte.

        Raises:
            StoreClosedError: the store was closed.
        """
        self._flags.check_open()
        return self.commitlog.min_offset

    @property
    def max_phy_offset(self) -> int:
        """Physical offset one past the last record.

        Raises:
            StoreClosedError: the store was closed.
        """
        self._flags.check_open()
        return self.commitlog.max_offset

    def queues(self) -> dict[str, list[int]]:
        """Topic -> its queue ids that hold or held messages.

        Raises:
            StoreClosedError: the store was closed.
        """
        self._flags.check_open()
        self._writes.dispatch_behind()
        result: dict[str, list[int]] = {}
        for topic, queue_id in sorted(self._queues):
            result.setdefault(topic, []).append(queue_id)
        return result

    def min_offset(self, topic: str, queue_id: int) -> int:
        """First queue offset still readable (0 for an unknown queue).

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: a topic that is not a str, a queue id that is not an int.
        """
        self._flags.check_open()
        if type(topic) is not str or type(queue_id) is not int:
            check_queue("min_offset", topic, queue_id)
        self._writes.dispatch_behind()
        cq = self._queues.get((topic, queue_id))
        return cq.min_offset if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """One past the last queue offset (0 for an unknown queue).

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: a topic that is not a str, a queue id that is not an int.
        """
        self._flags.check_open()
        if type(topic) is not str or type(queue_id) is not int:
            check_queue("max_offset", topic, queue_id)
        self._writes.dispatch_behind()
        cq = self._queues.get((topic, queue_id))
        return cq.max_offset if cq else 0

    def message_at(self, phy_offset: int) -> StoredMessage:
        """The record starting at `phy_offset`.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: `phy_offset` is not an int.
            MessageNotFoundError: no record starts there.
        """
        self._flags.check_open()
        if type(phy_offset) is not int and not is_int(phy_offset):
            raise InvalidArgumentError(f"message_at: phy_offset must be an int, not {phy_offset!r}")
        return self.commitlog.message_at(phy_offset)

    def message_by_id(self, msg_id: str) -> StoredMessage:
        """The record an offset message id names.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: `msg_id` is not a str.
            MessageNotFoundError: a malformed id, or no record at its offset.
        """
        from rocketstore.errors import FormatError

        self._flags.check_open()
        if not isinstance(msg_id, str):
            raise InvalidArgumentError(f"message_by_id: msg_id must be a str, not {type(msg_id).__name__}")
        try:
            _, phy_offset = decode_msg_id(msg_id)
        except FormatError as exc:
            raise MessageNotFoundError(str(exc)) from None
        return self.message_at(phy_offset)

    def queue_entries(self, topic: str, queue_id: int, start: int | None = None,
                      end: int | None = None) -> Iterator[CqUnit]:
        """Raw consume-queue entries of [start, end) (default: min to max).

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: a topic that is not a str, a queue id, start or end that is not an int.
        """
        self._flags.check_open()
        check_queue("queue_entries", topic, queue_id)
        check_optional_int("queue_entries: start", start)
        check_optional_int("queue_entries: end", end)
        self._writes.dispatch_behind()
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return iter(())
        lo = cq.min_offset if start is None else start
        hi = cq.max_offset if end is None else end
        return iter(cq.units(lo, hi))

    def iter_queue(self, topic: str, queue_id: int, start: int | None = None,
                   end: int | None = None, *, chunk: int = 1024) -> Iterator[StoredMessage]:
        """Every message of a queue in [start, end) queue offsets, no count cap (fillers skipped, and
        entries that point at a record of another queue or queue offset passed over, as `get` does).

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: a topic that is not a str, a queue id, start or end that is not an int,
                a chunk that is not an int of at least 1.
        """
        self._flags.check_open()
        check_queue("iter_queue", topic, queue_id)
        check_optional_int("iter_queue: start", start)
        check_optional_int("iter_queue: end", end)
        check_int("iter_queue: chunk", chunk, LONG_MAX, 1)
        return self._iter_queue(topic, queue_id, start, end, chunk)

    def _iter_queue(self, topic: str, queue_id: int, start: int | None, end: int | None,
                    chunk: int) -> Iterator[StoredMessage]:
        self._writes.dispatch_behind()
        self._flags.check_open()
        cq = self._queues.get((topic, queue_id))
        if cq is None:
            return
        yield from queue_messages(self.commitlog, cq, cq.min_offset if start is None else start,
                                  cq.max_offset if end is None else end, chunk, self._queue_part.passed_over)

    def scan(self, start: int | None = None, end: int | None = None) -> Iterator[StoredMessage]:
        """Every record of the commitlog in log order from physical offset `start` (a record start;
        before `min_phy_offset`, the oldest record) up to `end`.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: `start` or `end` is neither None nor an int of at least 0.
            MessageNotFoundError: `start` is inside the stored log but no record starts there.
        """
        self._flags.check_open()
        check_optional_int("scan: start", start, 0)
        check_optional_int("scan: end", end, 0)
        if start is not None and self.commitlog.min_offset <= start < self.commitlog.max_offset:
            self.commitlog.message_at(start)  # raises, naming the offset, unless a record starts there
        return self.commitlog.scan(start, end)

    def get(self, topic: str, queue_id: int, offset: int, max_count: int = 32, *, tags: str | None = None,
            stop_at_file_end: bool = False) -> GetResult:
        """Read up to `max_count` messages of a queue from `offset` (RocketMQ's getMessage).

        Args:
            tags: subscription expression ("TagA || TagB"; None or "*" for all).
            stop_at_file_end: stop at a consume-queue file boundary as RocketMQ 4.9.8 does.

        A get never answers a message that is not of `topic`, `queue_id` and its queue offset: a
        consume-queue entry that points at any other record (a damaged queue) is passed over as if
        its message were gone (`next_offset` moves past it; MESSAGE_WAS_REMOVING when nothing else was
        found), counted in `misplaced_entries()` and logged once a queue.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: `max_count` below 1 (RocketMQ's broker answers one message then; a
                caller asking for none is more likely a bug), a topic or tags that are not a str, a
                queue id or offset that is not an int.
        """
        writes = self._writes
        if writes.behind_to > writes.dispatched_to:  # `dispatch_behind`'s test, inline on a hot path
            writes.dispatch_behind()
        if self._flags.closed:
            self._flags.check_open()
        if type(max_count) is not int or max_count < 1:
            raise InvalidArgumentError(f"get: max_count must be an int of at least 1, not {max_count!r}")
        if type(topic) is not str or type(queue_id) is not int or type(offset) is not int:
            _check_get(topic, queue_id, offset)
        cq = self._queues.get((topic, queue_id))
        if max_count > self._max_get_count:
            max_count = self._max_get_count
        if tags is None and cq is not None:  # the usual get: one kernel call, when every entry gives its message
            answer = get_run(StoredMessage, cq, cq.min_logic_offset, queue_id, offset, max_count, MAX_TRANSFER_BYTES,
                             self.commitlog.queue, topic)
            if answer is not None:
                run, lo, hi = answer
                return _get_result(GetStatus.FOUND, offset + len(run), lo, hi, run)
        if cq is None or (hi := cq.max_offset) == 0:
            return _get_result(GetStatus.NO_MESSAGE_IN_QUEUE, 0, 0, 0, [])
        lo = cq.min_offset
        if offset < lo:
            return _get_result(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi, [])
        if offset == hi:
            return _get_result(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi, [])
        if offset > hi:
            return _get_result(GetStatus.OFFSET_OVERFLOW_BADLY, hi, lo, hi, [])
        scan_end = offset + (CQ_SCAN_ENTRIES if CQ_SCAN_ENTRIES > max_count else max_count)
        if scan_end > hi:
            scan_end = hi
        if stop_at_file_end:
            per_file = self.config.consume_queue_file_entries
            scan_end = min(scan_end, offset - offset % per_file + per_file)
        reader = EntryReader(self.commitlog, None if tags is None else _subscription_codes(tags), max_count,
                             MAX_TRANSFER_BYTES, topic, queue_id)
        messages = reader.messages
        consumed = 0
        position, window = offset, max_count
        while not reader.full and position < scan_end:
            # read the queue in growing windows: a plain get needs max_count entries, not 800
            want = min(scan_end, position + window) - position
            entries = cq.entry_bytes_within(position, position + want)  # lo <= position, the end <= hi
            consumed += reader.read(entries, position)
            if len(entries) < want * UNIT_SIZE or len(messages) >= max_count:
                break
            position += want
            window *= 4
        if reader.misplaced:
            self._queue_part.passed_over(topic, queue_id, reader.misplaced)
        if messages:
            status = GetStatus.FOUND
        else:
            status = GetStatus.MESSAGE_WAS_REMOVING if reader.removed else GetStatus.NO_MATCHED_MESSAGE
        return _get_result(status, offset + consumed, lo, hi, messages)

    def index_lookup(self, topic: str, key: str, *, max_count: int = 64, begin_ms: int = 0,
                     end_ms: int | None = None) -> list[int]:
        """RocketMQ's exact queryMessage answer: physical offsets whose index entries match the key's
        32-bit hash (collisions included), second-granular time bounds, ascending.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: `max_count` below 1, a topic or key that is not a str, time bounds
                that are not numbers.
        """
        self._flags.check_open()
        if type(max_count) is not int or max_count < 1:
            raise InvalidArgumentError(f"index_lookup: max_count must be an int of at least 1, not {max_count!r}")
        if not (isinstance(topic, str) and isinstance(key, str)):
            raise InvalidArgumentError(f"index_lookup: topic and key must be str, not {type(topic).__name__} and "
                                       f"{type(key).__name__}")
        _check_time_bounds("index_lookup", begin_ms, end_ms)
        self._writes.dispatch_behind()
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
            InvalidArgumentError: `max_count` below 1, a topic or key that is not a str, time bounds
                that are not numbers.
        """
        writes = self._writes
        if writes.behind_to > writes.dispatched_to:  # `dispatch_behind`'s test, inline on a hot path
            writes.dispatch_behind()
        if self._flags.closed:
            self._flags.check_open()
        if end_ms is None and _query_records is not None:  # the usual query: the kernel checks its arguments
            cap = self._max_query_results
            commitlog = self.commitlog
            try:  # it declines (None) a count below 1 and bounds that are not ints, raises TypeError for text
                answer = _query_records(StoredMessage, self.index.files, commitlog.queue.files,
                                        commitlog.file_size, topic, key, max_count if max_count <= cap else cap,
                                        begin_ms, LONG_MAX, begin_ms <= 0, _mapping_of, HEADER_SLOTS)
            except TypeError:  # arguments of other types: named below
                answer = None
            if answer is not None:
                return answer
        return self._query_checked(topic, key, max_count, begin_ms, end_ms)

    def _query_checked(self, topic: str, key: str, max_count: int, begin_ms: int,
                       end_ms: int | None) -> list[StoredMessage]:
        """`query` with its arguments checked one by one, then answered by the compiled kernel where it is
        built and takes them, else by `query_py`."""
        if type(max_count) is not int or max_count < 1:
            raise InvalidArgumentError(f"query: max_count must be an int of at least 1, not {max_count!r}")
        if not (isinstance(topic, str) and isinstance(key, str)):
            raise InvalidArgumentError(f"query: topic and key must be str, not {type(topic).__name__} and "
                                       f"{type(key).__name__}")
        if type(begin_ms) is not int or (end_ms is not None and type(end_ms) is not int):
            _check_time_bounds("query", begin_ms, end_ms)
        max_count = min(max_count, self._max_query_results)
        end = LONG_MAX if end_ms is None else end_ms
        any_time = begin_ms <= 0 and end_ms is None
        if _query_records is not None:
            commitlog = self.commitlog
            answer = _query_records(StoredMessage, self.index.files, commitlog.queue.files, commitlog.file_size,
                                    topic, key, max_count, begin_ms, end, any_time, _mapping_of, HEADER_SLOTS)
            if answer is not None:
                return answer
            kernels.declined("query_records")
        return newest_ascending(self.query_py(topic, key, max_count, begin_ms, end, any_time), max_count)

    def query_py(self, topic: str, key: str, max_count: int, begin_ms: int, end: int,
                 any_time: bool) -> dict[int, StoredMessage]:
        """The messages `query` answers with, by physical offset, before ordering: the twin of the
        compiled `query_records`, which declines (and this runs) where an index file or a text is
        beyond what it takes.

        Raises:
            StoreClosedError: the store was closed.
        """
        self._flags.check_open()
        # index times: whole seconds after the file's begin; any time: none filtered (a record whose store
        # time was damaged, which no CRC covers, misplaces the times of its whole index file)
        widened_begin = LONG_MIN if any_time else 0 if begin_ms <= 1000 else begin_ms - 1000
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
                return found
            limit *= 4

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """First queue offset whose message was stored at or after `timestamp_ms` (max offset when
        none was), from the stored timestamps.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: a topic that is not a str, a queue id that is not an int, a time that
                is not an int64.
        """
        self._flags.check_open()
        check_queue("offset_by_time", topic, queue_id)
        check_int("offset_by_time: timestamp_ms", timestamp_ms, LONG_MAX, LONG_MIN)
        self._writes.dispatch_behind()
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
        """Store time of the message at a queue offset, -1 when there is none.

        Raises:
            StoreClosedError: the store was closed.
            InvalidArgumentError: a topic that is not a str, a queue id or queue offset that is not an int.
        """
        self._flags.check_open()
        check_queue("store_timestamp_at", topic, queue_id)
        check_int("store_timestamp_at: queue_offset", queue_offset, LONG_MAX, LONG_MIN)
        self._writes.dispatch_behind()
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

