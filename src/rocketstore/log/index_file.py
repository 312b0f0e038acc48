"""IndexFile: one hash-index file (layout in rocketstore.format.index).

An index file is mapped when first touched and may be let go again, as every store file is
(storage/mapping_budget.py): a store of any number of index files holds at most the budget's mappings.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore._types import Buffer
from rocketstore.errors import IndexDamagedError, StoreClosedError, StoreLayoutError
from rocketstore.format.index import (
    DAMAGE_NONE,
    ENTRY,
    ENTRY_SIZE,
    FIRST_ENTRY,
    HEADER,
    HEADER_SIZE,
    KEY_LAYOUT,
    SLOT,
    SLOT_SIZE,
    IndexHeader,
    damage_text,
    entry_pos,
    header_damage,
    index_damage_scan,
    index_file_size,
    slot_pos,
    time_diff_seconds,
)
from rocketstore.native import speedups
from rocketstore.storage import fs
from rocketstore.storage.mapping_budget import BUDGET, map_file, with_descriptors

_native_lookup = None if speedups is None else speedups.index_lookup
_native_put = None if speedups is None else speedups.index_put_keys
_native_damage = None if speedups is None else speedups.index_damage

KEY = KEY_LAYOUT.codec
"""One key handed to `IndexFile.put_keys`, in memory only: its index hash and its record's physical
offset, native int64 each."""


HEADER_READS = 4
"""Reads of a header at most, until two agree (`_read_header`)."""


def _read_header(fd: int) -> bytes:
    """The header's 40 bytes, read until two reads agree: a writer in another process (a broker beside a
    read-only open) writes its fields one after another, and a read between two of them would pair a
    new entry count with an old end offset."""
    raw = os.pread(fd, HEADER_SIZE, 0)
    for _ in range(HEADER_READS - 1):
        again = os.pread(fd, HEADER_SIZE, 0)
        if again == raw:
            break
        raw = again
    return raw


class IndexFileState:
    """The hot state of an IndexFile, the fields the compiled kernels read and write: the mapping (None
    while unmapped), the header, the geometry (hash slots, entries) and the mapping budget's clock bit.
    The pure-Python twin of rocketstore._speedups.IndexFileState, which has the same slots."""

    __slots__ = ("_mm", "header", "slots", "max_entries", "touched")
    _mm: mmap.mmap | None
    header: IndexHeader
    slots: int
    max_entries: int
    touched: bool


if TYPE_CHECKING:
    _IndexFileBase = IndexFileState  # the compiled base has the same fields
else:
    _IndexFileBase = IndexFileState if speedups is None else speedups.IndexFileState

HEADER_SLOTS: tuple[Any, ...] = tuple(getattr(IndexHeader, f.name) for f in dataclasses.fields(IndexHeader))
"""IndexHeader's slots in file order: the compiled kernels read and write a header through them."""


