"""MappedFile: one fixed-size, memory-mapped file named by its 20-digit start offset.

Tracks a write position (end of valid data) and a flushed position. Creating a file sizes it at once
(sparse, zero-filled), as RocketMQ does; Java refuses to load files of any other size.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from rocketstore.errors import StoreLayoutError
from rocketstore.format.filenames import name_to_offset, offset_to_name
from rocketstore.storage import fs


class MappedFile:
    """A fixed-size file mapped in memory.

    Raises:
        StoreLayoutError: (at open) a name that is not an offset, or a size other than `file_size`.
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
        flags = os.O_RDONLY if read_only else os.O_RDWR | (os.O_CREAT if create else 0)
        self._fd = os.open(path, flags, 0o644)
        try:
            actual = os.fstat(self._fd).st_size
            if create and actual == 0 and not read_only:
                try:
                    fs.allocate(self._fd, file_size)
                except OSError:
                    os.close(self._fd)
                    self._fd = -1
                    path.unlink(missing_ok=True)  # an empty file would not load again
                    raise
                actual = file_size
            if actual != file_size:
                raise StoreLayoutError(
                    f"{path}: size {actual} differs from the configured file size {file_size}")
            access = mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE
            self.mm = mmap.mmap(self._fd, file_size, access=access)
        except BaseException:
            if self._fd >= 0:
                os.close(self._fd)
            raise
        self.wrote_position = 0
        self.flushed_position = 0

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
        end = pos + len(data)
        if end > self.file_size:
            raise ValueError(f"{self.path.name}: {len(data)} bytes do not fit at {pos}")
        fs.write_mapped(self.mm, pos, data, self._fd)
        self.wrote_position = end
        return pos

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
        fs.msync(self.mm, flushed, write)
        self.flushed_position = write
        return write

    def close(self) -> None:
        """Unmap and close (idempotent)."""
        if self._fd < 0:
            return
        try:
            self.mm.close()
        except BufferError:
            pass  # a reader still holds a view; the mapping is released with it
        os.close(self._fd)
        self._fd = -1

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        self.path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"
