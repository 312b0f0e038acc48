"""Read-only access to store files for the reports."""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

_ZERO_CHUNK = 1 << 20


@contextmanager
def mapped(path: Path) -> Iterator[Any]:
    """The file's bytes, mapped read-only (an empty bytes object for an empty file).

    Raises:
        OSError: the file cannot be opened.
    """
    with open(path, "rb") as fh:
        if path.stat().st_size == 0:
            yield b""
            return
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            yield mm


def first_nonzero(buf: Any, start: int) -> int | None:
    """Position of the first non-zero byte of `buf` at or after `start`, None when all are zero."""
    for chunk_start in range(start, len(buf), _ZERO_CHUNK):
        chunk = bytes(buf[chunk_start:chunk_start + _ZERO_CHUNK])
        stripped = chunk.lstrip(b"\0")
        if stripped:
            return chunk_start + len(chunk) - len(stripped)
    return None
