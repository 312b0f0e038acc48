"""StoreCheckpoint page: a 4096-byte file of big-endian int64 timestamps.

    pos  len  field                       meaning
    0    8    physicMsgTimestamp          store time of the last flushed commitlog message
    8    8    logicsMsgTimestamp          store time of the last flushed consume-queue entry
    16   8    indexMsgTimestamp           endTimestamp of the last flushed full index file
    24   8    masterFlushedOffset         5.x
    32   8    confirmPhyOffset            5.x
"""

from __future__ import annotations

from dataclasses import dataclass

from rocketstore._types import Buffer
from rocketstore.format.layout import Field, Layout

PAGE_SIZE = 4096
LAYOUT = Layout("checkpoint page", (
    Field("physicMsgTimestamp", "q", "store time of the last flushed commitlog message"),
    Field("logicsMsgTimestamp", "q", "store time of the last flushed consume-queue entry"),
    Field("indexMsgTimestamp", "q", "endTimestamp of the last flushed full index file"),
    Field("masterFlushedOffset", "q", "5.x"),
    Field("confirmPhyOffset", "q", "5.x"),
))
FIELDS_V4 = LAYOUT.part("physicMsgTimestamp", "masterFlushedOffset").codec
FIELDS_V5 = LAYOUT.codec
RECOVERY_MARGIN_MS = 3000


@dataclass(slots=True)
class Checkpoint:
    """The checkpoint values."""

    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0

    @property
    def min_timestamp(self) -> int:
        """Recovery's safe time: min(physic, logics) - 3 s, at least 0."""
        return max(0, min(self.physic_msg_timestamp, self.logics_msg_timestamp) - RECOVERY_MARGIN_MS)

    @property
    def min_timestamp_index(self) -> int:
        """min(min_timestamp, index timestamp)."""
        return min(self.min_timestamp, self.index_msg_timestamp)

    def pack_v4(self) -> bytes:
        """The three 4.9.8 fields (24 bytes), as RocketMQ 4.9.8 writes them."""
        return FIELDS_V4.pack(self.physic_msg_timestamp, self.logics_msg_timestamp,
                              self.index_msg_timestamp)

    @classmethod
    def unpack(cls, buf: Buffer) -> Checkpoint:
        """Read all five fields (zero where a 4.9.8 store has none)."""
        if len(buf) < FIELDS_V5.size:
            buf = bytes(buf) + bytes(FIELDS_V5.size - len(buf))
        return cls(*FIELDS_V5.unpack_from(buf, 0))
