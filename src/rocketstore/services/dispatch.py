"""Dispatch: turn commitlog records into consume-queue entries and index keys (RocketMQ's reput).

Rules (4.9.8): NOT and COMMIT records get a queue entry, PREPARED and ROLLBACK none; everything but
ROLLBACK is indexed under its UNIQ_KEY and every non-empty KEYS token. A record of
SCHEDULE_TOPIC_XXXX carrying DELAY gets its delivery time as tags code.
"""

from __future__ import annotations

import enum
import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import NamedTuple

from rocketstore._types import Buffer
from rocketstore.errors import CorruptRecordError
from rocketstore.format import properties as props
from rocketstore.format.consume_queue import pack_unit
from rocketstore.format.javahash import tags_code
from rocketstore.format.message import END_OF_FILE, NEED_DATA, StoredMessage, decode_message
from rocketstore.format.sysflag import gets_index_entry, gets_queue_entry
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.log.commitlog import CommitLog, decoded_record
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.index_service import IndexService, index_keys_of
from rocketstore.native import speedups


class DispatchRequest(NamedTuple):
    """What dispatch needs of one record (a NamedTuple: a catch-up builds one per record, and a tuple
    is built in a third of a frozen dataclass's time)."""

    topic: str
    queue_id: int
    phy_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: tuple[str, ...]
    uniq_key: str | None
    sys_flag: int

    @property
    def gets_queue_entry(self) -> bool:
        """NOT and COMMIT records get a consume-queue entry."""
        return gets_queue_entry(self.sys_flag)

    @property
    def gets_index_entry(self) -> bool:
        """Every record but ROLLBACK is indexed (under `index_keys`)."""
        return gets_index_entry(self.sys_flag)

    @property
    def index_keys(self) -> tuple[str, ...]:
        """The keys the index holds the record under, in the order the store writes them: UNIQ_KEY, then
        each KEYS token; the empty left out (as `log.index_service.index_keys_of` packs them)."""
        keys = (self.uniq_key, *self.keys) if self.uniq_key else self.keys
        return tuple(k for k in keys if k)


def delivery_tags_code(store_timestamp: int, level: int, delay_millis: list[int]) -> int:
    """Tags code of a delayed record: its delivery time (unknown level: +1 s, as RocketMQ)."""
    level = min(level, len(delay_millis))
    if level <= 0:
        return store_timestamp + 1000
    return store_timestamp + delay_millis[level - 1]


def request_from_message(msg: StoredMessage, delay_millis: list[int]) -> DispatchRequest:
    """Build the dispatch request of a decoded record."""
    properties = msg.properties
    code = tags_code(properties.get(props.TAGS))
    if msg.topic == SCHEDULE_TOPIC and props.DELAY in properties:
        try:
            level = int(properties[props.DELAY])
        except ValueError:
            level = 0
        if level > 0:
            code = delivery_tags_code(msg.store_timestamp, level, delay_millis)
    return DispatchRequest(
        msg.topic, msg.queue_id, msg.phy_offset, msg.size, code, msg.store_timestamp, msg.queue_offset,
        tuple(props.split_keys(properties.get(props.KEYS))), properties.get(props.UNIQ_KEY), msg.sys_flag,
    )


class RequestStop(enum.IntEnum):
    """Why `dispatch_requests` stopped (the compiled function returns these values; `_layout.h` has them)."""

    MORE = 0
    """It reached the limit, or made `max_count` requests."""
    BLANK = 1
    """A blank record: the file's data ends there."""
    CHECK = 2
    """The record at the position is for the full decode: not whole or well formed, or delayed."""


def dispatch_requests_py(cls: type[DispatchRequest], buf: Buffer, pos: int, limit: int, max_count: int,
                         held_topic: str, out: list[DispatchRequest]) -> tuple[int, RequestStop]:
    """The requests (`request_from_message`) of the records of one commitlog file's mapping from `pos`,
    appended to `out`: each record that is whole, well formed and ends by `limit`, at most `max_count`
    of them; stops before a blank record, before anything else it cannot decode, and before a record
    of `held_topic` (SCHEDULE_TOPIC_XXXX: its requests need the delay levels, which the caller has).
    The compiled `dispatch_requests` runs the same loop over the bytes."""
    count = 0
    while pos < limit and count < max_count:
        try:
            msg = decode_message(buf, pos)
        except CorruptRecordError:
            return pos, RequestStop.CHECK
        if msg is END_OF_FILE:
            return pos, RequestStop.BLANK
        if msg is NEED_DATA or pos + msg.size > limit or msg.topic == held_topic:
            return pos, RequestStop.CHECK
        out.append(request_from_message(msg, []))  # no delay levels: held_topic records are left to the caller
        pos += msg.size
        count += 1
    return pos, RequestStop.MORE


_dispatch_requests: Callable[..., tuple[int, int]] = (
    dispatch_requests_py if speedups is None or not hasattr(speedups, "dispatch_requests")
    else speedups.dispatch_requests)


