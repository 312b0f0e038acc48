"""Results of puts and gets, with RocketMQ's status names."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from rocketstore.format.message import StoredMessage


class PutStatus(enum.Enum):
    """RocketMQ's PutMessageStatus values that this store produces or relays."""

    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetStatus(enum.Enum):
    """RocketMQ's GetMessageStatus values."""

    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(frozen=True, slots=True)
class PutResult:
    """Where a message went."""

    status: PutStatus
    phy_offset: int
    queue_offset: int
    size: int
    msg_id: str
    store_timestamp: int
    topic: str = ""
    queue_id: int = 0

    @property
    def ok(self) -> bool:
        """True for PUT_OK."""
        return self.status is PutStatus.PUT_OK


@dataclass(frozen=True, slots=True)
class GetResult:
    """Messages read from one queue."""

    status: GetStatus
    next_offset: int
    min_offset: int
    max_offset: int
    messages: list[StoredMessage] = field(default_factory=list)
