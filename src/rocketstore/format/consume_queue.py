"""ConsumeQueue unit: one fixed-size entry per message of a (topic, queue_id).

    pos  len  field                       meaning
    0    8    commitlog physical offset   int64
    8    4    message size                int32, bytes
    12   8    tags hash code              int64, or delivery time for SCHEDULE_TOPIC_XXXX

An entry is valid when offset >= 0 and size > 0; an all-zero entry marks the end of written data.
Filler entries (offset 0, size 0x7FFFFFFF, tags 0) pad a queue whose first file starts mid-file.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any, NamedTuple

from rocketstore._types import Buffer
from rocketstore.format.layout import JAVA_INT_MAX, JAVA_LONG_MAX, JAVA_LONG_MIN, Field, Layout
from rocketstore.format.optional_numpy import numpy_or_none
from rocketstore.native import speedups

# The walks below over a file's entries: the compiled kernel where the module was built, else numpy's
# array operations when numpy is installed, else the pure-Python twin; a bound past int64 (which the
# kernel declines) goes to the twin.
_queue_scan: Callable[[Buffer, int], tuple[int, int, tuple[int, int, int] | None] | None] | None = (
    None if speedups is None else speedups.queue_scan)
_queue_first_at_or_after: Callable[[Buffer, int, int], int | None] | None = (
    None if speedups is None else speedups.queue_first_at_or_after)
_queue_kept_prefix: Callable[[Buffer, int], tuple[int, int | None] | None] | None = (
    None if speedups is None else speedups.queue_kept_prefix)

UNIT_LAYOUT = Layout("consume queue unit", (
    Field("commitlog physical offset", "q", "int64"),
    Field("message size", "i", "int32, bytes"),
    Field("tags hash code", "q", "int64, or delivery time for SCHEDULE_TOPIC_XXXX"),
))
UNIT = UNIT_LAYOUT.codec
UNIT_SIZE = UNIT.size  # 20
FILLER_SIZE = JAVA_INT_MAX
_UNIT_DTYPE = [("phy", ">i8"), ("size", ">i4"), ("code", ">i8")]  # UNIT, for numpy


class CqUnit(NamedTuple):
    """One consume-queue entry."""

    phy_offset: int
    size: int
    tags_code: int

    @property
    def valid(self) -> bool:
        """RocketMQ's validity rule: offset >= 0 and size > 0 (fillers count as valid)."""
        return self.phy_offset >= 0 and self.size > 0

    @property
    def filler(self) -> bool:
        """A pre-fill entry standing for a message that is not in this store."""
        return self.phy_offset == 0 and self.size == FILLER_SIZE and self.tags_code == 0


FILLER = CqUnit(0, FILLER_SIZE, 0)


def pack_unit(phy_offset: int, size: int, tags_code: int) -> bytes:
    """The 20 bytes of one entry."""
    return UNIT.pack(phy_offset, size, tags_code)


def unpack_unit(buf: Buffer, pos: int = 0) -> CqUnit:
    """The entry at byte `pos`.

    Raises:
        struct.error: never for a buffer holding 20 bytes at pos (callers check bounds).
    """
    return CqUnit._make(UNIT.unpack_from(buf, pos))


_new_unit = partial(tuple.__new__, CqUnit)  # CqUnit from a 3-tuple without a Python-level call


def iter_written_units(buf: Buffer) -> Iterator[CqUnit]:
    """The entries of `buf` up to the first invalid one (the end of the written data), lazily, so a
    mostly empty file costs nothing."""
    data = bytes(buf)
    whole = len(data) - len(data) % UNIT_SIZE
    for values in UNIT.iter_unpack(data[:whole]):
        if values[0] < 0 or values[1] <= 0:
            return
        yield _new_unit(values)


def kept_prefix_py(buf: Buffer, phy_end: int) -> tuple[int, int | None]:
    """How many entries of `buf` a read-only open keeps: those up to the first invalid one, or the first
    non-filler whose record does not end by `phy_end`; and the end (phy + size) of the last one kept,
    None when none is kept. The twin of `kept_prefix`'s numpy path."""
    kept, last_end = 0, None
    for unit in iter_written_units(buf):
        if unit.phy_offset + unit.size > phy_end and not unit.filler:
            break
        kept += 1
        last_end = unit.phy_offset + unit.size
    return kept, last_end


