"""Damage for the crash tests: disk faults through the storage/fs.py seam, and bytes cut or flipped."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketstore.storage import fs

SEAM = ("write_mapped", "allocate", "msync", "fsync_fd", "write_file")


class DiskFaults:
    """Counts the calls through the fs seam and fails the `nth` call of one function.

    With `torn_keep` = k, a failing `write_mapped` first writes k of its bytes (a torn write; a negative
    k keeps all but the last -k).
    """

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[str] = []
        self.target: tuple[str, int] | None = None
        self.code = errno.EIO
        self.torn_keep: int | None = None
        self.fired = False
        for name in SEAM:
            monkeypatch.setattr(fs, name, self._wrap(name, getattr(fs, name)))

    def fail(self, name: str, nth: int, code: int = errno.EIO, *, torn_keep: int | None = None) -> None:
        """Fail call number `nth` (0-based, counted from now) of seam function `name`."""
        self.counts = {n: 0 for n in SEAM}
        self.target = (name, nth)
        self.code = code
        self.torn_keep = torn_keep

    def _wrap(self, name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def seam(*args: Any) -> Any:
            self.calls.append(name)
            if self.target is not None and self.target[0] == name and not self.fired:
                n = self.counts[name]
                self.counts[name] = n + 1
                if n == self.target[1]:
                    self.fired = True
                    if name == "write_mapped" and self.torn_keep is not None:
                        mm, pos, data, *fd = args
                        real(mm, pos, data[:self.torn_keep], *fd)
                    raise OSError(self.code, os.strerror(self.code))
            return real(*args)
        return seam


def commitlog_files(root: Path) -> list[Path]:
    """The commitlog files of a store, oldest first."""
    return sorted((root / "commitlog").iterdir())


def cut_at(path: Path, pos: int, fill: bytes = b"\0") -> None:
    """A torn tail: every byte of the file from `pos` on replaced by `fill` (the size is kept, as a
    pre-allocated mapped file's)."""
    data = bytearray(path.read_bytes())
    size = len(data) - pos
    data[pos:] = (fill * (size // max(1, len(fill)) + 1))[:size]
    path.write_bytes(bytes(data))


def flip_bit(path: Path, pos: int, bit: int) -> None:
    """Invert one bit of the file."""
    data = bytearray(path.read_bytes())
    data[pos] ^= 1 << bit
    path.write_bytes(bytes(data))


def make_abort(root: Path) -> None:
    """Mark the store as not closed cleanly (the abort file of a crashed run)."""
    (root / "abort").touch()
