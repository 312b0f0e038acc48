"""Java's `String.hashCode` over UTF-16 code units, and the two hashes RocketMQ derives from it.

    h = 0; for each UTF-16 code unit c: h = 31*h + c  (mod 2**32, read as signed int32)

Tag codes are that hash sign-extended to int64; index key hashes are its absolute value, with
`Integer.MIN_VALUE` (whose absolute value overflows in Java) mapped to 0.
"""

from __future__ import annotations

import struct
from functools import lru_cache

_MASK32 = 0xFFFFFFFF
_SIGN32 = 0x80000000


def _units(text: str) -> bytes | tuple[int, ...]:
    if text.isascii():
        return text.encode("ascii")
    data = text.encode("utf-16-be", "surrogatepass")
    return struct.unpack(f">{len(data) // 2}H", data)


def java_hash(text: str) -> int:
    """Java `String.hashCode()` of `text` as a signed int32."""
    h = 0
    for unit in _units(text):
        h = (31 * h + unit) & _MASK32
    return h - 0x100000000 if h & _SIGN32 else h


def index_key_hash(key: str) -> int:
    """IndexFile key hash: abs(java_hash(key)), 0 for Integer.MIN_VALUE."""
    h = java_hash(key)
    return 0 if h == -_SIGN32 else abs(h)


@lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """Consume-queue tags code: java_hash(TAGS) sign-extended; 0 when TAGS is missing or empty."""
    if not tags:
        return 0
    return java_hash(tags)
