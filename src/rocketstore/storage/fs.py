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
import tempfile
from pathlib import Path

from rocketstore.format.store_dirs import STAGING_PREFIX, staging_dir
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


def create_sized(path: Path, size: int, *, reserve: bool = True) -> int:
    """Create the store file `path` at `size` bytes, with its blocks reserved (`allocate`) unless not
    `reserve` (then sparse, as RocketMQ leaves index files); the size of the file under that name
    afterwards (of the file that was there, when it was not empty).

    The file appears under its name only once it is whole: it is made and sized in the store's root
    (`store_dirs.staging_dir`, a `.creating-` name), then linked in. A reader beside the writer (another
    process running `verify`, a read-only open, a Spark job) never lists a store file shorter than its
    geometry, and a refused allocation leaves nothing behind; a crash can leave a `.creating-` file in
    the root, which the next writable open removes (`remove_staged`). Where the root is on another file
    system than the file, the file is created under its name and sized in place, as RocketMQ does. A
    file left empty under its name (a crash there) is sized in place; one of any other size is left as
    it is, for the caller to refuse.

    Raises:
        OSError: the directory refused the file or the disk its blocks (ENOSPC); nothing is left.
    """
    try:
        actual = os.stat(path).st_size
    except FileNotFoundError:
        linked = _create_staged(path, size, reserve)
        if linked is not None:
            return linked
    else:
        if actual != 0:
            return actual
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        actual = os.fstat(fd).st_size
        if actual == 0:
            try:
                _size(fd, size, reserve)
            except OSError:
                path.unlink(missing_ok=True)  # an empty file would not load again
                raise
            actual = size
        return actual
    finally:
        os.close(fd)


def remove_staged(root: Path) -> list[str]:
    """Remove the files a crash left half made in `root` (`create_sized`); their names."""
    removed = []
    for entry in os.scandir(root):
        if entry.name.startswith(STAGING_PREFIX) and entry.is_file(follow_symlinks=False):
            os.unlink(entry.path)
            removed.append(entry.name)
    return removed


def _size(fd: int, size: int, reserve: bool) -> None:
    if reserve:
        allocate(fd, size)
    else:
        os.ftruncate(fd, size)


def _create_staged(path: Path, size: int, reserve: bool) -> int | None:
    """`create_sized` through a staged file linked in once sized; None when it cannot be linked across."""
    fd, staged = tempfile.mkstemp(prefix=STAGING_PREFIX, dir=staging_dir(path))
    try:
        os.fchmod(fd, 0o644)
        _size(fd, size, reserve)
        try:
            os.link(staged, path)
        except FileExistsError:
            return os.stat(path).st_size  # made meanwhile: that one stands
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            return None
        return size
    finally:
        os.close(fd)
        os.unlink(staged)


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
