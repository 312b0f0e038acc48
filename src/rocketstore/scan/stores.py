"""Opening stores for the readers (Spark's and `rocketstore.arrow`): read-only opens with the geometry given by options.

Readers never keep a store open between calls and never write: planning on the driver opens the store
with `MessageStore.open(read_only=True)` (no lock, no recovery), which finds where the valid data ends
and so fixes each partition's bounds. Tasks then read those bounds with `LogReader`, which maps the
same files through the store's own `log` classes but skips the end-of-data search a read-only open
runs (it decodes the last three commitlog files), since the driver already did it once: a task
costs the records it reads, not the size of the store.
"""

from __future__ import annotations

import itertools
import logging
import mmap
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rocketstore.format.filenames import offset_to_name
from rocketstore.format.message import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    PHY_OFFSET_POS,
    StoredMessage,
    peek_prefix,
)
from rocketstore.format.store_dirs import COMMITLOG_DIR

log = logging.getLogger("rocketstore.scan")

if TYPE_CHECKING:
    from rocketstore import MessageStore, StoreConfig
    from rocketstore.store.files import CommitLog, ConsumeQueue

_ENTRY = [("phy", ">i8"), ("size", ">i4"), ("tags", ">i8")]
"""A consume-queue entry (20 bytes) as a numpy record."""

__all__ = ["LogReader", "commitlog_extent", "cut_points", "make_config", "open_read_only", "record_starts",
           "store_config"]


def make_config(geometry: tuple[tuple[str, int], ...]) -> StoreConfig | None:
    """A StoreConfig with the geometry overrides, or None to let the store read its own config."""
    from rocketstore import StoreConfig

    return StoreConfig().with_geometry(dict(geometry)) if geometry else None


def store_config(root: str, geometry: tuple[tuple[str, int], ...] = ()) -> StoreConfig:
    """The config a read-only open of `root` uses: the geometry options, else the store's own (what it
    recorded in `config/rocketstore.json`, or for a store RocketMQ wrote what its files give; the same
    resolution as `MessageStore.open(root, read_only=True)`)."""
    from rocketstore import MessageStore, StoreConfig

    if geometry:
        return StoreConfig().with_geometry(dict(geometry))
    return MessageStore.config_of(root, read_only=True)


def commitlog_extent(root: str, config: StoreConfig) -> tuple[int, int]:
    """(min, end) physical offsets of the whole records of the commitlog, as a read-only open finds them,
    without loading the consume queues (which a full read-only open does).

    Raises:
        FileNotFoundError: no store directory at `root`.
        rocketstore.errors.StoreLayoutError: commitlog files that do not fit the geometry.
    """
    from pathlib import Path

    from rocketstore.store.files import CommitLog, find_end

    if not os.path.isdir(root):
        raise FileNotFoundError(f"no store directory at {root}")
    commitlog = CommitLog(Path(root), config.commitlog_file_size, read_only=True)
    try:
        commitlog.load()
        return commitlog.min_offset, find_end(commitlog)
    finally:
        commitlog.close()


@contextmanager
def open_read_only(root: str, geometry: tuple[tuple[str, int], ...] = (), **overrides: Any) -> Iterator[MessageStore]:
    """Open the store at `root` read-only for the duration of a `with` block.

    Raises:
        rocketstore.errors.StoreError: the directory is not a store, or its files do not fit the geometry.
    """
    from rocketstore import MessageStore

    store = MessageStore.open(root, make_config(geometry), read_only=True)
    if overrides:
        # Settings beyond the geometry (e.g. the query cap) on top of the store's own config.
        config = replace(store.config, **overrides)
        store.close()
        store = MessageStore.open(root, config, read_only=True)
    try:
        yield store
    finally:
        store.close()


def record_starts(root: str, file_size: int, lo: int, hi: int, step: int) -> list[int]:
    """Physical offsets in `[lo, hi)` where records start, about `step` bytes apart, `lo` first.

    `lo` must be a record start (a file start or the log's minimum). Walks only the 8-byte record
    prefixes (`format.message.peek_prefix`), one commitlog file at a time; a blank record moves to the
    next file, whose start is always a record start.
    """
    starts = [lo]
    file_start = lo - lo % file_size
    while file_start < hi:
        pos = max(lo, file_start) - file_start
        end = min(hi - file_start, file_size)
        path = os.path.join(root, COMMITLOG_DIR, offset_to_name(file_start))
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            end = min(end, len(buf))
            while pos < end:
                prefix = peek_prefix(buf, pos)
                if prefix is None or prefix[1] == BLANK_MAGIC or prefix[1] not in (MAGIC_V1, MAGIC_V2):
                    break
                if file_start + pos - starts[-1] >= step:
                    starts.append(file_start + pos)
                if prefix[0] <= 0:
                    break
                pos += prefix[0]
        file_start += file_size
        if file_start < hi and file_start - starts[-1] >= step:
            starts.append(file_start)
    return starts


