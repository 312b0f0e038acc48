"""Every call that forces bytes to disk or replaces a file goes through here: the fault-injection seam.

Tests patch `fsync_fd`, `msync` or `write_file` to raise OSError(EIO/ENOSPC) and check that the store
turns read-only without losing what it acknowledged.
"""

from __future__ import annotations

import mmap
import os
import shutil
from pathlib import Path

PAGE_SIZE = mmap.PAGESIZE


def fsync_fd(fd: int) -> None:
    """Force a file's data to disk.

    Raises:
        OSError: the disk did not accept it.
    """
    os.fsync(fd)


def msync(mm: mmap.mmap, start: int, end: int) -> None:
    """Force bytes [start, end) of a shared mapping to disk (start is rounded down to a page).

    Raises:
        OSError: the disk did not accept it.
    """
    if end <= start:
        return
    aligned = start - start % PAGE_SIZE
    mm.flush(aligned, end - aligned)


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (new, renamed or deleted files) durable.

    Raises:
        OSError: the disk did not accept it.
    """
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fsync_fd(fd)
    finally:
        os.close(fd)


def write_file(path: Path, data: bytes) -> None:
    """Write `data` to `path` (replacing it) and force it to disk.

    Raises:
        OSError: the write or the flush failed.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        fsync_fd(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, keep_backup: bool = True) -> None:
    """Replace `path` atomically, as RocketMQ persists its JSON files: write `<f>.tmp`, copy the old
    content to `<f>.bak`, rename `.tmp` over `<f>`.

    Raises:
        OSError: any step failed; the old file is then still in place.
    """
    tmp = path.with_name(path.name + ".tmp")
    write_file(tmp, data)
    if keep_backup and path.exists():
        backup = path.with_name(path.name + ".bak")
        shutil.copyfile(path, backup)
    os.replace(tmp, path)
    fsync_dir(path.parent)
