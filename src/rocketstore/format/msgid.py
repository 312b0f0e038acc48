"""Offset message id: uppercase hex of store IP | int32 store port | int64 physical offset.

32 hex chars for an IPv4 store host, 56 for IPv6.
"""

from __future__ import annotations

import binascii
import struct
from functools import lru_cache

from rocketstore.errors import FormatError
from rocketstore.format.hosts import format_host

_PORT_OFFSET = struct.Struct(">iq")


def encode_msg_id(store_ip: bytes, store_port: int, phy_offset: int) -> str:
    """The offset msgId of the record at `phy_offset` written by store host ip:port."""
    return (store_ip + _PORT_OFFSET.pack(store_port, phy_offset)).hex().upper()


@lru_cache(maxsize=64)
def msg_id_prefix(store_ip: bytes, store_port: int) -> str:
    """The part of every msgId a store host writes that does not depend on the offset."""
    return (store_ip + _PORT_OFFSET.pack(store_port, 0)[:4]).hex().upper()


def msg_id_at(prefix: str, phy_offset: int) -> str:
    """`encode_msg_id` for a host whose `msg_id_prefix` is `prefix` (phy_offset >= 0)."""
    return f"{prefix}{phy_offset:016X}"


def decode_msg_id(msg_id: str) -> tuple[str, int]:
    """msgId -> (store host "ip:port", physical offset).

    Raises:
        FormatError: not 32 or 56 hex characters.
    """
    if len(msg_id) not in (32, 56):
        raise FormatError(f"message id {msg_id!r} must be 32 or 56 hex characters")
    try:
        raw = binascii.unhexlify(msg_id)
    except (binascii.Error, ValueError):
        raise FormatError(f"message id {msg_id!r} is not hexadecimal") from None
    ip_len = len(raw) - _PORT_OFFSET.size
    port, offset = _PORT_OFFSET.unpack_from(raw, ip_len)
    return format_host(raw[:ip_len], port), offset