_SEARCH_WINDOW = 1 << 20


def _self_described(buf: Any, pos: int, file_start: int, end: int) -> bool:
    """True when a record starts at `pos` of the mapped file `buf`: a record magic, a size that fits
    before `end`, its own physical offset in its header, and at its end either `end`, a blank, or
    another such record."""
    import struct

    for _ in range(2):
        if pos + PHY_OFFSET_POS + 8 > end:
            return False
        total, magic = struct.unpack_from(">iI", buf, pos)
        if magic not in (MAGIC_V1, MAGIC_V2) or total < MIN_RECORD_SIZE or pos + total > end:
            return False
        if struct.unpack_from(">q", buf, pos + PHY_OFFSET_POS)[0] != file_start + pos:
            return False
        pos += total
        if pos >= end or pos + 8 > end or struct.unpack_from(">I", buf, pos + 4)[0] == BLANK_MAGIC:
            return True
    return True


def _start_at_or_after(buf: Any, pos: int, file_start: int, end: int) -> int | None:
    """The first position at or after `pos` where a record starts (`_self_described`), found by its
    magic with numpy; None when there is none before `end`."""
    import numpy as np

    magics = (MAGIC_V1.to_bytes(4, "big"), MAGIC_V2.to_bytes(4, "big"))
    while pos < end:
        stop = min(end, pos + _SEARCH_WINDOW + 8)
        window = np.frombuffer(buf, dtype=np.uint8, count=stop - pos, offset=pos)
        if len(window) < 8:
            return None
        hits = np.zeros(len(window) - 7, dtype=bool)
        for magic in magics:
            m = np.ones(len(window) - 7, dtype=bool)
            for k in range(4):
                m &= window[4 + k:len(window) - 3 + k] == magic[k]
            hits |= m
        for at in np.flatnonzero(hits).tolist():
            if _self_described(buf, pos + at, file_start, end):
                return pos + at
        if stop >= end:
            return None
        pos = stop - 8
    return None


def cut_points(root: str, file_size: int, lo: int, hi: int, step: int) -> list[int]:
    """Record starts in `[lo, hi)` about `step` bytes apart, `lo` first, as `record_starts` gives, but
    found without walking every record: each file's start, and within a file the first record at or
    after every `step` bytes, known by its magic and its own physical offset in its header (and the
    record after it). Ranges between them hold the same records as the walk's ranges on an undamaged
    log; on a damaged one a cut may lie past the damage, where the walk would cut nothing."""
    starts = [lo]
    file_start = lo - lo % file_size
    while file_start < hi:
        path = os.path.join(root, COMMITLOG_DIR, offset_to_name(file_start))
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            end = min(hi - file_start, file_size, len(buf))
            target = max(starts[-1] + step - file_start, max(lo, file_start) - file_start)
            while target < end:
                found = _start_at_or_after(buf, target, file_start, end)
                if found is None:
                    break
                starts.append(file_start + found)
                target = found + step
        file_start += file_size
        if file_start < hi and file_start - starts[-1] >= step:
            starts.append(file_start)
    return starts


def _is_blank(buf: Any, pos: int) -> bool:
    """True when the 8-byte prefix at `pos` is a blank's (the end of a file's data)."""
    prefix = peek_prefix(buf, pos)
    return prefix is not None and prefix[1] == BLANK_MAGIC