class IndexFile(_IndexFileBase):
    """An index file, mapped in memory when first touched (`mm`). The header is read at open, kept in
    memory and written through on every put.

    No descriptor stays open for the file itself: the mapping holds one, and the process's
    `mapping_budget.BUDGET` lets the least recently touched mappings go when too many are held (the
    file taking keys is touched by every batch of keys, so it stays).

    Raises:
        StoreLayoutError: (at open) a file whose size does not match the geometry.
        StoreResourceError: (at open) no file descriptor left.
        OSError: the file cannot be created or read.
    """

    def __init__(self, path: Path, slots: int, max_entries: int, *, create: bool = False,
                 read_only: bool = False) -> None:
        self.path = path
        self._mm = None
        self.slots = slots
        self.max_entries = max_entries
        self.file_size = index_file_size(slots, max_entries)
        self.read_only = read_only
        self.touched = False  # the budget's clock bit: set by each batch of keys, lookup and check
        self._closed = False
        if create and not read_only:
            with_descriptors("create", path, lambda: fs.create_sized(path, self.file_size, reserve=False))
        fd = with_descriptors("open", path, lambda: os.open(path, os.O_RDONLY))
        try:
            actual = os.fstat(fd).st_size
            if actual != self.file_size:
                raise StoreLayoutError(f"{path}: index file of {actual} bytes, geometry says "
                                       f"{self.file_size} ({slots} slots x {max_entries} entries)")
            self.header = IndexHeader.unpack(_read_header(fd))
        finally:
            os.close(fd)
        self._flushed_count = self.header.index_count

    def _map(self) -> mmap.mmap:
        if self._closed:
            raise StoreClosedError(f"{self.path} is closed")
        mm = map_file(self.path, self.file_size, read_only=self.read_only)
        self._mm = mm
        self.touched = True
        BUDGET.admit(self)
        return mm

    @property
    def mm(self) -> mmap.mmap:
        """The file's mapping, mapped now if it was not.

        Raises:
            StoreClosedError: (when mapping) the file was closed.
            StoreResourceError: (when mapping) no file descriptor left to map it.
        """
        mm = self._mm
        return self._map() if mm is None else mm

    @property
    def mapped(self) -> bool:
        """True while the file is mapped."""
        return self._mm is not None

    def unmap(self) -> None:
        """Let the mapping go (it is unmapped when no reader holds it any more); the next touch maps the
        file again."""
        self._mm = None

    @property
    def full(self) -> bool:
        """True when no entry number is left (capacity is max_entries - 1)."""
        return self.header.index_count >= self.max_entries

    def put_key(self, key_hash: int, phy_offset: int, store_timestamp: int) -> bool:
        """Add one key (RocketMQ's IndexFile.putKey).

        Returns:
            False when the file is full (nothing written).
        """
        return self.put_keys(KEY.pack(key_hash, phy_offset), store_timestamp) == 1

    def put_keys(self, keys: Buffer, store_timestamp: int, start: int = 0) -> int:
        """`put_key` for the keys from `start` on, in order, until the file is full; the header is
        written once at the end. `keys` holds (index hash, phy offset) pairs packed as `KEY`, all of
        records stored at `store_timestamp` (as a batch is).

        Returns:
            how many keys were added (fewer than asked when the file filled up).
        """
        h = self.header
        self.touched = True
        room = self.max_entries - h.index_count
        held = len(keys) // KEY.size
        stop = held if held - start <= room else start + max(room, 0)
        if stop <= start:
            return 0
        header = (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset, h.hash_slot_count,
                  h.index_count)
        after = None if _native_put is None else _native_put(self.mm, self.slots, header, keys, store_timestamp,
                                                             start, stop)
        if after is None:
            after = self._put_keys_py(header, keys, store_timestamp, start, stop)
        (h.begin_timestamp, h.end_timestamp, h.begin_phy_offset, h.end_phy_offset, h.hash_slot_count,
         h.index_count) = after
        return stop - start

    def _put_keys_py(self, header: tuple[int, int, int, int, int, int], keys: Buffer, store_ts: int, start: int,
                     stop: int) -> tuple[int, int, int, int, int, int]:
        """Entries, slots and header for keys [start, stop) (the twin of rocketstore._speedups.
        index_put_keys): the header's six fields in file order afterwards."""
        mm = self.mm
        slots = self.slots
        begin_ts, end_ts, begin_phy, end_phy, slot_count, n = header
        slot_unpack, slot_pack, entry_pack = SLOT.unpack_from, SLOT.pack_into, ENTRY.pack_into
        entries_base = entry_pos(0, slots)
        for key_hash, phy in KEY.iter_unpack(keys[start * KEY.size:stop * KEY.size]):
            spos = HEADER_SIZE + (key_hash % slots) * SLOT_SIZE
            slot_value = slot_unpack(mm, spos)[0]
            if slot_value <= 0 or slot_value > n:
                slot_value = 0
                slot_count += 1
            diff = time_diff_seconds(store_ts, begin_ts)
            if n <= FIRST_ENTRY:
                begin_phy, begin_ts = phy, store_ts
            entry_pack(mm, entries_base + n * ENTRY_SIZE, key_hash, phy, diff, slot_value)
            slot_pack(mm, spos, n)
            n += 1
            end_phy, end_ts = phy, store_ts
        after = (begin_ts, end_ts, begin_phy, end_phy, slot_count, n)
        HEADER.pack_into(mm, 0, *after)
        return after

    def write_header(self) -> None:
        """Write the in-memory header into the mapping."""
        h = self.header
        HEADER.pack_into(self.mm, 0, h.begin_timestamp, h.end_timestamp, h.begin_phy_offset,
                         h.end_phy_offset, h.hash_slot_count, h.index_count)

    def time_matches(self, begin: int, end: int) -> bool:
        """RocketMQ's isTimeMatched over the header's time range."""
        fb, fe = self.header.begin_timestamp, self.header.end_timestamp
        return (begin < fb and end > fe) or fb <= begin <= fe or fb <= end <= fe

    def lookup(self, key_hash: int, max_count: int, begin: int, end: int, out: list[int]) -> None:
        """Append to `out` (newest first) the offsets whose entries carry `key_hash` and whose
        second-granular time lies in [begin, end], until `out` holds `max_count` offsets.

        Raises:
            IndexDamagedError: the key's chain is damaged (`lookup_py` says how); nothing is appended.
            StoreClosedError: the file was closed.
        """
        h = self.header
        n_max = h.index_count  # first: the header fields written before it are then at least as new
        self.touched = True
        if _native_lookup is None or not _native_lookup(self.mm, self.slots, key_hash, n_max, h.begin_timestamp,
                                                        h.begin_phy_offset, h.end_phy_offset, begin, end,
                                                        max_count, out):
            self.lookup_py(key_hash, max_count, begin, end, out)

    def lookup_py(self, key_hash: int, max_count: int, begin: int, end: int, out: list[int]) -> None:
        """`lookup` in pure Python (the twin of rocketstore._speedups.index_lookup).

        The walk follows the key's slot, then each entry's link, to entries strictly further back; an
        entry past the header's count is one a put is writing (its slot is written before the header),
        read as any other. Damage, which would make the answer silently incomplete or the walk loop, is
        an error: a slot or link naming no entry of the file or not strictly backwards, a negative key
        hash or time difference, a physical offset outside the header's (the header's newest entry is
        not held to its end offset, which RocketMQ writes after counting the entry).

        Raises:
            IndexDamagedError: the chain is damaged; nothing is appended.
        """
        h = self.header
        n_max = h.index_count
        begin_ts, begin_phy, end_phy = h.begin_timestamp, h.begin_phy_offset, h.end_phy_offset
        mm, slots = self.mm, self.slots
        n = SLOT.unpack_from(mm, slot_pos(key_hash, slots))[0]
        found: list[int] = []
        want = max_count - len(out)
        link = f"slot {key_hash % slots}"
        while n and len(found) < want:
            if n < 0 or n >= self.max_entries:
                raise IndexDamagedError(self.path, f"{link} points at entry {n}, outside the file")
            entry_hash, phy, diff, prev = ENTRY.unpack_from(mm, entry_pos(n, slots))
            if entry_hash < 0 or diff < 0:
                raise IndexDamagedError(self.path, f"entry {n} has a negative key hash or time")
            if phy < begin_phy or (n < n_max - 1 and phy > end_phy):
                raise IndexDamagedError(self.path, f"entry {n} points outside the header's physical offsets")
            if prev < 0 or prev >= n:
                raise IndexDamagedError(self.path, f"entry {n} links to entry {prev}, not one before it")
            time_read = begin_ts + diff * 1000
            if entry_hash == key_hash and begin <= time_read <= end:
                found.append(phy)
            if time_read < begin:
                break
            link, n = f"entry {n}", prev
        out.extend(found)

    def find_damage(self, full: bool = False) -> str | None:
        """What is wrong in the file, or None when nothing is found; for a file nobody is writing (a
        recovery, before the store takes puts).

        full=False reads the header and the few entries and slots it names: indexCount within
        [0, max_entries] and hashSlotCount within [0, min(slots, indexCount - 1)]; the entry at indexCount
        blank (nothing written past the count); with entries, begin <= end for the timestamps and the
        physical offsets; the first entry at beginPhyOffset with no link; the last at endPhyOffset, at
        endTimestamp's time difference, linking backwards, and the newest of its slot. O(1): a few
        pages.

        full=True also checks every entry and slot (`format.index.index_damage_scan`): each entry's key
        hash >= 0, physical offset within [beginPhyOffset, endPhyOffset], time difference >= 0 and (from
        entry 2 on) not past endTimestamp, link to the previous entry of its slot (0 for the first);
        each slot holding its chain's newest entry, hashSlotCount the slots in use, and every entry
        from indexCount on blank. It reads the whole file once: about a second for a file of the
        default geometry in the page cache (420 MB; longer from the disk), 20 MB of memory for its
        5,000,000 slots; compiled, without the interpreter lock.

        A file whose entries' store times went backwards (a clock set back while it was written) has
        times its header does not hold, and reads as damaged too: queries by time would miss in it.

        Raises:
            StoreClosedError: the file was closed.
            StoreResourceError: no file descriptor left to map it.
        """
        self.touched = True
        with memoryview(self.mm) as view:
            reason = header_damage(view, self.slots, self.max_entries)
            if reason is not None or not full:
                return reason
            answer = None if _native_damage is None else _native_damage(view, self.slots, self.max_entries)
            code, where = answer if answer is not None else index_damage_scan(view, self.slots, self.max_entries)
        return None if code == DAMAGE_NONE else damage_text(code, where, self.max_entries)

    def entries(self) -> list[tuple[int, int, int, int]]:
        """Every written entry (keyHash, phyOffset, timeDiff, prev), entry 1 first."""
        return [ENTRY.unpack_from(self.mm, entry_pos(n, self.slots))
                for n in range(FIRST_ENTRY, self.header.index_count)]

    def newest_entries_of(self, phy_offset: int) -> int:
        """How many of the newest entries point at `phy_offset` (the keys of the newest record indexed
        here: a record's keys are written one after another)."""
        count = 0
        n = self.header.index_count - 1
        while n >= FIRST_ENTRY and ENTRY.unpack_from(self.mm, entry_pos(n, self.slots))[1] == phy_offset:
            count += 1
            n -= 1
        return count

    def flush(self) -> None:
        """Force the file to disk.

        Raises:
            OSError: the disk did not accept it.
        """
        count = self.header.index_count  # the keys this sync covers (the dispatch may add more meanwhile)
        if count == self._flushed_count:
            return
        try:
            mm = self.mm
            pinned = memoryview(mm)  # a close meanwhile (retention) lets the mapping go after the sync
        except (StoreClosedError, ValueError):  # closed (deleted) before: nothing left to flush
            return
        with pinned:
            fs.msync(mm, 0, self.file_size)
        self._flushed_count = count

    def pin(self) -> None:
        """Map the file and keep the mapping until `close` (a file about to be deleted)."""
        if self.mm is not None:
            BUDGET.release(self)

    def close(self) -> None:
        """Unmap (idempotent)."""
        self._closed = True
        BUDGET.release(self)
        mm, self._mm = self._mm, None
        if mm is not None:
            try:
                mm.close()
            except BufferError:
                pass  # a reader still holds a view; the mapping is released with it

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        self.path.unlink(missing_ok=True)
