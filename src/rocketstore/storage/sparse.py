"""Where a file holds data: the extents `lseek(SEEK_DATA / SEEK_HOLE)` reports.

RocketMQ pre-allocates commitlog files of 1 GiB as sparse files, so a recovery that must find the last
non-zero byte of such a file would otherwise read a gigabyte of zeros. Holes read as zeros by
definition; only the data extents need to be read. Where the file system cannot answer (no SEEK_DATA,
or an error), the whole range is one extent, which is always correct.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterator
from pathlib import Path

_ZERO_CHUNK = 1 << 20
_ZEROS = bytes(_ZERO_CHUNK)


def data_extents(path: Path, start: int, end: int) -> Iterator[tuple[int, int]]:
    """The ranges [lo, hi) within [start, end) of `path` that may hold non-zero bytes, ascending."""
    seek_data = getattr(os, "SEEK_DATA", None)
    seek_hole = getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None or start >= end:
        if start < end:
            yield start, end
        return
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        yield start, end
        return
    try:
        pos = start
        while pos < end:
            try:
                lo = os.lseek(fd, pos, seek_data)
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no data at or after pos
                    yield pos, end
                return
            if lo >= end:
                return
            hi = min(end, os.lseek(fd, lo, seek_hole))
            yield lo, hi
            pos = hi
    finally:
        os.close(fd)


def last_nonzero(path: Path, mm: mmap.mmap, start: int, end: int) -> int:
    """One past the last non-zero byte of [start, end) of the file `path` mapped as `mm` (`start` if
    none), reading only its data extents, from the end back."""
    for lo, hi in reversed(list(data_extents(path, start, end))):
        stop = hi
        while stop > lo:
            chunk_start = max(lo, stop - _ZERO_CHUNK)
            chunk = mm[chunk_start:stop]
            if chunk != _ZEROS[:stop - chunk_start]:
                return chunk_start + len(chunk.rstrip(b"\0"))
            stop = chunk_start
    return start
