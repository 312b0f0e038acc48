"""MappedFileQueue: the ordered files of one log (commitlog or one consume queue), addressed by
global offset. File i covers [from_i, from_i + file_size); consecutive files differ by file_size.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rocketstore.errors import StoreLayoutError
from rocketstore.format.filenames import name_to_offset
from rocketstore.native import speedups
from rocketstore.storage import fs
from rocketstore.storage.mapped_file import MappedFile


def _make_durable_dirs(directory: Path) -> None:
    """Create `directory` and its missing parents, each made durable in its parent.

    Raises:
        OSError: a directory cannot be created or synced.
    """
    missing: list[Path] = []
    current = directory
    while not current.is_dir():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True)
        fs.fsync_dir(path.parent)


class FileQueueState:
    """The files of a MappedFileQueue, oldest first, as the compiled kernels read them: the pure-Python
    twin of rocketstore._speedups.FileQueueState, which has the same slot."""

    __slots__ = ("files",)
    files: list[MappedFile]


if TYPE_CHECKING:
    _FileQueueBase = FileQueueState  # the compiled base has the same field
else:
    _FileQueueBase = FileQueueState if speedups is None else speedups.FileQueueState


class MappedFileQueue(_FileQueueBase):
    """Ordered fixed-size files in one directory.

    Raises:
        StoreLayoutError: (at load) files of the wrong size or offsets that are not file-size apart.
    """

    def __init__(self, directory: Path, file_size: int, *, read_only: bool = False) -> None:
        self.directory = directory
        self.file_size = file_size
        self.read_only = read_only
        self.files = []

    def load(self) -> None:
        """Map every offset-named file of the directory, positions provisionally at their end.

        Raises:
            StoreLayoutError: a file of the wrong size or an offset gap/misalignment.
            OSError: a file cannot be mapped, or an empty last file not removed.
        """
        if not self.directory.is_dir():
            return
        names = sorted(p.name for p in self.directory.iterdir()
                       if p.is_file() and name_to_offset(p.name) is not None)
        for name in names:
            path = self.directory / name
            if path.stat().st_size == 0 and name == names[-1]:
                # A crash between creating the newest file and sizing it (or a 5.x broker) leaves an
                # empty last file; it holds nothing, so a writer removes it and a reader skips it.
                if not self.read_only:
                    path.unlink()
                    fs.fsync_dir(self.directory)
                continue
            mf = MappedFile(path, self.file_size, read_only=self.read_only)
            if mf.file_from_offset % self.file_size:
                mf.close()
                raise StoreLayoutError(f"{path}: offset not a multiple of the file size {self.file_size}")
            if self.files and mf.file_from_offset != self.files[-1].end_offset:
                mf.close()
                raise StoreLayoutError(f"{path}: does not follow {self.files[-1].path.name}")
            mf.wrote_position = mf.flushed_position = self.file_size
            self.files.append(mf)

    @property
    def min_offset(self) -> int:
        """Start of the first file (0 when empty)."""
        return self.files[0].file_from_offset if self.files else 0

    @property
    def max_offset(self) -> int:
        """One past the last written byte."""
        if not self.files:
            return 0
        last = self.files[-1]
        return last.file_from_offset + last.wrote_position

    @property
    def flushed_offset(self) -> int:
        """One past the last byte known to be on disk."""
        for mf in reversed(self.files):
            if mf.flushed_position > 0 or mf is self.files[0]:
                return mf.file_from_offset + mf.flushed_position
        return 0

    @property
    def last(self) -> MappedFile | None:
        """The file being written, None when there is none."""
        return self.files[-1] if self.files else None

    def find(self, offset: int) -> MappedFile | None:
        """The file holding global `offset`, None when out of range."""
        if not self.files or offset < self.files[0].file_from_offset:
            return None
        index = (offset - self.files[0].file_from_offset) // self.file_size
        if index < len(self.files):
            return self.files[index]
        return None

    def create_file(self, file_from_offset: int) -> MappedFile:
        """Create and append the file starting at `file_from_offset`.

        Raises:
            StoreLayoutError: the offset does not follow the last file.
            OSError: the file cannot be created, or its directory entry not made durable.
        """
        if self.files and file_from_offset != self.files[-1].end_offset:
            raise StoreLayoutError(
                f"{self.directory}: new file at {file_from_offset} does not follow {self.files[-1].path.name}")
        _make_durable_dirs(self.directory)
        mf = MappedFile.create(self.directory, file_from_offset, self.file_size)
        self.files.append(mf)
        fs.fsync_dir(self.directory)  # the new name survives a power cut with the bytes synced into it
        return mf

    def truncate(self, offset: int) -> list[Path]:
        """Make `offset` the end of the data: positions of the file holding it move back, files
        starting after it are deleted (bytes past the offset inside a file are left in place).

        Returns:
            the paths of the deleted files.
        """
        deleted: list[Path] = []
        keep: list[MappedFile] = []
        for mf in self.files:
            if mf.end_offset <= offset:
                keep.append(mf)
            elif mf.file_from_offset <= offset and (offset < mf.end_offset):
                pos = offset - mf.file_from_offset
                mf.wrote_position = mf.flushed_position = pos
                keep.append(mf)
            else:
                deleted.append(mf.path)
                mf.destroy()
        self.files = keep
        return deleted

    def forget_after(self, offset: int) -> None:
        """Unmap the files that start past `offset` (read-only opens: nothing is deleted)."""
        for mf in self.files:
            if mf.file_from_offset > offset:
                mf.close()
        self.files = [mf for mf in self.files if mf.file_from_offset <= offset]

    def delete_first(self, count: int) -> list[Path]:
        """Delete the `count` oldest files (never the last one)."""
        count = min(count, len(self.files) - 1)
        doomed, self.files = self.files[:count], self.files[count:]
        for mf in doomed:
            mf.destroy()
        return [mf.path for mf in doomed]

    def destroy(self) -> None:
        """Delete every file and the directory if it is left empty."""
        for mf in self.files:
            mf.destroy()
        self.files = []
        try:
            self.directory.rmdir()
        except OSError:
            pass

    def close(self) -> None:
        """Unmap every file."""
        for mf in self.files:
            mf.close()

    def flush(self, least_pages: int = 0) -> int:
        """Force written bytes of every file to disk (files before the last are always whole).

        Returns:
            the flushed global offset.

        Raises:
            OSError: the disk did not accept the bytes.
        """
        files = list(self.files)  # a flush thread runs this beside retention, which removes files
        for mf in files:
            if mf.wrote_position > mf.flushed_position:
                mf.flush(least_pages if mf is files[-1] else 0)
        return self.flushed_offset