def kept_prefix(buf: Buffer, phy_end: int) -> tuple[int, int | None]:
    """`kept_prefix_py` over a whole file in one compiled call, or at once with numpy (the planning of
    a Spark read opens stores read-only, and a walk in Python over the last files of every queue cost
    seconds at millions of entries)."""
    if _queue_kept_prefix is not None:
        kept_end = _queue_kept_prefix(buf, phy_end)
        if kept_end is not None:
            return kept_end
    np = _numpy_for(phy_end)
    if np is None:
        return kept_prefix_py(buf, phy_end)
    units = np.frombuffer(buf, dtype=_UNIT_DTYPE, count=len(buf) // UNIT_SIZE)
    phy, size, code = units["phy"].astype(np.int64), units["size"].astype(np.int64), units["code"]
    filler = (phy == 0) & (size == FILLER_SIZE) & (code == 0)
    valid = (phy >= 0) & (size > 0)
    # phy + size as uint64: an offset near 2**63 plus a size would wrap past int64
    ends_by = (phy.astype(np.uint64) + size.astype(np.uint64) <= phy_end) if phy_end >= 0 else np.zeros_like(valid)
    refused = np.flatnonzero(~(valid & (ends_by | filler)))
    kept = int(refused[0]) if len(refused) else len(units)
    return kept, (int(phy[kept - 1]) + int(size[kept - 1]) if kept else None)


def _numpy_for(bound: int) -> Any:
    """numpy for a walk against `bound`, None when it is not installed or the bound is past int64."""
    return numpy_or_none() if JAVA_LONG_MIN <= bound <= JAVA_LONG_MAX else None


def first_at_or_after_py(buf: Buffer, min_phy_offset: int) -> int | None:
    """Index of the first entry of `buf` that is valid, no filler, and points at or after
    `min_phy_offset`; None when none does. The twin of `first_at_or_after`'s numpy path."""
    for i, unit in enumerate(iter_units(buf)):
        if unit.valid and unit.phy_offset >= min_phy_offset and not unit.filler:
            return i
    return None


def first_at_or_after(buf: Buffer, min_phy_offset: int, end: int | None = None) -> int | None:
    """`first_at_or_after_py` over the buffer's first `end` bytes (None: all of them), in one compiled
    call, or at once with numpy (every open corrects each queue's min offset over its first file)."""
    if _queue_first_at_or_after is not None:
        found_at = _queue_first_at_or_after(buf, min_phy_offset, len(buf) if end is None else end)
        if found_at is not None:
            return found_at if found_at >= 0 else None
    if end is not None:
        buf = bytes(memoryview(buf)[:end])
    np = _numpy_for(min_phy_offset)
    if np is None:
        return first_at_or_after_py(buf, min_phy_offset)
    units = np.frombuffer(buf, dtype=_UNIT_DTYPE, count=len(buf) // UNIT_SIZE)
    phy, size, code = units["phy"], units["size"], units["code"]
    filler = (phy == 0) & (size == FILLER_SIZE) & (code == 0)
    found = np.flatnonzero((phy >= 0) & (size > 0) & (phy >= min_phy_offset) & ~filler)
    return int(found[0]) if len(found) else None


def iter_units(buf: Buffer) -> list[CqUnit]:
    """Every whole entry of `buf` in order (a trailing partial entry is ignored)."""
    whole = len(buf) - len(buf) % UNIT_SIZE
    return list(map(_new_unit, UNIT.iter_unpack(memoryview(buf)[:whole])))


class EntryScan(NamedTuple):
    """What `scan_entries` found in a run of entries."""

    written: int
    """Entries before the end of the written data."""
    last_phy: int
    """The phy offset the last written non-filler entry points at (the `after_phy` given if none)."""
    problem: str | None
    """Why the entries do not look like a consume queue's, None when they do."""


def scan_entries_py(buf: Buffer, after_phy: int = -1, zero_from: Callable[[int], bool] | None = None) -> EntryScan:
    """Check that `buf` holds what a consume queue writes: fillers, then entries pointing at strictly
    increasing log offsets (a queue's records follow one another in the log), then only zeros. A filler
    among the entries is a hole a rebuild left where the log holds no record for that queue offset.

    An invalid last entry followed only by zeros is a torn write (an entry crossing a page boundary
    half on disk after a power cut): it ends the written data and is no problem. `after_phy` is the
    offset the entry before `buf` pointed at. `zero_from(pos)` answers whether every byte of `buf`
    from `pos` on is zero (a caller holding a sparse file can answer without reading its holes).
    """
    view = memoryview(buf)
    whole = len(view) - len(view) % UNIT_SIZE
    if zero_from is None:
        def zero_from(pos: int) -> bool:
            rest = view[pos:]
            return bytes(rest).count(0) == len(rest)
    last = after_phy
    n = 0
    for chunk_start in range(0, whole, _SCAN_CHUNK):
        for phy, size, tags in UNIT.iter_unpack(view[chunk_start:min(whole, chunk_start + _SCAN_CHUNK)]):
            if phy == 0 and size == FILLER_SIZE and tags == 0:
                pass
            elif phy >= 0 and size > 0 and phy > last:
                last = phy
            else:
                return _entries_end(n, last, phy, size, tags, zero_from)
            n += 1
    return EntryScan(n, last, None)


_SCAN_CHUNK = UNIT_SIZE * 3276  # ~64 KiB of entries at a time


def scan_entries(buf: Buffer, after_phy: int = -1, zero_from: Callable[[int], bool] | None = None) -> EntryScan:
    """`scan_entries_py` over the whole buffer in one compiled call, or at once with numpy (recovery
    checks every entry of every queue's files from the checkpoint on: 10 M entries took 2.3 s entry by
    entry in Python)."""
    if _queue_scan is not None:
        scanned = _queue_scan(buf, after_phy)
        if scanned is not None:
            written, last, stop = scanned
            if stop is None:
                return EntryScan(written, last, None)
            return _entries_end(written, last, *stop,
                                zero_from if zero_from is not None else _zero_from_bytes(memoryview(buf)))
    np = _numpy_for(after_phy)
    if np is None:
        return scan_entries_py(buf, after_phy, zero_from)
    units = np.frombuffer(buf, dtype=_UNIT_DTYPE, count=len(buf) // UNIT_SIZE)
    phy, size, code = units["phy"], units["size"], units["code"]
    filler = (phy == 0) & (size == FILLER_SIZE) & (code == 0)
    entry = (phy >= 0) & (size > 0) & ~filler
    # the phy of the entry before each position (after_phy before the first), as `last` of the walk
    last_index = np.maximum.accumulate(np.where(entry, np.arange(len(units)), -1))
    before = np.concatenate(([-1], last_index[:-1])) if len(units) else last_index
    last_before = np.where(before >= 0, phy[np.maximum(before, 0)], after_phy)
    entry_refused = entry & (phy <= last_before)  # not after the entry before it
    stops = np.flatnonzero(~(filler | entry) | entry_refused)
    if not len(stops):
        newest = int(last_index[-1]) if len(units) else -1
        return EntryScan(len(units), int(phy[newest]) if newest >= 0 else after_phy, None)
    n = int(stops[0])
    last = int(last_before[n])
    return _entries_end(n, last, int(phy[n]), int(size[n]), int(code[n]),
                        zero_from if zero_from is not None else _zero_from_bytes(memoryview(buf)))


def _zero_from_bytes(view: memoryview) -> Callable[[int], bool]:
    def zero_from(pos: int) -> bool:
        rest = view[pos:]
        return bytes(rest).count(0) == len(rest)
    return zero_from


def _entries_end(n: int, last: int, phy: int, size: int, tags: int, zero_from: Callable[[int], bool]) -> EntryScan:
    """The scan's answer at entry `n`, which is not a next entry: the end, a torn end, or damage."""
    if phy == 0 and size == 0 and tags == 0:
        if zero_from(n * UNIT_SIZE):
            return EntryScan(n, last, None)
        return EntryScan(n, last, f"entry {n}: a hole (an all-zero entry) with entries after it")
    if (phy < 0 or size <= 0) and zero_from((n + 1) * UNIT_SIZE):
        return EntryScan(n, last, None)  # a torn last entry
    if phy < 0 or size <= 0:
        return EntryScan(n, last, f"entry {n}: invalid (offset {phy}, size {size}) with entries after it")
    return EntryScan(n, last, f"entry {n}: points at {phy}, not after {last}")
