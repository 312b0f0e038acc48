"""ConsumeQueue: the 20-byte entries of one (topic, queue_id), in `consumequeue/<topic>/<queue_id>/`."""

from __future__ import annotations

from bisect import bisect_right
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from rocketstore.errors import StoreError, StoreLayoutError
from rocketstore.format.consume_queue import (
    FILLER,
    UNIT,
    UNIT_SIZE,
    CqUnit,
    first_at_or_after,
    iter_units,
    iter_written_units,
    kept_prefix,
    pack_unit,
    scan_entries,
    unpack_unit,
)
from rocketstore.format.layout import JAVA_LONG_MAX
from rocketstore.format.store_dirs import CONSUME_QUEUE_DIR
from rocketstore.native import speedups
from rocketstore.storage import sparse
from rocketstore.storage.mapped_file import MappedFile
from rocketstore.storage.mapped_file_queue import MappedFileQueue

RECOVER_LAST_FILES = 3
MAX_QUEUE_OFFSET = JAVA_LONG_MAX // UNIT_SIZE  # a queue's byte offset (x 20) is a Java long, as its file names


def _zero_from(mf: MappedFile, pos: int) -> bool:
    """True when every byte of the file from `pos` on is zero (its holes are not read)."""
    return sparse.last_nonzero(mf.path, mf.mm, pos, mf.file_size) <= pos


class ConsumeQueueState:
    """The hot state of a ConsumeQueue, the fields the compiled put reads and writes: its MappedFileQueue
    and the end (offset + size) of the record of its last entry, -1 for none. The pure-Python twin of
    rocketstore._speedups.ConsumeQueueState, which has the same slots."""

    __slots__ = ("queue", "max_physic_offset")
    queue: MappedFileQueue
    max_physic_offset: int


if TYPE_CHECKING:
    _ConsumeQueueBase = ConsumeQueueState  # the compiled base has the same fields
else:
    _ConsumeQueueBase = ConsumeQueueState if speedups is None else speedups.ConsumeQueueState


