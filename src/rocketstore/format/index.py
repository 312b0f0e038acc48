"""IndexFile: a hash index from `topic#key` to commitlog offsets.

    [ header 40 B ][ hash slots: slots x 4 B ][ entries: max_entries x 20 B ]

header
    pos  len  field                       meaning
    0    8    beginTimestamp              store time of the first entry, ms
    8    8    endTimestamp                store time of the last entry, ms
    16   8    beginPhyOffset              commitlog offset of the first entry's record
    24   8    endPhyOffset                commitlog offset of the last entry's record
    32   4    hashSlotCount               slots in use
    36   4    indexCount                  next entry number; starts at 1

entry
    pos  len  field                       meaning
    0    4    keyHash                     hash of topic#key, >= 0
    4    8    physical offset             commitlog offset of the record
    12   4    timeDiff (seconds)          seconds since beginTimestamp
    16   4    previous entry number       the slot chain's link; 0 ends it

slot
    pos  len  field                       meaning
    0    4    entry number                the slot's newest entry; 0 for none

    slot s       at 40 + s*4                  (s = keyHash % slots; value = newest entry number, 0 = empty)
    entry n      at 40 + slots*4 + n*20       (n >= 1; entry 0 is never written)
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from rocketstore._types import Buffer
from rocketstore.format.layout import JAVA_INT_MAX, Field, Layout

HEADER_LAYOUT = Layout("index file header", (
    Field("beginTimestamp", "q", "store time of the first entry, ms"),
    Field("endTimestamp", "q", "store time of the last entry, ms"),
    Field("beginPhyOffset", "q", "commitlog offset of the first entry's record"),
    Field("endPhyOffset", "q", "commitlog offset of the last entry's record"),
    Field("hashSlotCount", "i", "slots in use"),
    Field("indexCount", "i", "next entry number; starts at 1"),
))
HEADER = HEADER_LAYOUT.codec
HEADER_SIZE = HEADER.size  # 40
SLOT_LAYOUT = Layout("index hash slot", (
    Field("entry number", "i", "the slot's newest entry; 0 for none"),
))
SLOT = SLOT_LAYOUT.codec
SLOT_SIZE = SLOT.size  # 4
ENTRY_LAYOUT = Layout("index entry", (
    Field("keyHash", "i", "hash of topic#key, >= 0"),
    Field("physical offset", "q", "commitlog offset of the record"),
    Field("timeDiff (seconds)", "i", "seconds since beginTimestamp"),
    Field("previous entry number", "i", "the slot chain's link; 0 ends it"),
))
ENTRY = ENTRY_LAYOUT.codec
ENTRY_SIZE = ENTRY.size  # 20
KEY_LAYOUT = Layout("index key to put", (
    Field("keyHash", "q", "hash of topic#key"),
    Field("physical offset", "q", "commitlog offset of the record"),
), byte_order="=")
"""A key handed to `log.index_file.IndexFile.put_keys` and the compiled `index_put_keys`, in memory only
(native int64s): not part of the file."""
FIRST_ENTRY = 1
MAX_TIME_DIFF = JAVA_INT_MAX


@dataclass(slots=True)
class IndexHeader:
    """The 40-byte header of an index file."""

    begin_timestamp: int = 0
    end_timestamp: int = 0
    begin_phy_offset: int = 0
    end_phy_offset: int = 0
    hash_slot_count: int = 0
    index_count: int = FIRST_ENTRY

    def pack(self) -> bytes:
        """The 40 header bytes."""
        return HEADER.pack(self.begin_timestamp, self.end_timestamp, self.begin_phy_offset,
                           self.end_phy_offset, self.hash_slot_count, self.index_count)

    @classmethod
    def unpack(cls, buf: Buffer) -> IndexHeader:
        """Read a header; an indexCount <= 0 reads as 1, as RocketMQ does."""
        values = HEADER.unpack_from(buf, 0)
        header = cls(*values)
        if header.index_count <= 0:
            header.index_count = FIRST_ENTRY
        return header


def index_file_size(slots: int, max_entries: int) -> int:
    """Bytes of an index file with this geometry."""
    return HEADER_SIZE + slots * SLOT_SIZE + max_entries * ENTRY_SIZE


def slot_pos(key_hash: int, slots: int) -> int:
    """Byte position of the slot for `key_hash`."""
    return HEADER_SIZE + (key_hash % slots) * SLOT_SIZE


def entry_pos(n: int, slots: int) -> int:
    """Byte position of entry number `n` (n >= 1)."""
    return HEADER_SIZE + slots * SLOT_SIZE + n * ENTRY_SIZE


def time_diff_seconds(store_timestamp: int, begin_timestamp: int) -> int:
    """timeDiff of an entry: whole seconds since the file's begin, clamped to [0, 2**31-1]."""
    if begin_timestamp <= 0:
        return 0
    diff = int((store_timestamp - begin_timestamp) / 1000)  # Java truncates toward zero
    return min(max(diff, 0), MAX_TIME_DIFF)


