"""SysFlag: the bit flags of a commitlog record (int32 at byte 36)."""

from __future__ import annotations

import enum


class SysFlag(enum.IntFlag):
    """RocketMQ MessageSysFlag bits."""

    COMPRESSED = 0x1
    MULTI_TAGS = 0x2
    TRANSACTION_PREPARED = 0x4
    TRANSACTION_COMMIT = 0x8
    TRANSACTION_ROLLBACK = 0xC
    BORNHOST_V6 = 0x10
    STOREHOST_V6 = 0x20
    NEED_UNWRAP = 0x40
    INNER_BATCH = 0x80


TRANSACTION_MASK = 0xC
COMPRESSION_TYPE_SHIFT = 8
COMPRESSION_TYPE_MASK = 0x7


class TransactionType(enum.IntEnum):
    """Transaction type held in bits 2-3 of the sys flag."""

    NOT = 0x0
    PREPARED = 0x4
    COMMIT = 0x8
    ROLLBACK = 0xC


class CompressionType(enum.IntEnum):
    """Compression type held in bits 8-10 (0 from older clients means ZLIB)."""

    NONE_OR_ZLIB = 0
    LZ4 = 1
    ZSTD = 2
    ZLIB = 3


def transaction_type(sys_flag: int) -> TransactionType:
    """The transaction type encoded in `sys_flag`."""
    return TransactionType(sys_flag & TRANSACTION_MASK)


def compression_type(sys_flag: int) -> CompressionType:
    """The compression type encoded in `sys_flag`."""
    return CompressionType((sys_flag >> COMPRESSION_TYPE_SHIFT) & COMPRESSION_TYPE_MASK)


_QUEUED_TYPES = frozenset({int(TransactionType.NOT), int(TransactionType.COMMIT)})
_ROLLBACK = int(TransactionType.ROLLBACK)


def gets_queue_entry(sys_flag: int) -> bool:
    """True when a record of this sys flag is written to its consume queue (NOT and COMMIT)."""
    return (sys_flag & TRANSACTION_MASK) in _QUEUED_TYPES


def gets_index_entry(sys_flag: int) -> bool:
    """True when a record of this sys flag is indexed (everything except ROLLBACK)."""
    return (sys_flag & TRANSACTION_MASK) != _ROLLBACK