def requests_from(commitlog: CommitLog, start: int, delay_millis: list[int], batch: int, end: int | None = None
                  ) -> Iterator[list[DispatchRequest]]:
    """The dispatch requests of every record from physical offset `start` (a record start) on, in log
    order, in lists of at most `batch`: the records `CommitLog.scan(start, end)` gives (those starting
    before `end`; None: to the end of the data), built in one compiled call per run of records; what
    that call leaves (a delayed record, or the end of the data) goes through `decode_message` and
    `request_from_message`, and the walk stops quietly where `scan` stops."""
    stop_at = commitlog.max_offset if end is None else min(end, commitlog.max_offset)
    for mf, pos in commitlog.files_from(start, stop_at):
        base, limit = mf.file_from_offset, mf.wrote_position
        while pos < limit:
            if base + pos >= stop_at:
                return
            out: list[DispatchRequest] = []
            pos, stop = _dispatch_requests(DispatchRequest, mf.mm, pos, limit, batch, SCHEDULE_TOPIC, out)
            if out and out[-1].phy_offset >= stop_at:  # the run went past `end`: the records before it
                yield out[:bisect_left(out, stop_at, key=_phy_offset_of)]
                return
            if out:
                yield out
            if stop == RequestStop.BLANK:
                break
            if stop == RequestStop.CHECK:
                if base + pos >= stop_at:
                    return
                msg = decoded_record(mf.mm, pos, limit)
                if not isinstance(msg, StoredMessage):
                    if msg is END_OF_FILE:
                        break
                    return
                yield [request_from_message(msg, delay_millis)]
                pos += msg.size


_phy_offset_of = attrgetter("phy_offset")


class Dispatcher:
    """Writes dispatch requests into consume queues and the index."""

    def __init__(self, queue_for: Callable[[str, int], ConsumeQueue], index: IndexService,
                 on_queue_entry: Callable[[DispatchRequest], None] | None = None) -> None:
        self._queue_for = queue_for
        self.index = index
        self._on_queue_entry = on_queue_entry

    def dispatch(self, req: DispatchRequest, *, queues: bool = True, index: bool = True) -> tuple[bool, bool]:
        """Apply one request (idempotent: entries already present are left alone).

        Returns:
            whether a queue entry was added, and whether index keys were.

        Raises:
            StoreError: a queue entry would leave a gap.
            OSError: a file could not be created.
        """
        queued = indexed = False
        if queues and req.gets_queue_entry:
            cq = self._queue_for(req.topic, req.queue_id)
            queued = cq.put(req.phy_offset, req.size, req.tags_code, req.queue_offset)
            if queued and self._on_queue_entry:
                self._on_queue_entry(req)
        if index and req.gets_index_entry:
            indexed = self.index.build(req.topic, req.phy_offset, req.store_timestamp, req.keys, req.uniq_key)
        return queued, indexed

    def write_packed(self, runs: list[QueueRun], groups: list[IndexGroup]) -> tuple[int, int]:
        """Write what `pack_requests` or `dispatch_packed` made of records in log order: each queue run
        (entries with consecutive queue offsets) in one write (`ConsumeQueue.put_units`), each store
        millisecond's index keys in one (`IndexService.build_keys`), the queue-entry callback once per
        run with its newest entry. Idempotent, as `dispatch`.

        Returns:
            how many queue entries were added, and how many records were indexed.

        Raises:
            StoreError: a queue entry would leave a gap (entries of other runs may have been written;
                writing again writes each entry once).
            OSError: a file could not be created.
        """
        queued = 0
        for key, first_offset, units, ends, newest in runs:
            cq = self._queue_for(*key)
            present_below = cq.max_physic_offset
            if cq.put_units(first_offset, units) >= 0:
                record_ends = memoryview(ends).cast("q")  # ascending: the records follow one another
                queued += len(record_ends) - bisect_right(record_ends, present_below)
                if self._on_queue_entry:
                    self._on_queue_entry(newest)
        indexed = 0
        for store_timestamp, keys, ends_keyless, with_keys in groups:
            if not keys:
                self.index.current()  # as `build` of a keyless record: a full file rolls
                continue
            if self.index.build_keys(keys, store_timestamp, ends_keyless):
                indexed += with_keys
        return queued, indexed


DISPATCH_BATCH = 4096
"""Records a catch-up dispatches at once (one dispatch_packed, one Dispatcher.write_packed)."""

QueueRun = tuple[tuple[str, int], int, bytearray, bytearray, DispatchRequest]
"""Entries of one queue with consecutive queue offsets: (topic, queue id), the first queue offset, their
20-byte units (as `ConsumeQueue.put_units` takes them), the records' end offsets (native int64, ascending)
and the newest request."""
IndexGroup = tuple[int, bytearray, bool, int]
"""Records stored in one millisecond, in log order: their store timestamp, their index keys (as
`IndexService.build_keys` takes them), whether the last has no key, how many have keys."""


