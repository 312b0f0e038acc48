"""Offset message id: the uppercase hex of the bytes below, the store host's address first, as RocketMQ's
`MessageDecoder.createMessageId` writes them: 16 bytes (32 hex characters) for an IPv4 store host, 28
(56) for an IPv6 one.

    pos  len  field                       meaning
    0    4    store host ip               the store host's IPv4 address
    4    4    store host port             int32
    8    8    commitlog offset            int64: the record's physical offset

    pos  len  field                       meaning
    0    16   store host ip               the store host's IPv6 address
    16   4    store host port             int32
    20   8    commitlog offset            int64: the record's physical offset
"""

from __future__ import annotations

import binascii
from functools import lru_cache

from rocketstore.errors import FormatError
from rocketstore.format.hosts import format_host
from rocketstore.format.layout import Field, Layout

_PORT = Field("store host port", "i", "int32")
_OFFSET = Field("commitlog offset", "q", "int64: the record's physical offset")

IPV4_LAYOUT = Layout("message id, IPv4 store host",
                     (Field("store host ip", "4s", "the store host's IPv4 address"), _PORT, _OFFSET))
IPV6_LAYOUT = Layout("message id, IPv6 store host",
                     (Field("store host ip", "16s", "the store host's IPv6 address"), _PORT, _OFFSET))
LAYOUTS = {layout.size: layout for layout in (IPV4_LAYOUT, IPV6_LAYOUT)}
"""Bytes of a message id -> its layout."""

_PORT_OFFSET = IPV4_LAYOUT.part("store host port")
"""What follows the address: the part of the two layouts they share."""
OFFSET_DIGITS = 2 * IPV4_LAYOUT.width("commitlog offset")
"""Hex digits of the physical offset that ends every message id."""


def encode_msg_id(store_ip: bytes, store_port: int, phy_offset: int) -> str:
    """The offset msgId of the record at `phy_offset` written by store host ip:port."""
    return (store_ip + _PORT_OFFSET.codec.pack(store_port, phy_offset)).hex().upper()


@lru_cache(maxsize=64)
def msg_id_prefix(store_ip: bytes, store_port: int) -> str:
    """The part of every msgId a store host writes that does not depend on the offset."""
    return encode_msg_id(store_ip, store_port, 0)[:-OFFSET_DIGITS]


def msg_id_at(prefix: str, phy_offset: int) -> str:
    """`encode_msg_id` for a host whose `msg_id_prefix` is `prefix` (phy_offset >= 0)."""
    return f"{prefix}{phy_offset:0{OFFSET_DIGITS}X}"


def decode_msg_id(msg_id: str) -> tuple[str, int]:
    """msgId -> (store host "ip:port", physical offset).

    Raises:
        FormatError: not 32 or 56 hex characters.
    """
    layout = LAYOUTS.get(len(msg_id) // 2) if len(msg_id) % 2 == 0 else None
    if layout is None:
        sizes = " or ".join(str(2 * size) for size in LAYOUTS)
        raise FormatError(f"message id {msg_id!r} must be {sizes} hex characters")
    try:
        raw = binascii.unhexlify(msg_id)
    except (binascii.Error, ValueError):
        raise FormatError(f"message id {msg_id!r} is not hexadecimal") from None
    ip, port, offset = layout.codec.unpack(raw)
    return format_host(ip, port), offset