class LogReader:
    """Reads bounds planned on the driver: commitlog ranges and consume-queue ranges.

    Raises:
        rocketstore.errors.StoreLayoutError: (at open) files that do not fit the geometry.
    """

    def __init__(self, root: str, config: StoreConfig) -> None:
        from pathlib import Path

        from rocketstore.store.files import CommitLog

        self.root = Path(root)
        self.config = config
        self.commitlog: CommitLog = CommitLog(self.root, config.commitlog_file_size, read_only=True)
        self.commitlog.load()
        self._queues: list[ConsumeQueue] = []

    def scan(self, start: int, end: int) -> Iterator[StoredMessage]:
        """Records starting in physical offsets `[start, end)`; `start` is a record start."""
        return self.commitlog.scan(start, end)

    def scan_runs(self, start: int, end: int, run: int = 1024) -> Iterator[list[StoredMessage]]:
        """The records from `start` (a record start) to `end` in log order, in lists of up to `run`.

        Where the log's walk stops short of `end` at bytes that are not a whole record (damage), the
        walk goes on at the next record start after them (`_start_at_or_after`: a record magic, its own
        physical offset in its header), or at the next file's start, and the bytes passed over are
        logged: a damaged stretch costs the records in it, never the rest of the range.
        """
        stop = min(end, self.commitlog.max_offset)
        at = start
        while at < stop:
            reached = at
            records = self.commitlog.scan(at, end)
            while chunk := list(itertools.islice(records, run)):
                reached = chunk[-1].phy_offset + chunk[-1].size
                yield chunk
            at = self._resume_after(reached, stop)

    def _resume_after(self, reached: int, stop: int) -> int:
        """Where the walk that stopped at `reached` goes on (`stop` when nothing is left)."""
        file_size = self.config.commitlog_file_size
        file_start, written, buf = self.commitlog.readable_file(reached)
        if written < 0:
            return stop if reached >= stop else min(stop, reached - reached % file_size + file_size)
        pos = reached - file_start
        if pos >= written or _is_blank(buf, pos):
            return min(stop, file_start + file_size)  # the file's data ended: the next file's first record
        found = _start_at_or_after(buf, pos + 1, file_start, written)
        resume = file_start + file_size if found is None else file_start + found
        if resume < stop:  # bytes passed over (a torn record at the log's end is not)
            log.warning("%s: no whole record in the commitlog's bytes [%d, %d); the scan goes on after them",
                        self.root, reached, resume)
        return min(stop, resume)

    def consume_queue(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The loaded consume queue (topic, queue_id), unmapped by `close`."""
        from rocketstore.store.files import ConsumeQueue

        cq = ConsumeQueue(self.root, topic, queue_id, self.config.consume_queue_file_entries, read_only=True)
        cq.load()
        self._queues.append(cq)
        return cq

    def queue_runs(self, topic: str, queue_id: int, start: int, end: int) -> Iterator[list[StoredMessage]]:
        """Messages of queue offsets `[start, end)` (fillers and removed records skipped), in lists."""
        from rocketstore.store.files import ConsumeQueue, queue_runs

        cq = ConsumeQueue(self.root, topic, queue_id, self.config.consume_queue_file_entries, read_only=True)
        cq.load()
        self._queues.append(cq)
        return queue_runs(self.commitlog, cq, start, end)

    def queue_runs_tagged(self, topic: str, queue_id: int, start: int, end: int, codes: frozenset[int],
                          gap: int = 16) -> Iterator[list[StoredMessage]]:
        """`queue_runs` of only the entries whose tags code is in `codes`, found in the consume queue before
        any record is read; the entries between two such entries fewer than `gap` apart are read through
        (their rows are the caller's to drop)."""
        import numpy as np

        from rocketstore.store.files import ConsumeQueue, queue_runs

        cq = ConsumeQueue(self.root, topic, queue_id, self.config.consume_queue_file_entries, read_only=True)
        cq.load()
        self._queues.append(cq)
        wanted = np.array(sorted(codes), dtype=np.int64)
        lo, hi = max(start, cq.min_offset), min(end, cq.max_offset)
        while lo < hi:
            entries = np.frombuffer(cq.entry_bytes(lo, min(hi, lo + 65536)), dtype=_ENTRY)
            if len(entries) == 0:
                return
            hits = np.flatnonzero(np.isin(entries["tags"].astype(np.int64), wanted))
            if len(hits):
                breaks = np.flatnonzero(np.diff(hits) > gap)
                firsts = np.concatenate([hits[:1], hits[breaks + 1]])
                lasts = np.concatenate([hits[breaks], hits[-1:]])
                for a, b in zip(firsts.tolist(), lasts.tolist(), strict=True):
                    yield from queue_runs(self.commitlog, cq, lo + a, lo + b + 1)
            lo += len(entries)

    def close(self) -> None:
        """Unmap every file."""
        for cq in self._queues:
            cq.close()
        self.commitlog.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