def pack_requests_py(reqs: list[DispatchRequest], queue_from: int, index_from: int, inclusive: bool
                     ) -> tuple[list[QueueRun], list[IndexGroup]]:
    """What `Dispatcher.write_packed` writes for `reqs` (in log order): each queue's runs of entries with
    consecutive queue offsets, queues in the order they first appear (a record gets its entry from
    `queue_from` on), and the index keys grouped by store millisecond (from `index_from` on, or after it
    unless `inclusive`). The compiled `pack_requests` makes the same from the same requests."""
    queues: dict[tuple[str, int], list[list]] = {}  # [first offset, units, ends, newest, next offset]
    groups: list[IndexGroup] = []
    group: list[DispatchRequest] = []
    for req in reqs:
        if req.phy_offset >= queue_from and req.gets_queue_entry:
            queue_runs = queues.setdefault((req.topic, req.queue_id), [])
            if not queue_runs or queue_runs[-1][4] != req.queue_offset:
                queue_runs.append([req.queue_offset, bytearray(), bytearray(), req, req.queue_offset])
            run = queue_runs[-1]
            run[1] += pack_unit(req.phy_offset, req.size, req.tags_code)
            run[2] += _END.pack(req.phy_offset + req.size)
            run[3] = req
            run[4] += 1
        if (req.phy_offset >= index_from if inclusive else req.phy_offset > index_from) and req.gets_index_entry:
            if group and group[-1].store_timestamp != req.store_timestamp:
                groups.append(_index_group(group))
                group = []
            group.append(req)
    if group:
        groups.append(_index_group(group))
    runs = [(key, run[0], run[1], run[2], run[3]) for key, queue_runs in queues.items() for run in queue_runs]
    return runs, groups


def _index_group(group: list[DispatchRequest]) -> IndexGroup:
    keys = bytearray(index_keys_of((r.topic, r.phy_offset, r.keys, r.uniq_key) for r in group))
    return group[0].store_timestamp, keys, not group[-1].index_keys, sum(1 for r in group if r.index_keys)


_END = struct.Struct("=q")


class Packed(NamedTuple):
    """What `dispatch_packed` made of a run of records: their queue runs and index groups (as
    `pack_requests` makes them), how many records and the store timestamp of the last (None: none)."""

    runs: list[QueueRun]
    groups: list[IndexGroup]
    records: int
    last_store_timestamp: int | None


def dispatch_packed_py(cls: type[DispatchRequest], buf: Buffer, pos: int, limit: int, max_count: int,
                       held_topic: str, queue_from: int, index_from: int, inclusive: bool
                       ) -> tuple[int, RequestStop, list[QueueRun], list[IndexGroup], int, int | None]:
    """`dispatch_requests` of the records from `pos`, then `pack_requests` of their requests: (pos,
    stop, runs, groups, how many records, the last one's store timestamp or None). The compiled
    `dispatch_packed` makes the same in one pass over the bytes, with no request per record."""
    reqs: list[DispatchRequest] = []
    pos, stop = _dispatch_requests(cls, buf, pos, limit, max_count, held_topic, reqs)
    runs, groups = _pack_requests(reqs, queue_from, index_from, inclusive)
    return pos, RequestStop(stop), runs, groups, len(reqs), reqs[-1].store_timestamp if reqs else None
_pack_requests: Callable[[list[DispatchRequest], int, int, bool], tuple[list[QueueRun], list[IndexGroup]]] = (
    pack_requests_py if speedups is None or not hasattr(speedups, "pack_requests") else speedups.pack_requests)
_dispatch_packed: Callable[..., tuple[int, int, list[QueueRun], list[IndexGroup], int, int | None]] = (
    dispatch_packed_py if speedups is None or not hasattr(speedups, "dispatch_packed")
    else speedups.dispatch_packed)


def packed_from(commitlog: CommitLog, start: int, delay_millis: list[int], batch: int, queue_from: int,
                index_from: int, inclusive: bool, end: int | None = None) -> Iterator[Packed]:
    """What `Dispatcher.write_packed` writes for every record from physical offset `start` (a record
    start) to `end` (a record start; None: the end of the data), in log order, at most `batch` records
    at a time: the queue runs and
    index groups of `requests_from`'s requests packed by `pack_requests` (a record gets its queue entry
    from `queue_from` on, its index keys from `index_from` on, or after it unless `inclusive`), made
    from the bytes in one compiled call per run of records; a delayed record goes through
    `decode_message` and `request_from_message`, and the walk stops quietly where `scan` stops."""
    stop_at = commitlog.max_offset if end is None else min(end, commitlog.max_offset)
    for mf, pos in commitlog.files_from(start, stop_at):
        limit = min(mf.wrote_position, stop_at - mf.file_from_offset)
        while pos < limit:
            pos, stop, runs, groups, count, last = _dispatch_packed(
                DispatchRequest, mf.mm, pos, limit, batch, SCHEDULE_TOPIC, queue_from, index_from, inclusive)
            if count:
                yield Packed(runs, groups, count, last)
            if stop == RequestStop.BLANK:
                break
            if stop == RequestStop.CHECK:
                msg = decoded_record(mf.mm, pos, limit)
                if not isinstance(msg, StoredMessage):
                    if msg is END_OF_FILE:
                        break
                    return
                req = request_from_message(msg, delay_millis)
                yield Packed(*_pack_requests([req], queue_from, index_from, inclusive), 1, req.store_timestamp)
                pos += msg.size