def index_key(topic: str, key: str) -> str:
    """The indexed string for a key of a topic."""
    return f"{topic}#{key}"


# How an index file is damaged, as the compiled `index_damage` answers it: (code, where), `where` being the
# entry or slot number the code names (the header's codes: the value found). Codes after a file's size was
# found right; DAMAGE_NONE: nothing found.
DAMAGE_NONE = 0
DAMAGE_COUNT = 1  # indexCount outside [0, max_entries]
DAMAGE_ORDER = 2  # the header's begin after its end (timestamps or physical offsets), with entries
DAMAGE_ENTRY_HASH = 3  # an entry's keyHash below 0
DAMAGE_ENTRY_PHY = 4  # an entry's physical offset outside [beginPhyOffset, endPhyOffset]
DAMAGE_ENTRY_TIME = 5  # an entry's timeDiff below 0, or past the header's endTimestamp
DAMAGE_ENTRY_LINK = 6  # an entry's chain link not the previous entry of its slot
DAMAGE_SLOT = 7  # a slot not holding the newest entry of its chain (or 0 for none)
DAMAGE_SLOT_COUNT = 8  # hashSlotCount not the number of slots in use
DAMAGE_PAST_COUNT = 9  # bytes written in an entry at or past indexCount

_DAMAGE_TEXT = {
    DAMAGE_COUNT: "indexCount {} outside [0, the file's {} entries]",
    DAMAGE_ORDER: "header begins after it ends (begin/end timestamps or physical offsets)",
    DAMAGE_ENTRY_HASH: "entry {} has a negative key hash",
    DAMAGE_ENTRY_PHY: "entry {} points outside the header's physical offsets",
    DAMAGE_ENTRY_TIME: "entry {} has a time outside the header's times",
    DAMAGE_ENTRY_LINK: "entry {} does not link to the previous entry of its slot",
    DAMAGE_SLOT: "slot {} does not hold the newest entry of its chain",
    DAMAGE_SLOT_COUNT: "hashSlotCount {} is not the number of slots in use",
    DAMAGE_PAST_COUNT: "entry {} is written past indexCount",
}


def damage_text(code: int, where: int, max_entries: int) -> str:
    """The reason for `index_damage_scan`'s answer (code, where)."""
    return _DAMAGE_TEXT[code].format(where, max_entries)


def header_damage(buf: Buffer, slots: int, max_entries: int) -> str | None:
    """What is wrong in an index file's header, judged from the header and the few slots and entries it
    names (O(1): the first entry, the last, its slot, the entry after it); None when nothing is.

    Holds for a file nobody is writing: the header is written after the entries and slots of a put.
    """
    if slots <= 0 or max_entries < 1 or len(buf) != index_file_size(slots, max_entries):
        return f"{len(buf)} bytes, not the {index_file_size(slots, max_entries)} of the geometry"
    begin_ts, end_ts, begin_phy, end_phy, slot_count, count = HEADER.unpack_from(buf, 0)
    if count < 0 or count > max_entries:
        return damage_text(DAMAGE_COUNT, count, max_entries)
    count = max(count, FIRST_ENTRY)
    if slot_count < 0 or slot_count > min(slots, count - 1):
        return damage_text(DAMAGE_SLOT_COUNT, slot_count, max_entries)
    if count < max_entries and any(buf[entry_pos(count, slots):entry_pos(count + 1, slots)]):
        return damage_text(DAMAGE_PAST_COUNT, count, max_entries)
    if count == FIRST_ENTRY:
        return None
    if begin_ts > end_ts or begin_phy > end_phy or begin_phy < 0:
        return damage_text(DAMAGE_ORDER, 0, max_entries)
    key_hash, phy, diff, prev = ENTRY.unpack_from(buf, entry_pos(FIRST_ENTRY, slots))
    if key_hash < 0:
        return damage_text(DAMAGE_ENTRY_HASH, FIRST_ENTRY, max_entries)
    if phy != begin_phy:
        return damage_text(DAMAGE_ENTRY_PHY, FIRST_ENTRY, max_entries)
    if diff < 0:
        return damage_text(DAMAGE_ENTRY_TIME, FIRST_ENTRY, max_entries)
    if prev != 0:
        return damage_text(DAMAGE_ENTRY_LINK, FIRST_ENTRY, max_entries)
    last = count - 1
    key_hash, phy, diff, prev = ENTRY.unpack_from(buf, entry_pos(last, slots))
    if key_hash < 0:
        return damage_text(DAMAGE_ENTRY_HASH, last, max_entries)
    if phy != end_phy:
        return damage_text(DAMAGE_ENTRY_PHY, last, max_entries)
    if last > FIRST_ENTRY and diff != time_diff_seconds(end_ts, begin_ts):
        return damage_text(DAMAGE_ENTRY_TIME, last, max_entries)
    if prev < 0 or prev >= last:
        return damage_text(DAMAGE_ENTRY_LINK, last, max_entries)
    if SLOT.unpack_from(buf, slot_pos(key_hash, slots))[0] != last:
        return damage_text(DAMAGE_SLOT, key_hash % slots, max_entries)
    return None


