"""A queue range's, or a commitlog range's, record batches straight from the commitlog's mapping: no
message object per row.

The consume-queue entries of a chunk of the range (numpy) give each record's physical offset; the
compiled `record_columns` builds the batch's columns from the records where they lie in the mapped
commitlog file. Before that, every record is checked with numpy for what the message path
(`log.entry_run.decode_run`) checks: a valid entry (not a filler), a record inside the file's written
bytes, a record magic, a record size that fits the entry, the record's own physical offset, queue id and
queue offset those of the entry; after it, the topic. A chunk where any check fails, or a row
`record_columns` does not cover, is read the message path's way (`LogReader.queue_runs`), which decides
what such an entry gives (a record read elsewhere, or nothing). Both ways give equal batches
(`tests/spark/test_columnar.py`).

A commitlog range is walked record by record on the 8-byte prefixes (size, magic) in each mapped file;
the records the walk takes whole go to `record_columns` as they lie. From the first record it does not
take (neither a record magic nor a blank, a size below a record's, a record past the written bytes) the
message path (`LogReader.scan_runs`, `CommitLog.scan`) reads the rest of the range, and a chunk whose
rows `record_columns` declines is read that way too (`tests/unit/test_scan_log_direct.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore.format.consume_queue import FILLER_SIZE
from rocketstore.format.message import (
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    PHY_OFFSET_POS,
    QUEUE_ID_POS,
    QUEUE_OFFSET_POS,
)
from rocketstore.format.spans import SPANS_FULL, SPANS_NOT_TAKEN, record_spans
from rocketstore.native import speedups
from rocketstore.scan.arrays import scalar
from rocketstore.scan.columnar import (
    BATCH_BYTES,
    BATCH_ROWS,
    NotColumnar,
    RecordLayout,
    columns_of,
    gather_rows,
    run_batches,
)
from rocketstore.scan.records import ARROW_SCHEMA
from rocketstore.scan.stores import LogReader

__all__ = ["AVAILABLE", "log_batches", "queue_batches", "topic_rows", "topic_rows_py"]

_record_columns = None if speedups is None else speedups.record_columns
_topic_rows = None if speedups is None else speedups.topic_rows
AVAILABLE = _record_columns is not None
"""True when the compiled `record_columns` is there (without it, readers take the message path)."""

_ENTRY = np.dtype([("phy", ">i8"), ("size", ">i4"), ("tags", ">i8")])


def _at(u8: np.ndarray, pos: np.ndarray, dtype: str) -> np.ndarray:
    """The big-endian integer of type `dtype` at each position."""
    width = np.dtype(dtype).itemsize
    return u8[pos[:, None] + np.arange(width)].view(dtype).reshape(-1)


def queue_batches(log: LogReader, topic: str, queue_id: int, start: int, end: int,
                  broker: str) -> Iterator[pa.RecordBatch]:
    """The messages of queue offsets `[start, end)` of one queue as record batches of at most
    `BATCH_ROWS` rows and about `BATCH_BYTES` record bytes, in queue order."""
    cq = log.consume_queue(topic, queue_id)
    lo, hi = max(start, cq.min_offset), min(end, cq.max_offset)
    while lo < hi:
        entries = np.frombuffer(cq.entry_bytes(lo, min(hi, lo + BATCH_ROWS)), dtype=_ENTRY)
        if len(entries) == 0:
            return
        count = min(_bytes_cut(entries["size"]), _file_cut(entries["phy"], log.config.commitlog_file_size))
        entries = entries[:count]
        batch = _direct(log, entries, topic, queue_id, lo, broker)
        if batch is None:  # the message path decides what these entries give
            yield from run_batches(log.queue_runs(topic, queue_id, lo, lo + count), broker)
        elif batch.num_rows:
            yield batch
        lo += count


def log_batches(log: LogReader, start: int, end: int, broker: str,
                topics: frozenset[str] | None = None) -> Iterator[pa.RecordBatch]:
    """The records starting in physical offsets `[start, end)` (`start` a record start) as record
    batches of at most `BATCH_ROWS` rows and about `BATCH_BYTES` record bytes, in log order: the rows
    `run_batches(log.scan_runs(start, end))` gives (its batches may end elsewhere: at each file's end).

    With `topics`, a record whose topic is none of them may be left out before its columns are built
    (`topic_rows`), and the records kept from consecutive walks make one batch; the caller still filters
    the rows by topic, as rows of any topic may come."""
    wanted = _topic_bytes(topics)
    file_size = log.config.commitlog_file_size
    walk = BATCH_ROWS if wanted is None else TOPIC_WALK * BATCH_ROWS  # records a walk goes over at most
    walk_bytes = BATCH_BYTES if wanted is None else TOPIC_WALK * BATCH_BYTES
    starts, ends = np.empty(walk, dtype=np.int64), np.empty(walk, dtype=np.int64)
    at = start
    while at < end:
        file_start, written, mm = log.commitlog.readable_file(at)
        if written < 0:
            return
        pos, limit = at - file_start, min(written, end - file_start)
        kept = _Kept(log, mm, file_start, broker)
        stop = SPANS_FULL
        while stop == SPANS_FULL:
            count, pos, stop = record_spans(mm, pos, limit, written, file_start, walk, walk_bytes, starts, ends)
            if not count:
                continue
            if wanted is None:
                yield from _log_chunk(log, mm, file_start, starts[:count], ends[:count], broker)
                continue
            keep = topic_rows(mm, starts[:count], ends[:count], wanted)
            if keep is None:  # undecided: every record of the walk goes to the batch builder
                yield from kept.add(starts[:count].copy(), ends[:count].copy())
            else:
                rows = np.flatnonzero(keep)
                yield from kept.add(starts[rows], ends[rows])
        yield from kept.batches()
        if stop == SPANS_NOT_TAKEN:  # the message path decides what lies here and after
            yield from run_batches(log.scan_runs(file_start + pos, end), broker)
            return
        at = file_start + file_size


TOPIC_WALK = 4
"""A walk of a read that passes over other topics' records goes over this many batches' records and bytes
at most (it keeps about a batch of a topic of four)."""


class _Kept:
    """The records `topic_rows` kept from consecutive walks over one mapped file, made into batches of up
    to `BATCH_ROWS` rows and about `BATCH_BYTES` record bytes."""

    def __init__(self, log: LogReader, mm: Any, file_start: int, broker: str) -> None:
        self.log, self.mm, self.file_start, self.broker = log, mm, file_start, broker
        self.starts: list[np.ndarray] = []
        self.ends: list[np.ndarray] = []
        self.rows = self.bytes = 0

    def add(self, starts: np.ndarray, ends: np.ndarray) -> Iterator[pa.RecordBatch]:
        """Keep the records at `[starts[i], ends[i])` (arrays the caller no longer changes), making a
        batch of those kept whenever the next would take it past a batch's rows or bytes."""
        sizes = np.cumsum(ends - starts)
        at = 0
        while at < len(starts):
            room = BATCH_BYTES - self.bytes + (int(sizes[at - 1]) if at else 0)
            take = min(BATCH_ROWS - self.rows, int(np.searchsorted(sizes, room, side="right")) - at)
            if take <= 0 and self.rows:
                yield from self.batches()
                continue
            take = max(take, 1)  # a record bigger than a batch's bytes makes a batch of its own
            self.starts.append(starts[at:at + take])
            self.ends.append(ends[at:at + take])
            self.rows += take
            self.bytes += int(sizes[at + take - 1]) - (int(sizes[at - 1]) if at else 0)
            at += take

    def batches(self) -> Iterator[pa.RecordBatch]:
        """The batch of the records kept so far (none when none is), and forget them."""
        if not self.rows:
            return
        starts, ends = np.concatenate(self.starts), np.concatenate(self.ends)
        self.starts, self.ends, self.rows, self.bytes = [], [], 0, 0
        yield from _log_chunk(self.log, self.mm, self.file_start, starts, ends, self.broker)


def _log_chunk(log: LogReader, mm: Any, file_start: int, starts: np.ndarray, ends: np.ndarray,
               broker: str) -> Iterator[pa.RecordBatch]:
    """The batch of the whole records at `[starts[i], ends[i])` of one mapped file (in log order; where the
    batch builder declines one, the message path reads every record from the first's start to the last's
    end)."""
    batch = columns_of(mm, starts, ends, broker)
    if batch is None:
        yield from run_batches(log.scan_runs(file_start + int(starts[0]), file_start + int(ends[-1])), broker)
    else:
        yield batch


def _topic_bytes(topics: frozenset[str] | None) -> tuple[bytes, ...] | None:
    """The topics as the records hold them (UTF-8); None (no leaving out) without topics, or when a
    topic holds U+FFFD, which a record's undecodable topic bytes would also decode to."""
    if topics is None or any("\ufffd" in topic for topic in topics):
        return None
    return tuple(sorted(topic.encode() for topic in topics))


def topic_rows(data: Any, starts: np.ndarray, ends: np.ndarray, topics: tuple[bytes, ...]) -> np.ndarray | None:
    """Which of the whole records at `[starts[i], ends[i])` of `data` have one of `topics` (UTF-8
    bytes), read from the bytes without building a column. None (decide nothing) when a record has IPv6
    hosts, is neither record version, or has lengths that do not add up: the full decode then decides
    every row. The compiled `topic_rows` where it is built, else its twin `topic_rows_py`."""
    if _topic_rows is None:
        return topic_rows_py(data, starts, ends, topics)
    keep = np.empty(len(starts), dtype=np.bool_)
    return None if _topic_rows(data, starts, ends, topics, keep) < 0 else keep


def topic_rows_py(data: Any, starts: np.ndarray, ends: np.ndarray, topics: tuple[bytes, ...]) -> np.ndarray | None:
    """`topic_rows` with numpy: each record's topic found where the batch builder's numpy route finds it
    (`columnar.RecordLayout`)."""
    u8 = np.frombuffer(data, dtype=np.uint8)
    try:
        layout = RecordLayout(u8, starts, ends - starts)
    except NotColumnar:
        return None
    length = layout.topic_end - layout.topic_begin
    keep = np.zeros(len(starts), dtype=bool)
    for topic in topics:
        rows = np.flatnonzero(length == len(topic))
        if len(rows) and topic:
            same = (gather_rows(u8, layout.topic_begin[rows], len(topic)) == np.frombuffer(topic, dtype=np.uint8)
                    ).all(axis=1)
            rows = rows[same]
        keep[rows] = True
    return keep


def _bytes_cut(sizes: np.ndarray) -> int:
    """How many of the entries fit one batch's bytes (at least one)."""
    total = np.cumsum(sizes.astype(np.int64).clip(0, FILLER_SIZE))
    return max(1, int(np.searchsorted(total, BATCH_BYTES, side="right")))


def _file_cut(phy: np.ndarray, file_size: int) -> int:
    """How many of the entries come before the first that points past the file of the first valid one
    (at least one)."""
    valid = np.flatnonzero(phy >= 0)
    if len(valid) == 0:
        return len(phy)
    file_end = (int(phy[valid[0]]) // file_size + 1) * file_size
    past = np.flatnonzero(phy >= file_end)
    return max(1, int(past[0])) if len(past) else len(phy)


def _direct(log: LogReader, entries: np.ndarray, topic: str, queue_id: int, first_offset: int,
            broker: str) -> pa.RecordBatch | None:
    """The batch of the chunk's records, or None when a check fails."""
    phy = entries["phy"].astype(np.int64)
    size = entries["size"].astype(np.int64)
    offsets = first_offset + np.arange(len(entries), dtype=np.int64)
    filler = (phy == 0) & (size == FILLER_SIZE) & (entries["tags"] == 0)
    keep = (phy >= 0) & (size > 0) & ~filler
    if not keep.all():
        phy, size, offsets = phy[keep], size[keep], offsets[keep]
    if len(phy) == 0:
        return pa.RecordBatch.from_pylist([], schema=ARROW_SCHEMA)
    file_start, written, mm = log.commitlog.readable_file(int(phy[0]))
    if written < 0:
        return None
    pos = phy - file_start
    if (pos < 0).any() or (pos + size > written).any() or (size < MIN_RECORD_SIZE).any():
        return None  # a record elsewhere (another file) or outside the written bytes
    u8 = np.frombuffer(mm, dtype=np.uint8)
    total = _at(u8, pos, ">i4").astype(np.int64)
    magic = _at(u8, pos + 4, ">u4")
    if (((magic != MAGIC_V1) & (magic != MAGIC_V2)).any() or (total < MIN_RECORD_SIZE).any()
            or (total > size).any()):
        return None
    if ((_at(u8, pos + PHY_OFFSET_POS, ">i8") != phy).any() or (_at(u8, pos + QUEUE_ID_POS, ">i4") != queue_id).any()
            or (_at(u8, pos + QUEUE_OFFSET_POS, ">i8") != offsets).any()):
        return None
    batch = columns_of(mm, pos, pos + total, broker)
    if batch is None:
        return None
    if not pc.all(pc.equal(batch.column("topic"), scalar(topic, pa.string()))).as_py():
        return None
    return batch

