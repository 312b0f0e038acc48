"""rocketstore: Apache RocketMQ's broker message store in Python, byte-compatible with RocketMQ.

The public API: `MessageStore.open()` with a `StoreConfig`, `Message` in, `StoredMessage` out.
"""

from rocketstore.config import FlushMode, StoreConfig
from rocketstore.errors import (
    CorruptRecordError,
    FormatError,
    InvalidArgumentError,
    InvalidMessageError,
    MessageNotFoundError,
    RecoveryError,
    RocketStoreError,
    StoreClosedError,
    StoreError,
    StoreLayoutError,
    StoreLockedError,
    StoreReadOnlyError,
    StoreResourceError,
)
from rocketstore.format.consume_queue import CqUnit
from rocketstore.format.message import StoredMessage
from rocketstore.message import Message
from rocketstore.results import GetResult, GetStatus, PutResult, PutStatus
from rocketstore.services.recovery import RecoveryMode, RecoveryReport
from rocketstore.store import MessageStore
from rocketstore.store.pending_put import PendingPut

__version__ = "0.1.0"

__all__ = [
    "CorruptRecordError",
    "CqUnit",
    "FlushMode",
    "FormatError",
    "GetResult",
    "GetStatus",
    "InvalidArgumentError",
    "InvalidMessageError",
    "Message",
    "MessageNotFoundError",
    "MessageStore",
    "PendingPut",
    "PutResult",
    "PutStatus",
    "RecoveryError",
    "RecoveryMode",
    "RecoveryReport",
    "RocketStoreError",
    "StoreClosedError",
    "StoreConfig",
    "StoreError",
    "StoreLayoutError",
    "StoreResourceError",
    "StoreLockedError",
    "StoreReadOnlyError",
    "StoredMessage",
    "__version__",
]
