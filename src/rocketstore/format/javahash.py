"""Java's `String.hashCode` over UTF-16 code units, and the two hashes RocketMQ derives from it.

    h = 0; for each UTF-16 code unit c: h = 31*h + c  (mod 2**32, read as signed int32)

Tag codes are that hash sign-extended to int64; index key hashes are its absolute value, with
`Integer.MIN_VALUE` (whose absolute value overflows in Java) mapped to 0.

Speed (a put with a key pays one hash, a query one): `java_hash` and `java_hash_concat` are the
compiled versions from `rocketstore._speedups` where it was built (see rocketstore.native), else their
pure-Python twins `java_hash_py` / `java_hash_concat_py`, which take two characters per step through a
65,536-entry table (`c0*31 + c1` for every byte pair). `java_hash_many` hashes a whole batch with numpy
when numpy is installed (`java_hash_many_py` is the same without it). The unit tests hold every pair
equal.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from rocketstore.format.optional_numpy import numpy_or_none
from rocketstore.native import speedups

_MASK32 = 0xFFFFFFFF
_SIGN32 = 0x80000000
_POW32 = 1 << 32
_MUL2 = 31 * 31


def _pair_table() -> list[int]:
    # A native-order 'H' read of the bytes (c0, c1) gives c0 | c1 << 8 on little-endian machines.
    if sys.byteorder == "little":
        return [(v & 0xFF) * 31 + (v >> 8) for v in range(0x10000)]
    return [(v >> 8) * 31 + (v & 0xFF) for v in range(0x10000)]


_PAIRS = _pair_table()


def _signed(h: int) -> int:
    h &= _MASK32
    return h - _POW32 if h & _SIGN32 else h


def java_hash_py(text: str) -> int:
    """Java `String.hashCode()` of `text` as a signed int32 (the pure-Python twin of `java_hash`)."""
    if not text.isascii():
        data = text.encode("utf-16-be", "surrogatepass")
        h = 0
        for unit in struct.unpack(f">{len(data) // 2}H", data):
            h = (31 * h + unit) & _MASK32
        return _signed(h)
    data = text.encode("ascii")
    if len(data) & 1:
        h = data[0]
        data = data[1:]
    else:
        h = 0
    table = _PAIRS
    for pair in memoryview(data).cast("H"):
        h = h * _MUL2 + table[pair]  # reduced once at the end: Python ints do not overflow
    return _signed(h)


def index_key_hash(key: str) -> int:
    """IndexFile key hash: abs(java_hash(key)), 0 for Integer.MIN_VALUE."""
    return index_hash_of_signed(java_hash(key))


def index_hash_of_signed(h: int) -> int:
    """The index key hash of a string whose `java_hash` is `h`."""
    return 0 if h == -_SIGN32 else abs(h)


@lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """Consume-queue tags code: java_hash(TAGS) sign-extended; 0 when TAGS is missing or empty."""
    if not tags:
        return 0
    return java_hash(tags)


@lru_cache(maxsize=1024)
def _prefix_state(prefix: str) -> tuple[int, int]:
    return java_hash_py(prefix) & _MASK32, len(prefix.encode("utf-16-be", "surrogatepass")) // 2


_POW31 = [pow(31, n, _POW32) for n in range(256)]


def java_hash_concat_py(prefix: str, text: str) -> int:
    """`java_hash(prefix + text)` with the prefix's hash cached (index keys share `topic#`); the
    pure-Python twin of `java_hash_concat`."""
    h_prefix = _prefix_state(prefix)[0]
    n = len(text) if text.isascii() else len(text.encode("utf-16-be", "surrogatepass")) // 2
    return _signed(h_prefix * (_POW31[n] if n < 256 else pow(31, n, _POW32)) + java_hash_py(text))


if speedups is not None:
    java_hash: Callable[[str], int] = speedups.java_hash
    java_hash_concat: Callable[[str, str], int] = speedups.java_hash_concat
else:
    java_hash = java_hash_py
    java_hash_concat = java_hash_concat_py


def java_hash_many_py(texts: Sequence[str]) -> list[int]:
    """`[java_hash(t) for t in texts]` (the pure-Python reference of `java_hash_many`)."""
    return [java_hash_py(t) for t in texts]


_NUMPY_MIN_BATCH = 16  # below this the numpy call overhead outweighs the per-key saving
_POWERS: object = None


def _powers(n: int) -> Any:  # a numpy array of 31**k mod 2**32, k < n (uint32)
    global _POWERS
    powers = _POWERS
    if powers is None or len(powers) < n:  # type: ignore[arg-type]
        size = max(n, 256)
        values = [1] * size
        for k in range(1, size):
            values[k] = values[k - 1] * 31 & _MASK32
        np = numpy_or_none()
        powers = _POWERS = np.array(values, dtype=np.uint32)
    return powers


def _java_hash_many_np(texts: Sequence[str]) -> list[int]:
    hashes: list[int] = _java_hash_array(texts).tolist()
    return hashes


def _java_hash_array(texts: Sequence[str]) -> Any:  # a numpy int32 array
    np = numpy_or_none()
    joined = "".join(texts)
    if joined.isascii():
        units = np.frombuffer(joined.encode("ascii"), dtype=np.uint8).astype(np.uint32)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))
    else:
        units = np.frombuffer(joined.encode("utf-16-be", "surrogatepass"), dtype=">u2").astype(np.uint32)
        lengths = np.fromiter((len(t.encode("utf-16-be", "surrogatepass")) // 2 for t in texts),
                              dtype=np.int64, count=len(texts))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    # unit j of a string of length L weighs 31**(L-1-j); uint32 products and sums wrap mod 2**32 as Java's do
    exponents = np.repeat(ends - 1, lengths) - np.arange(len(units), dtype=np.int64)
    weighted = units * _powers(int(lengths.max(initial=0)) + 1)[exponents]
    sums = np.zeros(len(texts), dtype=np.uint32)
    nonempty = lengths > 0
    if units.size:
        sums[nonempty] = np.add.reduceat(weighted, starts[nonempty], dtype=np.uint32)
    return sums.view(np.int32)


def java_hash_many(texts: Sequence[str]) -> list[int]:
    """`java_hash` of every text, in order; vectorised with numpy for batches when available."""
    if len(texts) < _NUMPY_MIN_BATCH or numpy_or_none() is None:
        return java_hash_many_py(texts)
    return _java_hash_many_np(texts)


def index_key_hashes(texts: Sequence[str]) -> list[int]:
    """`index_key_hash` of every text, in order (numpy for batches when available)."""
    np = numpy_or_none() if len(texts) >= _NUMPY_MIN_BATCH else None  # a short batch imports no numpy
    if np is None:
        return [index_hash_of_signed(java_hash(t)) for t in texts]
    signed = _java_hash_array(texts).astype(np.int64)
    hashes = np.abs(signed)
    hashes[signed == -_SIGN32] = 0
    result: list[int] = hashes.tolist()
    return result
