"""ConsumeQueue: the 20-byte entries of one (topic, queue_id), in `consumequeue/<topic>/<queue_id>/`."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rocketstore.errors import StoreError
from rocketstore.format.consume_queue import FILLER, UNIT, UNIT_SIZE, CqUnit, iter_units, iter_written_units, pack_unit
from rocketstore.native import speedups
from rocketstore.storage.mapped_file_queue import MappedFileQueue

CONSUME_QUEUE_DIR = "consumequeue"
RECOVER_LAST_FILES = 3


def pack_following_py(entries: Sequence[tuple[int, int, int, int]], i: int, room: int, expected: int,
                      end: int) -> tuple[int, bytes, int]:
    """The entries from `i` that go on a run in one file (at most `room`): they pass put()'s checks
    exactly when their queue offsets go on one by one from `expected` and each ends past the one before
    (the first past `end`).

    Returns:
        (the index of the first entry not taken, the taken entries' 20-byte units, the end of the last)

    The twin of rocketstore._speedups.pack_following, which also stops before an entry whose values do
    not fit an entry's fields (put() then refuses it, as pack_unit does here).
    """
    run: list[bytes] = []
    n = len(entries)
    while i < n and len(run) < room:
        phy, size, code, queue_offset = entries[i]
        if queue_offset != expected or phy + size <= end:
            break
        run.append(pack_unit(phy, size, code))
        expected, end = expected + 1, phy + size
        i += 1
    return i, b"".join(run), end


pack_following = pack_following_py if speedups is None else speedups.pack_following


class ConsumeQueue:
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

    def load(self) -> None:
        """Map the existing files."""
        self.queue.load()

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

    def recover(self) -> None:
        """Find the end of the valid entries in the last three files and truncate after it."""
        files = self.queue.files
        if not files:
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
            tail = mf.mm[mf.wrote_position:]
            if tail.count(0) != len(tail):
                mf.write_at(mf.wrote_position, bytes(len(tail)))

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
        for i, unit in enumerate(iter_units(first.mm[:first.wrote_position])):
            if unit.valid and unit.phy_offset >= min_phy_offset and not unit.filler:
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
        if phy_offset + size <= self.max_physic_offset:
            return False
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
            return False
        if expected > current:
            raise StoreError(f"consume queue {self.topic}/{self.queue_id}: entry {queue_offset} would "
                             f"leave a gap after {current // UNIT_SIZE}")
        mf.append(pack_unit(phy_offset, size, tags_code))
        self.max_physic_offset = phy_offset + size
        return True

    def put_many(self, entries: Sequence[tuple[int, int, int, int]]) -> int:
        """`put` for (phy_offset, size, tags_code, queue_offset) entries in queue order, with one write
        per run of entries that fit the current file.

        Returns:
            the index in `entries` of the last entry written, -1 when none was.

        Raises:
            StoreError: an entry would leave a gap in the queue (the entries before it are written).
            OSError: a new file cannot be created.
        """
        last = -1
        i, n = 0, len(entries)
        while i < n:
            phy, size, code, queue_offset = entries[i]
            written = self.put(phy, size, code, queue_offset)  # the first of a run: every rule checked
            i += 1
            if not written:
                continue
            last = i - 1
            mf = self.queue.last
            assert mf is not None
            room = (mf.file_size - mf.wrote_position) // UNIT_SIZE
            i, units, end = pack_following(entries, i, room, queue_offset + 1, phy + size)
            if units:
                mf.append(units)
                self.max_physic_offset = end
                last = i - 1
        return last

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
        start = max(start, self.min_offset)
        end = min(end, self.max_offset)
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
