"""Where the whole records of a commitlog file lie, found by their 8-byte prefixes (TOTALSIZE, MAGICCODE)
and their own physical offset, without decoding them: the walk of a log-order read (`scan.direct`) and of
a read-only open's end (`services.recovery.find_end`).

`record_spans` is the compiled `rocketstore._speedups.record_spans` when it was built, else
`record_spans_py`, its twin and reference (tests/adversarial/test_kernel_twins.py holds them equal).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, MutableSequence

from rocketstore._types import Buffer
from rocketstore.format.message import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    PHY_OFFSET_POS,
    PREFIX,
    PREFIX_SIZE,
)
from rocketstore.native import speedups

SPANS_END, SPANS_FULL, SPANS_BLANK, SPANS_NOT_TAKEN = 0, 1, 2, 3
"""What stopped `record_spans`: the limit; a full batch; a blank (the file's data ends); a prefix that is
no record's, a record past the written bytes or one that is not at its own physical offset."""

_PHY_OFFSET = struct.Struct(">q")


def record_spans_py(data: Buffer, pos: int, limit: int, written: int, file_start: int, max_rows: int,
                    max_bytes: int, starts: MutableSequence[int], ends: MutableSequence[int]) -> tuple[int, int, int]:
    """From `pos` (a record start) towards `limit`, the whole records of `data` (the bytes of the
    commitlog file starting at physical offset `file_start`, written up to `written`) by their prefixes
    and own physical offsets: their starts and ends written into the int64 sequences `starts` and `ends`;
    (how many, where the walk stopped, why: a `SPANS_*` value). A batch is full at `max_rows` records or
    `max_bytes` record bytes.

    Raises:
        ValueError: positions outside `0 <= pos <= limit <= written <= len(data)`, or `max_rows` or
            `max_bytes` below 1, or `max_rows` above what the sequences hold.
    """
    if not 0 <= pos <= limit <= written <= len(data) or max_rows < 1 or max_bytes < 1 \
            or max_rows > min(len(starts), len(ends)):
        raise ValueError("record_spans: positions outside the data or buffers too small")
    count = held = 0
    while pos < limit:
        if pos + PREFIX_SIZE > written:
            return count, pos, SPANS_NOT_TAKEN
        total, magic = PREFIX.unpack_from(data, pos)
        if magic == BLANK_MAGIC:
            return count, pos, SPANS_BLANK
        if (magic != MAGIC_V1 and magic != MAGIC_V2) or total < MIN_RECORD_SIZE or total > written - pos \
                or _PHY_OFFSET.unpack_from(data, pos + PHY_OFFSET_POS)[0] != file_start + pos:
            return count, pos, SPANS_NOT_TAKEN
        starts[count] = pos
        pos += total
        ends[count] = pos
        held += total
        count += 1
        if count >= max_rows or held >= max_bytes:
            return count, pos, SPANS_FULL if pos < limit else SPANS_END
    return count, pos, SPANS_END


record_spans: Callable[..., tuple[int, int, int]] = (
    record_spans_py if speedups is None else getattr(speedups, "record_spans", record_spans_py))
"""`record_spans_py`, compiled when the module was built (Any buffers: int64 arrays, `array('q')`)."""

__all__ = ["SPANS_BLANK", "SPANS_END", "SPANS_FULL", "SPANS_NOT_TAKEN", "record_spans", "record_spans_py"]