class ConsumeQueue(_ConsumeQueueBase):
    """One consume queue. Queue offsets are entry numbers; byte offset = queue offset x 20."""

    def __init__(self, root: Path, topic: str, queue_id: int, entries_per_file: int, *,
                 read_only: bool = False) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = entries_per_file * UNIT_SIZE
        self.queue = MappedFileQueue(root / CONSUME_QUEUE_DIR / topic / str(queue_id), self.file_size,
                                     read_only=read_only)
        self.max_physic_offset = -1  # end (offset + size) of the last entry
        self.min_logic_offset = 0  # byte offset of the first entry still valid
        self.layout_problem: str | None = None
        self._scanned_end: int | None = None  # end of the written entries, as find_damage found it

    def load(self) -> None:
        """Map the existing files.

        A writable queue whose files do not form a queue (a file of the wrong size, a missing file)
        loads empty with `layout_problem` set: recovery quarantines its files and rebuilds it.

        Raises:
            StoreLayoutError: (read-only) files of the wrong size or not file-size apart.
        """
        try:
            self.queue.load()
        except StoreLayoutError as exc:
            if self.queue.read_only:
                raise StoreLayoutError(f"{exc} (`rocketstore recover` rebuilds the queue from the commitlog)") \
                    from None
            self.queue.close()
            self.queue.files = []
            self.layout_problem = str(exc)

    @property
    def directory(self) -> Path:
        """The folder holding this queue's files."""
        return self.queue.directory

    # -- offsets -------------------------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """One past the last entry's queue offset (0 for an empty queue)."""
        return self.queue.max_offset // UNIT_SIZE

    @property
    def min_offset(self) -> int:
        """Queue offset of the first entry still valid."""
        return max(self.min_logic_offset, self.queue.min_offset) // UNIT_SIZE

    # -- recovery ------------------------------------------------------------------------------------

    def find_damage(self, every_entry: bool = False) -> tuple[str | None, list[tuple[int, CqUnit]]]:
        """Check every file's entries for what the store never writes (a hole followed by entries,
        entries out of log order, garbage, a file that ends early with a later file holding entries).

        Returns:
            (why the queue is damaged or None, samples): the samples are (queue offset, entry) of the
            first and last written entry of each file (of every written entry with `every_entry`), for
            the caller to check against the log.
        """
        samples: list[tuple[int, CqUnit]] = []
        if self.layout_problem is not None:
            return self.layout_problem, samples
        last_phy = -1
        short: str | None = None  # a file before which the written data ended
        self._scanned_end = self.queue.min_offset
        for mf in self.queue.files:
            found = scan_entries(mf.mm, last_phy, partial(_zero_from, mf))
            where = f"{self.topic}/{self.queue_id} file {mf.path.name}"
            if found.problem is not None:
                return f"{where}: {found.problem}", samples
            if found.written and short is not None:
                return f"{short} ends early, but {mf.path.name} holds entries", samples
            if found.written < self.file_size // UNIT_SIZE and short is None:
                short = where
            first = next((n for n in range(found.written) if not unpack_unit(mf.mm, n * UNIT_SIZE).filler), None)
            if every_entry and first is not None:
                ends = set(range(first, found.written))
            else:
                ends = {found.written - 1} | ({first} if first is not None else set())
            for n in sorted(ends - {-1}):
                samples.append((mf.file_from_offset // UNIT_SIZE + n, unpack_unit(mf.mm, n * UNIT_SIZE)))
            if found.written:
                self._scanned_end = mf.file_from_offset + found.written * UNIT_SIZE
            last_phy = found.last_phy
        return None, samples

    def recover(self) -> None:
        """Truncate after the last valid entry: where `find_damage` found the end of the written data
        (it read every file), else in the last three files, as RocketMQ does."""
        files = self.queue.files
        if not files:
            return
        if self._scanned_end is not None:
            end, self._scanned_end = self._scanned_end, None
            self.queue.truncate(end)
            last = self.last_unit()
            if last is not None and not last.filler:
                self.max_physic_offset = last.phy_offset + last.size
            self._zero_tail()
            return
        index = max(0, len(files) - RECOVER_LAST_FILES)
        process_offset = files[index].file_from_offset
        while index < len(files):
            mf = files[index]
            end = 0
            for unit in iter_written_units(mf.mm):
                if not unit.valid:
                    break
                end += UNIT_SIZE
                self.max_physic_offset = unit.phy_offset + unit.size
            process_offset = mf.file_from_offset + end
            if end < self.file_size:
                break
            index += 1
        self.queue.truncate(process_offset)
        self._zero_tail()

    def _zero_tail(self) -> None:
        # Entries past the end may be stale after a truncation; zero them so a later reader that
        # scans for the end (RocketMQ does) does not find them again.
        mf = self.queue.last
        if mf is not None and not self.queue.read_only and mf.wrote_position < self.file_size:
            stop = sparse.last_nonzero(mf.path, mf.mm, mf.wrote_position, self.file_size)
            if stop > mf.wrote_position:
                mf.write_at(mf.wrote_position, bytes(stop - mf.wrote_position))

    def truncate_to_phy(self, phy_offset: int) -> None:
        """Drop every entry pointing at or past commitlog offset `phy_offset` (RocketMQ's
        truncateDirtyLogicFiles): whole last files whose first entry is past it, then the tail."""
        self.max_physic_offset = -1
        files = self.queue.files
        while files:
            mf = files[-1]
            units = iter_units(mf.mm[:mf.wrote_position])
            if (units and units[0].phy_offset >= phy_offset) or (not units and len(files) > 1):
                files.pop().destroy()  # an empty last file hides the entries of the one before it
                continue
            end = 0
            for unit in units:
                if not unit.valid or unit.phy_offset >= phy_offset:
                    break
                end += UNIT_SIZE
                self.max_physic_offset = unit.phy_offset + unit.size
            mf.wrote_position = mf.flushed_position = end
            break
        self._zero_tail()

    def correct_min_offset(self, min_phy_offset: int) -> None:
        """Move the min offset to the first entry pointing at or after `min_phy_offset` (RocketMQ's
        correctMinOffset over the first file); when no entry of the first file does, past them all."""
        if not self.queue.files:
            return
        first = self.queue.files[0]
        i = first_at_or_after(first.mm, min_phy_offset, first.wrote_position)
        if i is not None:
            self.min_logic_offset = max(self.min_logic_offset, first.file_from_offset + i * UNIT_SIZE)
            return
        if first.wrote_position and min_phy_offset > 0:
            self.min_logic_offset = max(self.min_logic_offset, first.file_from_offset + first.wrote_position)

    # -- writing -------------------------------------------------------------------------------------

    def put(self, phy_offset: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Write the entry for `queue_offset` (RocketMQ's putMessagePositionInfo).

        Returns:
            False when the entry was already there (nothing written), True when written.

        Raises:
            StoreError: the entry would leave a gap in the queue.
            OSError: a new file cannot be created.
        """
        mf = self._file_for(phy_offset, size, queue_offset)
        if mf is None:
            return False
        mf.append(pack_unit(phy_offset, size, tags_code))
        self.max_physic_offset = phy_offset + size
        return True

    def put_units(self, queue_offset: int, units: bytes | bytearray) -> int:
        """`put` for the entries packed in `units` (20 bytes each: phy offset, size, tags code) of queue
        offsets `queue_offset`, +1, ..., whose records follow one another in the log, as a batch puts
        them (rocketstore.store.append_run): the rules of `put` for the first entry of each file, then as many
        as the file holds in one write.

        Returns:
            the index in `units` of the last entry written, -1 when none was (all were there already).

        Raises:
            StoreError: the entries would leave a gap in the queue (those before it are written).
            OSError: a new file cannot be created.
        """
        count = len(units) // UNIT_SIZE
        last = -1
        # the entries whose records end by max_physic_offset are there already (a re-dispatch after a
        # crash): the records follow one another, so their ends ascend and one bisect passes them all
        i = bisect_right(range(count), self.max_physic_offset, key=partial(_unit_end, units))
        while i < count:
            phy, size, _ = UNIT.unpack_from(units, i * UNIT_SIZE)
            mf = self._file_for(phy, size, queue_offset + i)
            if mf is None:  # already there (a re-dispatch): the next may not be
                i += 1
                continue
            take = min(count - i, (mf.file_size - mf.wrote_position) // UNIT_SIZE)
            mf.append(units if take == count else units[i * UNIT_SIZE:(i + take) * UNIT_SIZE])
            i += take
            last = i - 1
            if take > 1:
                phy, size, _ = UNIT.unpack_from(units, last * UNIT_SIZE)
            self.max_physic_offset = phy + size
        return last

    def fill_hole(self, queue_offset: int) -> None:
        """Write filler entries from the queue's end up to `queue_offset` (a rebuild found no record of
        the queue for those offsets in the log: a record whose queue id or offset field was damaged).
        Readers pass over fillers as over removed messages.

        Raises:
            OSError: a new file cannot be created.
        """
        filler = pack_unit(*FILLER)
        while True:
            mf = self.queue.last
            current = 0 if mf is None else mf.file_from_offset + mf.wrote_position
            if current >= queue_offset * UNIT_SIZE:
                return
            if mf is None or mf.full:
                mf = self.queue.create_file(current)
            count = min(queue_offset - current // UNIT_SIZE, (mf.file_size - mf.wrote_position) // UNIT_SIZE)
            mf.append(filler * count)

    def _file_for(self, phy_offset: int, size: int, queue_offset: int) -> MappedFile | None:
        """The file where the entry for `queue_offset` goes next (created, after fillers when the queue
        starts mid-file), None when the entry is there already.

        Raises:
            StoreError: the entry would leave a gap in the queue.
            OSError: a new file cannot be created.
        """
        if phy_offset + size <= self.max_physic_offset:
            return None
        if not 0 <= queue_offset <= MAX_QUEUE_OFFSET:  # a damaged queue-offset field (no CRC covers it)
            raise StoreError(f"consume queue {self.topic}/{self.queue_id}: entry {queue_offset} is not a queue "
                             f"offset (0 to {MAX_QUEUE_OFFSET})")
        expected = queue_offset * UNIT_SIZE
        mf = self.queue.last
        if mf is None:
            mf = self.queue.create_file(expected - expected % self.file_size)
            if expected % self.file_size:
                fillers = pack_unit(*FILLER) * ((expected % self.file_size) // UNIT_SIZE)
                mf.append(fillers)
                mf.flushed_position = mf.wrote_position
                self.min_logic_offset = expected
        elif mf.full:
            mf = self.queue.create_file(mf.end_offset)
        current = mf.file_from_offset + mf.wrote_position
        if expected < current:
            return None
        if expected > current:
            raise StoreError(f"consume queue {self.topic}/{self.queue_id}: entry {queue_offset} would "
                             f"leave a gap after {current // UNIT_SIZE}")
        return mf

    # -- reading -------------------------------------------------------------------------------------

    def unit_at(self, queue_offset: int) -> CqUnit | None:
        """The entry at `queue_offset`, None outside [min, max)."""
        if not self.min_offset <= queue_offset < self.max_offset:
            return None
        byte_offset = queue_offset * UNIT_SIZE
        mf = self.queue.find(byte_offset)
        if mf is None:
            return None
        return CqUnit._make(UNIT.unpack_from(mf.mm, byte_offset - mf.file_from_offset))

    def units(self, start: int, end: int) -> list[CqUnit]:
        """Entries [start, end) clipped to [min, max), crossing file boundaries."""
        return iter_units(self.entry_bytes(start, end))

    def entry_bytes(self, start: int, end: int) -> bytes:
        """The 20-byte entries [start, end) clipped to [min, max), crossing file boundaries, as one
        bytes object (what `units` decodes)."""
        return self.entry_bytes_within(max(start, self.min_offset), min(end, self.max_offset))

    def entry_bytes_within(self, start: int, end: int) -> bytes:
        """`entry_bytes` for bounds the caller clipped to [min, max) already (a get, which read both)."""
        parts: list[bytes] = []
        byte_offset = start * UNIT_SIZE
        end_byte = end * UNIT_SIZE
        while byte_offset < end_byte:
            mf = self.queue.find(byte_offset)
            if mf is None:
                break
            pos = byte_offset - mf.file_from_offset
            stop = min(mf.wrote_position, end_byte - mf.file_from_offset)
            parts.append(mf.mm[pos:stop])
            byte_offset = mf.file_from_offset + stop
            if stop < mf.file_size:
                break
        return parts[0] if len(parts) == 1 else b"".join(parts)

    def end_read_only(self, phy_end: int, recent_files: int) -> None:
        """Find the queue's end in memory, writing nothing (a read-only open): its valid entries that point
        below `phy_end`, looked for in the `recent_files` newest files (older files are whole, as
        recovery takes them); the files after the end are closed and forgotten."""
        files = self.queue.files
        checked = max(0, len(files) - recent_files)
        for mf in files[:checked]:
            mf.wrote_position = mf.flushed_position = mf.file_size
        for i in range(checked, len(files)):
            mf = files[i]
            kept, last_end = kept_prefix(mf.mm, phy_end)
            if last_end is not None:
                self.max_physic_offset = last_end
            end = kept * UNIT_SIZE
            mf.wrote_position = mf.flushed_position = end
            if end < mf.file_size:
                for later in files[i + 1:]:
                    later.close()
                del files[i + 1:]
                break

    def last_unit(self) -> CqUnit | None:
        """The newest entry, None for an empty queue."""
        return self.unit_at(self.max_offset - 1) if self.max_offset > self.min_offset else None

    def flush(self, least_pages: int = 0) -> None:
        """Force written entries to disk.

        Raises:
            OSError: the disk did not accept them.
        """
        for mf in self.queue.files:
            if mf.wrote_position > mf.flushed_position:
                mf.flush(least_pages)

    def close(self) -> None:
        """Unmap every file."""
        self.queue.close()


def _unit_end(units: bytes | bytearray, i: int) -> int:
    """The end of the record the `i`-th 20-byte unit of `units` points at (its phy offset + size)."""
    phy, size, _ = UNIT.unpack_from(units, i * UNIT_SIZE)
    return int(phy + size)
