"""IndexFile: a hash index from `topic#key` to commitlog offsets.

    [ header 40 B ][ hash slots: slots x 4 B ][ entries: max_entries x 20 B ]

    header  pos len field                    entry  pos len field
            0   8   beginTimestamp                  0   4   keyHash (>= 0)
            8   8   endTimestamp                    4   8   physical offset
            16  8   beginPhyOffset                  12  4   timeDiff, seconds since beginTimestamp
            24  8   endPhyOffset                    16  4   previous entry number in the slot chain
            32  4   hashSlotCount
            36  4   indexCount (next entry number; starts at 1)

    slot s       at 40 + s*4                  (s = keyHash % slots; value = newest entry number, 0 = empty)
    entry n      at 40 + slots*4 + n*20       (n >= 1; entry 0 is never written)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rocketstore._types import Buffer

HEADER = struct.Struct(
    ">q"  # beginTimestamp
    "q"  # endTimestamp
    "q"  # beginPhyOffset
    "q"  # endPhyOffset
    "i"  # hashSlotCount
    "i"  # indexCount
)
HEADER_SIZE = HEADER.size  # 40
SLOT = struct.Struct(">i")
SLOT_SIZE = SLOT.size  # 4
ENTRY = struct.Struct(
    ">i"  # keyHash
    "q"  # physical offset
    "i"  # timeDiff (seconds)
    "i"  # previous entry number
)
ENTRY_SIZE = ENTRY.size  # 20
FIRST_ENTRY = 1
MAX_TIME_DIFF = 0x7FFFFFFF


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
