"""CommitLog: every message of every topic, appended to fixed-size files that roll with a blank record."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from rocketstore._types import Buffer
from rocketstore.errors import CorruptRecordError, MessageNotFoundError, StoreLayoutError
from rocketstore.format.message import (
    END_OF_FILE,
    NEED_DATA,
    PREFIX,
    PREFIX_SIZE,
    DecodeResult,
    StoredMessage,
    decode_message,
    encode_blank,
    record_at,
)
from rocketstore.format.store_dirs import COMMITLOG_DIR
from rocketstore.storage.mapped_file import MappedFile
from rocketstore.storage.mapped_file_queue import MappedFileQueue


class CommitLog:
    """The append-only log of records.

    Raises:
        StoreLayoutError: (at load) files of the wrong size or misnamed.
    """

    def __init__(self, root: Path, file_size: int, *, read_only: bool = False) -> None:
        self.file_size = file_size
        self.queue = MappedFileQueue(root / COMMITLOG_DIR, file_size, read_only=read_only)

    def load(self) -> None:
        """Map the existing files (positions at their end until recovery sets them).

        Raises:
            StoreLayoutError: a file of the wrong size (`rocketstore recover` sets it aside).
        """
        try:
            self.queue.load()
        except StoreLayoutError as exc:
            sizes = {p.stat().st_size for p in self.queue.directory.iterdir() if p.is_file() and p.name.isdigit()}
            if self.file_size in sizes:  # one file differs from the others: damage, which recover repairs
                raise StoreLayoutError(f"{exc} (`rocketstore recover` keeps a copy and resizes it, or sets aside "
                                       "the files after a missing one)") from None
            raise

    @property
    def min_offset(self) -> int:
        """Physical offset of the first byte still stored."""
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        """Physical offset one past the last record."""
        return self.queue.max_offset

    def fits(self, size: int) -> bool:
        """True when a record of `size` bytes fits into an empty file (with its closing blank)."""
        return size + PREFIX_SIZE <= self.file_size

    def file_for_append(self, size: int) -> MappedFile:
        """The file the next record of `size` bytes goes to, closing the current file with a blank
        record when the record does not fit (`size + 8 > remaining`) and creating files as needed.

        Raises:
            ValueError: the record cannot fit even an empty file.
            OSError: a new file cannot be created.
        """
        if not self.fits(size):
            raise ValueError(f"record of {size} bytes cannot fit a commitlog file of {self.file_size}")
        mf = self.queue.last
        if mf is None:
            return self.queue.create_file(0)
        if mf.full:
            return self.queue.create_file(mf.end_offset)
        if size + PREFIX_SIZE > mf.remaining:
            mf.write_at(mf.wrote_position, encode_blank(mf.remaining))
            mf.wrote_position = mf.file_size
            return self.queue.create_file(mf.end_offset)
        return mf

    def read(self, phy_offset: int, size: int) -> bytes:
        """`size` bytes at `phy_offset` (not crossing a file end).

        Raises:
            MessageNotFoundError: the offset is not in a stored file.
        """
        mf = self.queue.find(phy_offset)
        if mf is None or phy_offset >= self.max_offset:
            raise MessageNotFoundError(f"physical offset {phy_offset} is not in the commitlog "
                                       f"[{self.min_offset}, {self.max_offset})")
        pos = phy_offset - mf.file_from_offset
        return mf.read(pos, min(size, mf.wrote_position - pos))

    def readable_file(self, phy_offset: int) -> tuple[int, int, Buffer]:
        """(start offset, bytes written, mapping) of the file holding `phy_offset`; (0, -1, b"") when
        no file does. A reader may decode records inside that range itself (`decode_message`)."""
        mf = self.queue.find(phy_offset)
        if mf is None:
            return 0, -1, b""
        return mf.file_from_offset, mf.wrote_position, mf.mm

    def message_at(self, phy_offset: int, size: int | None = None) -> StoredMessage:
        """Decode the record starting at `phy_offset`.

        Raises:
            MessageNotFoundError: no record starts there (out of range, blank, or not a record start).
        """
        mf = self.queue.find(phy_offset)
        if mf is None:
            pos = limit = -1
        else:
            pos = phy_offset - mf.file_from_offset
            limit = mf.wrote_position
            if size is None or pos + size <= limit:  # a record of the size the caller gave, or of any
                msg = record_at(StoredMessage, mf.mm, pos, limit if size is None else pos + size, phy_offset)
                if msg is not None:
                    return msg
        # no record: what follows names what is wrong
        if pos < 0 or pos >= limit:  # find() is None below the first file; past the data pos >= limit
            raise MessageNotFoundError(f"physical offset {phy_offset} is not in the commitlog "
                                       f"[{self.min_offset}, {self.max_offset})")
        mm = mf.mm  # type: ignore[union-attr]
        if size is None:  # TOTALSIZE
            size = PREFIX.unpack_from(mm, pos)[0] if pos + PREFIX_SIZE <= limit else 0
        if size <= 0 or pos + size > limit:
            raise MessageNotFoundError(f"no whole record at physical offset {phy_offset}")
        try:
            result = decode_message(mm[pos:pos + size], 0)
        except CorruptRecordError as exc:
            raise MessageNotFoundError(f"no record at physical offset {phy_offset}: {exc.reason}") from None
        if not isinstance(result, StoredMessage) or result.phy_offset != phy_offset:
            raise MessageNotFoundError(f"no record starts at physical offset {phy_offset}")
        return result

    def scan(self, start: int | None = None, end: int | None = None) -> Iterator[StoredMessage]:
        """Every record from `start` (a record start) to `end`, in log order, jumping over blanks.

        Stops quietly at the first byte that is not a whole record (the end of the written data).
        """
        stop = self.max_offset if end is None else min(end, self.max_offset)
        for mf, pos in self.files_from(self.min_offset if start is None else start, stop):
            wrote = mf.wrote_position
            limit = min(wrote, stop - mf.file_from_offset)
            mm = mf.mm
            base = mf.file_from_offset
            while pos < limit:
                # the usual record, whole and at its own offset, in one compiled call; decoded_record
                # answers for anything else (a blank, a torn or damaged record, one copied from elsewhere)
                result = record_at(StoredMessage, mm, pos, wrote, base + pos)
                if result is None:
                    decoded = decoded_record(mm, pos, wrote)
                    if not isinstance(decoded, StoredMessage):
                        if decoded is END_OF_FILE:
                            break
                        return
                    result = decoded
                yield result
                pos += result.size

    def files_from(self, start: int, stop: int) -> Iterator[tuple[MappedFile, int]]:
        """The walk of the log from physical offset `start` (a record start; the oldest data if before
        it) until `stop`: each file it crosses, with the position in that file where the walk enters
        (the walker steps through the file's records and the next file follows)."""
        offset = max(start, self.min_offset)
        while offset < stop:
            mf = self.queue.find(offset)
            if mf is None:
                return
            yield mf, offset - mf.file_from_offset
            offset = mf.end_offset

    def end_read_only(self, end: int) -> None:
        """Take `end` as the end of the log in memory, writing nothing (a read-only open): a pre-allocated
        file after it is forgotten, and each file's positions stop at it."""
        self.queue.forget_after(end)  # a pre-allocated next file holds nothing yet
        for mf in self.queue.files:
            mf.wrote_position = mf.flushed_position = max(0, min(mf.file_size, end - mf.file_from_offset))

    def close(self) -> None:
        """Unmap every file."""
        self.queue.close()


def decoded_record(buf: Buffer, pos: int, wrote: int) -> DecodeResult | None:
    """The record at `pos` of a commitlog file's mapping `buf` (`wrote` bytes written) through the full
    decode, for what a compiled walk leaves: the message, END_OF_FILE for a blank record (the file's
    data ends), None where a walk of the log stops (damage, or a record not whole by `wrote`)."""
    try:
        msg = decode_message(buf, pos)
    except CorruptRecordError:
        return None
    if msg is END_OF_FILE:
        return END_OF_FILE
    if msg is NEED_DATA or pos + msg.size > wrote:
        return None
    return msg