def index_damage_scan(buf: Buffer, slots: int, max_entries: int) -> tuple[int, int]:
    """Every slot and entry of an index file against the header (the twin of the compiled
    `index_damage`): (code, where), (DAMAGE_NONE, 0) for a file that holds exactly what the puts its
    header counts write.

    Entry n (1 <= n < indexCount) must have a key hash >= 0, a physical offset in [beginPhyOffset,
    endPhyOffset], a timeDiff >= 0 that (from entry 2 on, entry 1's being relative to the file before)
    puts it at or before endTimestamp, and link to the entry before it with the same slot (0 for the
    first); each slot must hold its chain's newest entry (0 when none), hashSlotCount the number of
    slots in use, and the entries from indexCount on nothing. The first difference is answered, in that
    order. `buf` must be the file's size (`header_damage` checks that).
    """
    begin_ts, end_ts, begin_phy, end_phy, slot_count, count = HEADER.unpack_from(buf, 0)
    if count < 0 or count > max_entries:
        return DAMAGE_COUNT, count
    count = max(count, FIRST_ENTRY)
    if count > FIRST_ENTRY and (begin_ts > end_ts or begin_phy > end_phy):
        return DAMAGE_ORDER, 0
    newest = array("i", bytes(4 * slots))
    base = entry_pos(0, slots)
    for n, (key_hash, phy, diff, prev) in enumerate(
            ENTRY.iter_unpack(memoryview(buf)[base + ENTRY_SIZE:base + count * ENTRY_SIZE]), FIRST_ENTRY):
        if key_hash < 0:
            return DAMAGE_ENTRY_HASH, n
        if phy < begin_phy or phy > end_phy:
            return DAMAGE_ENTRY_PHY, n
        if diff < 0 or (n > FIRST_ENTRY and begin_ts + diff * 1000 > end_ts):
            return DAMAGE_ENTRY_TIME, n
        slot = key_hash % slots
        if prev != newest[slot]:
            return DAMAGE_ENTRY_LINK, n
        newest[slot] = n
    used = 0
    for slot, (value,) in enumerate(SLOT.iter_unpack(memoryview(buf)[HEADER_SIZE:base])):
        if value != newest[slot]:
            return DAMAGE_SLOT, slot
        used += value != 0
    if used != slot_count:
        return DAMAGE_SLOT_COUNT, slot_count
    view, zeros = memoryview(buf), bytes(_ZERO_CHUNK)
    for at in range(base + count * ENTRY_SIZE, len(buf), _ZERO_CHUNK):
        chunk = view[at:at + _ZERO_CHUNK].tobytes()
        if chunk != zeros[:len(chunk)]:
            first = at + len(chunk) - len(chunk.lstrip(b"\0"))
            return DAMAGE_PAST_COUNT, (first - base) // ENTRY_SIZE
    return DAMAGE_NONE, 0


_ZERO_CHUNK = 1 << 20  # the entries past indexCount are compared with zeros this many bytes at a time
