"""Every call that writes bytes, reserves space, forces bytes to disk or replaces a file goes through
here: the fault-injection seam.

Tests patch `write_mapped`, `allocate`, `fsync_fd`, `msync` or `write_file` to raise
OSError(EIO/ENOSPC) and check that the store turns read-only without losing what it acknowledged.
`disk_used_ratio` is the seam for retention's disk-space rule.
"""

from __future__ import annotations

import errno
import mmap
import os
import shutil
from pathlib import Path

from rocketstore.native import speedups

PAGE_SIZE = mmap.PAGESIZE
_native_msync = None if speedups is None else speedups.msync
_native_populate = None if speedups is None else getattr(speedups, "populate", None)  # None while a build runs


PWRITE_MIN = 16 * 1024
"""From this many bytes on, `write_mapped` given the file's descriptor writes through the file."""


def write_mapped(mm: mmap.mmap, pos: int, data: bytes | bytearray, fd: int = -1) -> None:
    """Copy `data` into a shared mapping at `pos` (the page cache; `msync` makes it durable).

    With the mapped file's descriptor `fd` (the mapping starting at its byte 0) and at least
    PWRITE_MIN bytes, the bytes go in by pwrite instead: into the same page cache, which the mapping
    shows at once, but without a page fault and a zero-filled page for each page the first write
    through the mapping touches (1 KiB batches: 1.10x, docs/benchmarks.md). The store's files have
    their blocks reserved (`allocate`), so neither way can meet a full disk.

    Raises:
        OSError: the file refused the bytes (EIO); tests inject EIO/ENOSPC here.
    """
    if fd < 0 or len(data) < PWRITE_MIN:
        mm[pos:pos + len(data)] = data
        return
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, pos)
        if written <= 0:
            raise OSError(errno.EIO, f"pwrite at {pos} wrote nothing")
        view = view[written:]
        pos += written


def allocate(fd: int, size: int) -> None:
    """Size a new file to `size` bytes and reserve its blocks, so that later writes through a mapping
    cannot hit a full disk (which a mapping reports as SIGBUS, killing the process).

    Raises:
        OSError: ENOSPC when the disk cannot hold the file; EIO.
    """
    os.ftruncate(fd, size)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise  # a file system without fallocate keeps the sparse file


def disk_used_ratio(path: Path) -> float:
    """Used share of the file system holding `path`, as RocketMQ computes it (ceil to 1 %).

    Raises:
        OSError: the path cannot be measured.
    """
    st = os.statvfs(path)
    total = st.f_blocks * st.f_frsize
    if total <= 0:
        return 0.0
    used = total - st.f_bfree * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    return -(-used * 100 // max(1, used + usable)) / 100


def fsync_fd(fd: int) -> None:
    """Force a file's data to disk.

    Raises:
        OSError: the disk did not accept it.
    """
    os.fsync(fd)


def msync(mm: mmap.mmap, start: int, end: int) -> None:
    """Force bytes [start, end) of a shared mapping to disk (start is rounded down to a page).

    The compiled msync lets other threads run while the disk works (`mmap.flush` keeps the interpreter
    lock): with a sync of the group commit under way, producers go on writing the next records.

    Raises:
        OSError: the disk did not accept it.
    """
    if end <= start:
        return
    aligned = start - start % PAGE_SIZE
    if _native_msync is not None:
        _native_msync(mm, aligned, end - aligned)
    else:
        mm.flush(aligned, end - aligned)


def populate(mm: mmap.mmap, start: int, end: int) -> bool:
    """Take now the page faults (and zero-filled pages) that the first writes into bytes [start, end) of
    a shared mapping would take: MADV_POPULATE_WRITE, run by the compiled module without the interpreter
    lock, so that a background thread pays them on another core instead of the writer. Writes no byte of
    data. A hint only: False when it was not done (no compiled module; a kernel before Linux 5.14).
    """
    if _native_populate is None or end <= start:
        return False
    return bool(_native_populate(mm, start, end - start))


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
