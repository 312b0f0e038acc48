"""MappedFile: one fixed-size, memory-mapped file named by its 20-digit start offset.

Tracks a write position (end of valid data) and a flushed position. Creating a file sizes it at once
(sparse, zero-filled), as RocketMQ does; Java refuses to load files of any other size. The mapping is
made when the file is first touched and may be let go again (storage/mapping_budget.py).
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING

from rocketstore.errors import StoreClosedError, StoreLayoutError
from rocketstore.format.filenames import name_to_offset, offset_to_name
from rocketstore.native import speedups
from rocketstore.storage import fs
from rocketstore.storage.mapping_budget import BUDGET, map_file, with_descriptors


class MappedFileState:
    """The hot state of a MappedFile, the fields the compiled kernels read and write: the mapping (None
    while unmapped), the write position, the size, the start offset and the mapping budget's clock bit.
    The pure-Python twin of rocketstore._speedups.MappedFileState, which has the same slots."""

    __slots__ = ("_mm", "wrote_position", "file_size", "file_from_offset", "touched")
    _mm: mmap.mmap | None
    wrote_position: int
    file_size: int
    file_from_offset: int
    touched: bool


if TYPE_CHECKING:
    _MappedFileBase = MappedFileState  # the compiled base has the same fields
else:
    _MappedFileBase = MappedFileState if speedups is None else speedups.MappedFileState


class MappedFile(_MappedFileBase):
    """A fixed-size file, mapped in memory when first touched (`mm`).

    No descriptor stays open for the file itself: the mapping holds one, and the process's
    `mapping_budget.BUDGET` lets the least recently touched mappings go when too many are held. The
    file being appended to keeps a descriptor for large writes (`append`) until it is full.

    Raises:
        StoreLayoutError: (at open) a name that is not an offset, or a size other than `file_size`.
        StoreResourceError: the process has no file descriptor left.
        OSError: the file cannot be created or mapped.
    """

    def __init__(self, path: Path, file_size: int, *, create: bool = False, read_only: bool = False) -> None:
        offset = name_to_offset(path.name)
        if offset is None:
            raise StoreLayoutError(f"{path}: file name is not a 20-digit offset")
        self.path = path
        self.file_size = file_size
        self.file_from_offset = offset
        self.read_only = read_only
        self.touched = False
        self._mm: mmap.mmap | None = None
        self._wfd = -1  # for large appends; opened by the first one
        self._closed = False
        if create and not read_only:
            actual = self._create()
        else:
            actual = with_descriptors("read", path, lambda: os.stat(path)).st_size
        if actual != file_size:
            raise StoreLayoutError(f"{path}: size {actual} differs from the configured file size {file_size}")
        self.wrote_position = 0
        self.flushed_position = 0

    def _create(self) -> int:
        """Create the file whole (or size a file left empty by a crash); returns its size."""
        path = self.path
        return with_descriptors("create", path, lambda: fs.create_sized(path, self.file_size))

    @property
    def mm(self) -> mmap.mmap:
        """The file's mapping (mapped now if it was not).

        Raises:
            StoreClosedError: the file was closed.
            StoreResourceError: no file descriptor left to map it.
        """
        mm = self._mm
        if mm is None:
            mm = self._map()
        self.touched = True
        return mm

    def mapped_now(self) -> mmap.mmap | None:
        """The file's mapping when it is mapped now (its clock bit set), None when it is not: for a reader
        that declines rather than map a file (`log.entry_run.get_run_py`)."""
        mm = self._mm
        if mm is not None:
            self.touched = True
        return mm

    def _map(self) -> mmap.mmap:
        if self._closed:
            raise StoreClosedError(f"{self.path} is closed")
        mm = map_file(self.path, self.file_size, read_only=self.read_only)
        self._mm = mm
        self.touched = True
        BUDGET.admit(self)
        return mm

    def populate(self, start: int, end: int) -> bool:
        """`fs.populate` of positions [start, end) of the file's mapping, when it is mapped (a hint: a
        file is never mapped for it); False when nothing was done."""
        mm = self._mm
        return mm is not None and fs.populate(mm, start, end)

    def pin(self) -> None:
        """Map the file and keep the mapping until `close` (a file about to be deleted)."""
        if self.mm is not None:
            BUDGET.release(self)

    def unmap(self) -> None:
        """Let the mapping go (it is unmapped when no reader holds it any more); the next touch maps
        the file again."""
        self._mm = None

    @classmethod
    def create(cls, directory: Path, file_from_offset: int, file_size: int) -> MappedFile:
        """Create (or reopen an empty) file starting at `file_from_offset`.

        Raises:
            OSError: the file cannot be created.
        """
        return cls(directory / offset_to_name(file_from_offset), file_size, create=True)

    @property
    def end_offset(self) -> int:
        """Global offset one past the last byte of this file."""
        return self.file_from_offset + self.file_size

    @property
    def remaining(self) -> int:
        """Bytes left after the write position."""
        return self.file_size - self.wrote_position

    @property
    def full(self) -> bool:
        """True when the write position reached the end of the file."""
        return self.wrote_position >= self.file_size

    def append(self, data: bytes | bytearray) -> int:
        """Write `data` at the write position and advance it; returns the position written at.

        Raises:
            ValueError: data does not fit (callers check `remaining` first).
        """
        pos = self.wrote_position
        size = len(data)
        end = pos + size
        if end > self.file_size:
            raise ValueError(f"{self.path.name}: {size} bytes do not fit at {pos}")
        if size < fs.PWRITE_MIN:  # the usual: a record or a queue entry, through the mapping
            fs.write_mapped(self.mm, pos, data)
        else:
            fs.write_mapped(self.mm, pos, data, self._append_fd(size))
        self.wrote_position = end
        if end == self.file_size and self._wfd >= 0:
            os.close(self._wfd)  # a full file takes no more appends
            self._wfd = -1
        return pos

    def _append_fd(self, size: int) -> int:
        """The descriptor `fs.write_mapped` writes `size` bytes through (-1: through the mapping)."""
        if self._wfd < 0 and size >= fs.PWRITE_MIN:
            path = self.path
            self._wfd = with_descriptors("open", path, lambda: os.open(path, os.O_RDWR))
        return self._wfd

    def write_at(self, pos: int, data: bytes) -> None:
        """Write `data` at `pos` without moving the write position.

        Raises:
            OSError: the write failed (fault injection).
        """
        fs.write_mapped(self.mm, pos, data)

    def read(self, pos: int, size: int) -> bytes:
        """`size` bytes from `pos` (fewer at the end of the file)."""
        return self.mm[pos:pos + size]

    def flush(self, least_pages: int = 0) -> int:
        """Force written bytes to disk when at least `least_pages` pages are dirty (0: any).

        A flush thread runs this without the store lock, beside the writer and beside retention deleting
        the file: the mapping stays pinned while the disk works (a close meanwhile lets it go when the
        sync is done), and a file closed before has nothing left to flush.

        Returns:
            the flushed position afterwards.

        Raises:
            OSError: the disk did not accept the bytes.
        """
        write, flushed = self.wrote_position, self.flushed_position
        if write <= flushed:
            return flushed
        if least_pages > 0 and not self.full:
            dirty_pages = write // fs.PAGE_SIZE - flushed // fs.PAGE_SIZE
            if dirty_pages < least_pages:
                return flushed
        try:
            mm = self.mm
            pinned = memoryview(mm)
        except (StoreClosedError, ValueError):  # closed meanwhile (deleted): nothing left to flush
            return flushed
        with pinned:
            fs.msync(mm, flushed, write)
        if write > self.flushed_position:  # another flush may have gone further meanwhile
            self.flushed_position = write
        return self.flushed_position

    def close(self) -> None:
        """Unmap and close (idempotent)."""
        self._closed = True
        BUDGET.release(self)
        mm, self._mm = self._mm, None
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # a reader still holds a view; the mapping is released with it
        if self._wfd >= 0:
            os.close(self._wfd)
            self._wfd = -1

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"
