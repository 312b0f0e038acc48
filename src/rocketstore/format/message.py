"""CommitLog record: one message in the commitlog (big-endian, no padding).

    pos     len               field                       meaning
    0       4                 TOTALSIZE                   int32, the whole record including these 4 bytes
    4       4                 MAGICCODE                   0xDAA320A7 v1 / 0xDAA320AB v2 (5.x) / 0xCBD43194 blank
    8       4                 BODYCRC                     crc32(body) & 0x7FFFFFFF
    12      4                 QUEUEID                     int32
    16      4                 FLAG                        int32
    20      8                 QUEUEOFFSET                 int64
    28      8                 PHYSICALOFFSET              int64
    36      4                 SYSFLAG                     int32 (bits 0x10 / 0x20: IPv6 born / store host)
    40      8                 BORNTIMESTAMP               int64 ms
    48      4 / 16            BORNHOST ip                 4 bytes IPv4 / 16 bytes IPv6
    52+b    4                 BORNHOST port               int32
    56+b    8                 STORETIMESTAMP              int64 ms
    64+b    4 / 16            STOREHOST ip                as BORNHOST's
    68+b+s  4                 STOREHOST port              int32
    72+b+s  4                 RECONSUMETIMES              int32
    76+b+s  8                 PREPAREDTRANSACTIONOFFSET   int64
    84+b+s  4                 BODYLENGTH                  bytes of BODY
    88+b+s  BODYLENGTH        BODY                        the body as sent (possibly compressed: SYSFLAG bit 0x1)
    ...     1 / 2             TOPICLENGTH                 bytes of TOPIC (v1 / v2)
    ...     TOPICLENGTH       TOPIC                       UTF-8, at most 127 bytes in a v1 record
    ...     2                 PROPERTIESLENGTH            bytes of PROPERTIES
    ...     PROPERTIESLENGTH  PROPERTIES                  UTF-8: name 0x01 value 0x02, per property

b and s are 0 for an IPv4 host and 12 for an IPv6 one (SYSFLAG bits 0x10 / 0x20); v1 / v2 are the records
with magic MAGIC_V1 / MAGIC_V2. The table is drawn from `fixed_layout` and `VARIABLE_FIELDS`
(`format.layout_docs`).

A blank (end-of-file) record is only TOTALSIZE (= bytes left in the file) and the blank magic.
Decoding has three outcomes: a `StoredMessage`, a sentinel (`NEED_DATA`: the buffer ends inside the
record; `END_OF_FILE`: a blank record), or `CorruptRecordError`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Final

from rocketstore._types import Buffer
from rocketstore.errors import CorruptRecordError
from rocketstore.format import properties as props_codec
from rocketstore.format.hosts import IPV4_HOST_SIZE, IPV6_HOST_SIZE, PORT, format_host
from rocketstore.format.layout import Field, Layout, Variable
from rocketstore.format.msgid import encode_msg_id
from rocketstore.format.sysflag import SysFlag
from rocketstore.native import speedups

MAGIC_V1: Final = 0xDAA320A7  # Java: -626843481
MAGIC_V2: Final = 0xDAA320AB  # Java: -626843477 (5.x, 2-byte topic length)
BLANK_MAGIC: Final = 0xCBD43194  # Java: -875286124
CRC_MASK: Final = 0x7FFFFFFF

_HEAD_FIELDS = (
    Field("TOTALSIZE", "i", "int32, the whole record including these 4 bytes"),
    Field("MAGICCODE", "I", "0xDAA320A7 v1 / 0xDAA320AB v2 (5.x) / 0xCBD43194 blank"),
    Field("BODYCRC", "i", "crc32(body) & 0x7FFFFFFF"),
    Field("QUEUEID", "i", "int32"),
    Field("FLAG", "i", "int32"),
    Field("QUEUEOFFSET", "q", "int64"),
    Field("PHYSICALOFFSET", "q", "int64"),
    Field("SYSFLAG", "i", "int32 (bits 0x10 / 0x20: IPv6 born / store host)"),
    Field("BORNTIMESTAMP", "q", "int64 ms"),
)
FIXED_HEAD_LAYOUT = Layout("commitlog record, up to the born host", _HEAD_FIELDS)
PREFIX_LAYOUT = FIXED_HEAD_LAYOUT.part("TOTALSIZE", "BODYCRC")
PREFIX = PREFIX_LAYOUT.codec
PREFIX_SIZE = PREFIX.size  # 8: also the smallest blank record (END_FILE_MIN_BLANK_LENGTH)
BLANK = PREFIX
FIXED_HEAD = FIXED_HEAD_LAYOUT.codec
IP_WIDTHS: Final = (IPV4_HOST_SIZE - PORT.size, IPV6_HOST_SIZE - PORT.size)
"""Bytes of a host's IP: IPv4, IPv6 (sys flag bit BORNHOST_V6 / STOREHOST_V6)."""
_IPV4, _IPV6 = IP_WIDTHS


@lru_cache(maxsize=4)
def fixed_layout(born_ip_len: int, store_ip_len: int) -> Layout:
    """The record's fixed part, TOTALSIZE through PREPAREDTRANSACTIONOFFSET, for the given IP lengths
    (`IP_WIDTHS`); `VARIABLE_FIELDS` follow it."""
    hosts = "/".join("IPv4" if n == IP_WIDTHS[0] else "IPv6" for n in (born_ip_len, store_ip_len))
    return Layout(f"commitlog record, {hosts} hosts", _HEAD_FIELDS + (
        Field("BORNHOST ip", f"{born_ip_len}s", "4 bytes IPv4 / 16 bytes IPv6"),
        Field("BORNHOST port", "i", "int32"),
        Field("STORETIMESTAMP", "q", "int64 ms"),
        Field("STOREHOST ip", f"{store_ip_len}s", "as BORNHOST's"),
        Field("STOREHOST port", "i", "int32"),
        Field("RECONSUMETIMES", "i", "int32"),
        Field("PREPAREDTRANSACTIONOFFSET", "q", "int64"),
    ))


BODY = Variable("BODY", "i", "the body as sent (possibly compressed: SYSFLAG bit 0x1)")
TOPIC_V1 = Variable("TOPIC", "b", "UTF-8, at most 127 bytes in a v1 record")
TOPIC_V2 = Variable("TOPIC", "h", TOPIC_V1.doc)
PROPERTIES = Variable("PROPERTIES", "h", "UTF-8: name 0x01 value 0x02, per property")
VARIABLE_FIELDS: Final = {MAGIC_V1: (BODY, TOPIC_V1, PROPERTIES), MAGIC_V2: (BODY, TOPIC_V2, PROPERTIES)}
"""What follows the fixed part, by magic: each piece its byte count then its bytes."""


@lru_cache(maxsize=4)
def header_layout(born_ip_len: int, store_ip_len: int) -> Layout:
    """The record from TOTALSIZE through BODYLENGTH (the fixed part and BODY's count)."""
    fixed = fixed_layout(born_ip_len, store_ip_len)
    return Layout(fixed.title, fixed.fields + (BODY.length_field(),))


QUEUE_ID_POS = FIXED_HEAD_LAYOUT.position("QUEUEID")
FLAG_POS = FIXED_HEAD_LAYOUT.position("FLAG")
QUEUE_OFFSET_POS = FIXED_HEAD_LAYOUT.position("QUEUEOFFSET")
PHY_OFFSET_POS = FIXED_HEAD_LAYOUT.position("PHYSICALOFFSET")
SYS_FLAG_POS = FIXED_HEAD_LAYOUT.position("SYSFLAG")
BORN_HOST_POS = FIXED_HEAD.size
TOPIC_LENGTH = {MAGIC_V1: struct.Struct(">" + TOPIC_V1.length), MAGIC_V2: struct.Struct(">" + TOPIC_V2.length)}
PROPERTIES_LENGTH = struct.Struct(">" + PROPERTIES.length)
MAX_TOPIC_BYTES_V1 = 127
SYS_FLAG = FIXED_HEAD_LAYOUT.codec_of("SYSFLAG")
BODY_LENGTH = struct.Struct(">" + BODY.length)
BODY_CRC = FIXED_HEAD_LAYOUT.codec_of("BODYCRC")
BODY_CRC_POS = FIXED_HEAD_LAYOUT.position("BODYCRC")
PHY_OFFSET = FIXED_HEAD_LAYOUT.codec_of("PHYSICALOFFSET")
STORE_TIMESTAMP = fixed_layout(*IP_WIDTHS[:1] * 2).codec_of("STORETIMESTAMP")
_PHY_OFFSET_SYS_FLAG = FIXED_HEAD_LAYOUT.part("PHYSICALOFFSET", "BORNTIMESTAMP").codec  # one unpack for both
_BORN_V6: Final = int(SysFlag.BORNHOST_V6)
_STORE_V6: Final = int(SysFlag.STOREHOST_V6)
_HOST_BITS: Final = _BORN_V6 | _STORE_V6


@lru_cache(maxsize=4)
def header_struct(born_ip_len: int, store_ip_len: int) -> struct.Struct:
    """The record header from TOTALSIZE through BODYLENGTH for the given IP lengths (4 or 16)."""
    return header_layout(born_ip_len, store_ip_len).codec


def record_rows() -> list[tuple[str, str, str, str]]:
    """(pos, len, field, meaning) of the whole record, for `layout.text_table` and `layout.markdown_table`:
    positions past an IP as `+b` / `+s` (what an IPv6 born / store host adds), widths that depend on the
    host or the version as `IPv4 / IPv6` or `v1 / v2`, the variable fields' lengths by the field that
    counts them."""
    v4, v6 = IP_WIDTHS
    shapes = {(born, store): header_layout(born, store) for born in IP_WIDTHS for store in IP_WIDTHS}
    plain = shapes[v4, v4]
    rows = []
    for f in plain.fields:
        at = plain.position(f.name)
        pos = str(at) + "+b" * (shapes[v6, v4].position(f.name) > at) + "+s" * (shapes[v4, v6].position(f.name) > at)
        widths = dict.fromkeys(str(layout.width(f.name)) for layout in (plain, shapes[v6, v6]))
        rows.append((pos, " / ".join(widths), f.name, f.doc))
    rows.append((f"{plain.size}+b+s", BODY.length_field().name, BODY.name, BODY.doc))
    v1, v2 = VARIABLE_FIELDS[MAGIC_V1][1:], VARIABLE_FIELDS[MAGIC_V2][1:]
    for one, two in zip(v1, v2, strict=True):
        count = one.length_field()
        widths = dict.fromkeys((str(one.length_width), str(two.length_width)))
        doc = count.doc + (" (v1 / v2)" if len(widths) > 1 else "")
        rows += [("...", " / ".join(widths), count.name, doc), ("...", count.name, one.name, one.doc)]
    return rows


def record_legend() -> str:
    """What `record_rows` abbreviates."""
    v4, v6 = IP_WIDTHS
    return (f"b, s: the bytes an IPv6 born / store host adds ({v6 - v4}; SYSFLAG bit {_BORN_V6:#x} / {_STORE_V6:#x}), "
            f"0 for IPv4. v1 / v2: a record with magic {MAGIC_V1:#X} / {MAGIC_V2:#X}.").replace("0X", "0x")


def _ip_lengths(sys_flag: int) -> tuple[int, int]:
    return _IPV6 if sys_flag & _BORN_V6 else _IPV4, _IPV6 if sys_flag & _STORE_V6 else _IPV4


MIN_RECORD_SIZE = header_struct(4, 4).size + 1 + PROPERTIES_LENGTH.size  # 91
# header layout by the sys flag's two IPv6 bits (the decoder's lookup)
_HEADER_BY_HOST_BITS = {bits: header_struct(*_ip_lengths(bits)) for bits in (0, _BORN_V6, _STORE_V6, _HOST_BITS)}


def store_timestamp_pos(sys_flag: int) -> int:
    """Position of STORETIMESTAMP inside a record with this sys flag (56 or 68)."""
    born_ip_len, _ = _ip_lengths(sys_flag)
    return BORN_HOST_POS + born_ip_len + PORT.size


STORE_TIMESTAMP_HEAD = store_timestamp_pos(_BORN_V6) + STORE_TIMESTAMP.size
"""Bytes of a record's start that hold its STORETIMESTAMP whatever its sys flag (`store_timestamp_in`)."""


def store_timestamp_in(head: Buffer) -> int:
    """STORETIMESTAMP of the record whose first `STORE_TIMESTAMP_HEAD` bytes (or more) are `head`."""
    (sys_flag,) = SYS_FLAG.unpack_from(head, SYS_FLAG_POS)
    (timestamp,) = STORE_TIMESTAMP.unpack_from(head, store_timestamp_pos(sys_flag))
    return int(timestamp)


def encoded_size(topic_len: int, body_len: int, properties_len: int, *, born_v6: bool = False,
                 store_v6: bool = False, version: int = 1) -> int:
    """TOTALSIZE of a record with these byte lengths."""
    head = header_struct(IP_WIDTHS[born_v6], IP_WIDTHS[store_v6]).size
    topic_field = TOPIC_LENGTH[MAGIC_V1 if version == 1 else MAGIC_V2].size
    return head + body_len + topic_field + topic_len + PROPERTIES_LENGTH.size + properties_len


crc32: Callable[..., int] = zlib.crc32 if speedups is None else speedups.crc32
"""zlib.crc32, or its compiled twin (carry-less multiplication where the CPU has it)."""


def body_crc(body: Buffer) -> int:
    """BODYCRC of a body: CRC-32 with the top bit cleared (0 for an empty body)."""
    return crc32(body) & CRC_MASK if body else 0


def encode_message(*, topic: bytes, body: bytes, properties: bytes, queue_id: int, flag: int,
                   queue_offset: int, phy_offset: int, sys_flag: int, born_timestamp: int,
                   born_ip: bytes, born_port: int, store_timestamp: int, store_ip: bytes,
                   store_port: int, reconsume_times: int = 0, prepared_transaction_offset: int = 0,
                   version: int = 1, crc: int | None = None) -> bytes:
    """Encode one record. The IPv6 sys-flag bits are set from the IP lengths.

    Raises:
        ValueError: topic or properties too long for their length fields.
    """
    magic = MAGIC_V1 if version == 1 else MAGIC_V2
    tail = record_tail(topic, properties, version=version)
    head = header_struct(len(born_ip), len(store_ip))
    total = head.size + len(body) + len(tail)
    return head.pack(
        total, magic, body_crc(body) if crc is None else crc, queue_id, flag, queue_offset, phy_offset,
        record_sys_flag(sys_flag, born_ip, store_ip), born_timestamp, born_ip, born_port, store_timestamp,
        store_ip, store_port, reconsume_times, prepared_transaction_offset, len(body),
    ) + body + tail


def topic_field(topic: bytes, *, version: int = 1) -> bytes:
    """TOPICLENGTH + TOPIC.

    Raises:
        ValueError: a topic too long for its length field.
    """
    if version == 1 and len(topic) > MAX_TOPIC_BYTES_V1:
        raise ValueError(f"topic of {len(topic)} bytes does not fit a v1 record (max 127)")
    return TOPIC_LENGTH[MAGIC_V1 if version == 1 else MAGIC_V2].pack(len(topic)) + topic


def record_tail(topic: bytes, properties: bytes, *, version: int = 1) -> bytes:
    """The bytes after BODY: TOPICLENGTH, TOPIC, PROPERTIESLENGTH, PROPERTIES.

    Raises:
        ValueError: topic or properties too long for their length fields.
    """
    magic = MAGIC_V1 if version == 1 else MAGIC_V2
    if version == 1 and len(topic) > MAX_TOPIC_BYTES_V1:
        raise ValueError(f"topic of {len(topic)} bytes does not fit a v1 record (max 127)")
    if len(properties) > props_codec.MAX_PROPERTIES_LENGTH:
        raise ValueError(f"properties of {len(properties)} bytes exceed 32767")
    return TOPIC_LENGTH[magic].pack(len(topic)) + topic + PROPERTIES_LENGTH.pack(len(properties)) + properties


def record_sys_flag(sys_flag: int, born_ip: bytes, store_ip: bytes) -> int:
    """SYSFLAG as stored: the caller's flag with the IPv6 bits set from the IP lengths.

    Plain int arithmetic as Java's: every other bit (compression type in bits 8-10 too) is kept.
    """
    flag = int(sys_flag) & ~(_BORN_V6 | _STORE_V6)
    if len(born_ip) == IP_WIDTHS[1]:
        flag |= _BORN_V6
    if len(store_ip) == IP_WIDTHS[1]:
        flag |= _STORE_V6
    return flag


def encode_blank(remaining: int) -> bytes:
    """The 8-byte blank record closing a file with `remaining` bytes left."""
    return BLANK.pack(remaining, BLANK_MAGIC)


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self) -> str:
        return self._name


NEED_DATA: Final = _Sentinel("NEED_DATA")
"""The buffer ends inside the record: give more bytes."""
END_OF_FILE: Final = _Sentinel("END_OF_FILE")
"""A blank record: the rest of this commitlog file holds no messages."""

DecodeResult = Any  # StoredMessage | NEED_DATA | END_OF_FILE


_TAGS: Final = props_codec.TAGS
_KEYS: Final = props_codec.KEYS


def properties_at_py(raw: bytes, start: int) -> dict[str, str]:
    """The properties of a record whose properties text starts at `start` (UTF-8, bad bytes replaced);
    the pure-Python twin of `properties_at`."""
    return props_codec.decode_properties(raw[start:].decode("utf-8", "replace")) if 0 <= start < len(raw) else {}


if speedups is not None:
    _properties_at: Callable[[bytes, int], dict[str, str]] = speedups.properties_at
else:
    _properties_at = properties_at_py


_AT = header_layout(*IP_WIDTHS[:1] * 2).index  # a field's index in the tuple header_struct(...).unpack gives


def _header_field(index: int, doc: str) -> Any:
    def get(self: StoredMessage) -> Any:
        header = self._header
        if header is None:
            header = self._header = _HEADER_BY_HOST_BITS[self.sys_flag & _HOST_BITS].unpack_from(self.raw)
        return header[index]

    return property(get, doc=doc)


class _MessageFields:
    """The stored fields of a decoded record and its most read ones, body, tags and keys (the pure-Python
    twin of rocketstore._speedups.MessageBase, which `build_message` fills without a Python call per
    field and whose getters answer without one)."""

    __slots__ = (
        "raw", "magic", "size", "phy_offset", "sys_flag", "topic", "_header", "_properties_start",
        "_body_start", "_body_end", "_properties",
    )
    raw: bytes
    _header: tuple[Any, ...] | None
    _properties_start: int
    _body_start: int
    _body_end: int
    _properties: dict[str, str] | None

    @property
    def body(self) -> bytes:
        """The body as stored (possibly compressed by the producer)."""
        return self.raw[self._body_start:self._body_end]

    @property
    def tags(self) -> str | None:
        """The TAGS property, None when absent."""
        properties = self._properties
        if properties is None:
            properties = self._properties = _properties_at(self.raw, self._properties_start)
        return properties.get(_TAGS)

    @property
    def keys(self) -> list[str]:
        """The non-empty tokens of the KEYS property."""
        properties = self._properties
        if properties is None:
            properties = self._properties = _properties_at(self.raw, self._properties_start)
        return props_codec.split_keys(properties.get(_KEYS))

    def carries_key(self, key: str) -> bool:
        """Whether `key` is a token of the KEYS property or the UNIQ_KEY property."""
        if not isinstance(key, str):
            raise TypeError(f"carries_key: key must be a str, got {type(key).__name__}")
        properties = self._properties
        if properties is None:
            properties = self._properties = _properties_at(self.raw, self._properties_start)
        return key in props_codec.split_keys(properties.get(_KEYS)) or properties.get(props_codec.UNIQ_KEY) == key


if TYPE_CHECKING:
    _MessageBase = _MessageFields  # the compiled base has the same fields and getters
else:
    _MessageBase = _MessageFields if speedups is None else speedups.MessageBase


class StoredMessage(_MessageBase):
    """One decoded commitlog record.

    Decoding checks the record's lengths and keeps its bytes with the topic, sys flag and physical
    offset; the other header fields are unpacked together on the first access to any of them, the
    properties on the first access to them (a reader that only wants bodies and keys pays for nothing
    else). Every field stays reachable as a plain attribute.
    """

    __slots__ = ()  # the fields live in the base

    raw: bytes
    magic: int
    size: int
    phy_offset: int
    sys_flag: int
    topic: str

    body_crc = _header_field(_AT("BODYCRC"), "BODYCRC as stored.")
    queue_id = _header_field(_AT("QUEUEID"), "Queue id.")
    flag = _header_field(_AT("FLAG"), "Producer flag.")
    queue_offset = _header_field(_AT("QUEUEOFFSET"), "Offset in the consume queue.")
    born_timestamp = _header_field(_AT("BORNTIMESTAMP"), "Producer time, ms.")
    store_timestamp = _header_field(_AT("STORETIMESTAMP"), "Store time, ms.")
    reconsume_times = _header_field(_AT("RECONSUMETIMES"), "Redelivery count.")
    prepared_transaction_offset = _header_field(_AT("PREPAREDTRANSACTIONOFFSET"),
                                                "Half message offset of a COMMIT/ROLLBACK record.")
    _born_ip = _header_field(_AT("BORNHOST ip"), "Born host IP bytes.")
    _born_port = _header_field(_AT("BORNHOST port"), "Born host port.")
    _store_ip = _header_field(_AT("STOREHOST ip"), "Store host IP bytes.")
    _store_port = _header_field(_AT("STOREHOST port"), "Store host port.")

    @property
    def properties_string(self) -> str:
        """The stored properties string (decoded on access)."""
        start = self._properties_start
        return self.raw[start:].decode("utf-8", "replace") if start < len(self.raw) else ""

    @property
    def properties(self) -> dict[str, str]:
        """Parsed properties, in stored order."""
        properties = self._properties
        if properties is None:
            properties = self._properties = _properties_at(self.raw, self._properties_start)
        return properties

    @property
    def uniq_key(self) -> str | None:
        """The client's unique id (UNIQ_KEY property), None when absent."""
        return self.properties.get(props_codec.UNIQ_KEY)

    @property
    def born_host(self) -> str:
        """Producer address `"ip:port"`."""
        return format_host(self._born_ip, self._born_port)

    @property
    def store_host(self) -> str:
        """Broker address `"ip:port"`."""
        return format_host(self._store_ip, self._store_port)

    @property
    def msg_id(self) -> str:
        """Offset message id (store host + physical offset)."""
        return encode_msg_id(self._store_ip, self._store_port, self.phy_offset)

    def to_dict(self) -> dict[str, Any]:
        """Every public field as a plain dict (body as bytes)."""
        return {name: getattr(self, name) for name in STORED_MESSAGE_FIELDS}

    def __reduce__(self) -> tuple[Callable[[bytes], StoredMessage], tuple[bytes]]:
        return decode_record, (self.raw,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoredMessage) and other.raw == self.raw

    def __hash__(self) -> int:
        return hash(self.raw)

    def __repr__(self) -> str:
        return (f"StoredMessage(topic={self.topic!r}, queue_id={self.queue_id}, "
                f"queue_offset={self.queue_offset}, phy_offset={self.phy_offset}, size={self.size})")


STORED_MESSAGE_FIELDS = (
    "topic", "queue_id", "queue_offset", "phy_offset", "size", "body", "body_crc", "flag", "sys_flag",
    "born_timestamp", "born_host", "store_timestamp", "store_host", "reconsume_times",
    "prepared_transaction_offset", "properties", "tags", "keys", "uniq_key", "msg_id",
)


def peek_prefix(buf: Buffer, pos: int = 0) -> tuple[int, int] | None:
    """(TOTALSIZE, MAGIC) at `pos`, or None when fewer than 8 bytes remain."""
    if len(buf) - pos < PREFIX_SIZE:
        return None
    total, magic = PREFIX.unpack_from(buf, pos)
    return total, magic


def decode_message(buf: Buffer, pos: int = 0, *, check_crc: bool = False) -> DecodeResult:
    """Decode the record starting at `pos`.

    Returns:
        a `StoredMessage`, `NEED_DATA` (buffer ends inside the record) or `END_OF_FILE` (blank).

    Raises:
        CorruptRecordError: bad magic, impossible lengths, or (with check_crc) a body CRC mismatch.
    """
    available = len(buf) - pos
    if available < PREFIX_SIZE:
        return NEED_DATA
    total, magic = PREFIX.unpack_from(buf, pos)
    if magic == BLANK_MAGIC:
        return END_OF_FILE
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        reason = "unwritten (zero) bytes" if total == 0 and magic == 0 else f"bad magic 0x{magic:08X}"
        raise CorruptRecordError(pos, reason)
    if total < MIN_RECORD_SIZE:
        raise CorruptRecordError(pos, f"total size {total} below the minimum {MIN_RECORD_SIZE}")
    if available < total:
        return NEED_DATA
    raw = buf if pos == 0 and total == available and type(buf) is bytes else bytes(buf[pos:pos + total])
    try:
        msg = build_message(StoredMessage, raw, magic)
    except ValueError as exc:
        raise CorruptRecordError(pos, str(exc)) from None
    if check_crc and msg._body_end > msg._body_start and crc32(raw[msg._body_start:msg._body_end]) \
            & CRC_MASK != BODY_CRC.unpack_from(raw, BODY_CRC_POS)[0]:
        raise CorruptRecordError(pos, "body CRC mismatch")
    return msg


def decode_record(raw: bytes, *, check_crc: bool = False) -> StoredMessage:
    """Decode a buffer that holds exactly one whole message record.

    Raises:
        CorruptRecordError: not exactly one valid message record.
    """
    result = decode_message(raw, 0, check_crc=check_crc)
    if not isinstance(result, StoredMessage) or result.size != len(raw):
        raise CorruptRecordError(0, "buffer does not hold exactly one message record")
    return result


def record_layout(raw: bytes, magic: int) -> tuple[int, int, int, int, str, int]:
    """(phy_offset, sys_flag, body_start, body_end, topic, props_start) of a buffer holding exactly one
    record whose magic (v1 or v2) and minimum size were checked.

    Raises:
        ValueError: the lengths do not add up (the message says which).
    """
    total = len(raw)
    phy_offset, sys_flag = _PHY_OFFSET_SYS_FLAG.unpack_from(raw, PHY_OFFSET_POS)
    body_start = _HEADER_BY_HOST_BITS[sys_flag & _HOST_BITS].size
    if total < body_start:
        raise ValueError(f"total size {total} shorter than the header")
    body_len = BODY_LENGTH.unpack_from(raw, body_start - BODY_LENGTH.size)[0]
    body_end = body_start + body_len
    topic_field = 1 if magic == MAGIC_V1 else 2
    if body_len < 0 or body_end + topic_field > total:
        raise ValueError(f"body length {body_len} does not fit total size {total}")
    if topic_field == 1:
        topic_len = raw[body_end]
        topic_len = topic_len - 256 if topic_len > 127 else topic_len  # int8
    else:
        topic_len = TOPIC_LENGTH[MAGIC_V2].unpack_from(raw, body_end)[0]
    topic_start = body_end + topic_field
    props_len_pos = topic_start + topic_len
    if topic_len < 0 or props_len_pos + PROPERTIES_LENGTH.size > total:
        raise ValueError(f"topic length {topic_len} does not fit total size {total}")
    props_len = PROPERTIES_LENGTH.unpack_from(raw, props_len_pos)[0]
    props_start = props_len_pos + PROPERTIES_LENGTH.size
    expected = props_start + max(props_len, 0)
    if expected != total:
        raise ValueError(f"lengths add up to {expected}, total size says {total}")
    topic = raw[topic_start:props_len_pos].decode("utf-8", "replace")
    return phy_offset, sys_flag, body_start, body_end, topic, props_start


def build_message_py(cls: type[StoredMessage], raw: bytes, magic: int) -> StoredMessage:
    """A `cls` for bytes holding exactly one record whose magic (v1 or v2) and minimum size were
    checked; the pure-Python twin of `build_message`.

    Raises:
        ValueError: the lengths do not add up (the message says which).
    """
    phy_offset, sys_flag, body_start, body_end, topic, props_start = record_layout(raw, magic)
    msg = cls.__new__(cls)
    msg.raw = raw
    msg.magic = magic
    msg.size = len(raw)
    msg.phy_offset = phy_offset
    msg.sys_flag = sys_flag
    msg.topic = topic
    msg._header = None
    msg._properties_start = props_start  # == len(raw) when there are none
    msg._body_start = body_start
    msg._body_end = body_end
    msg._properties = None
    return msg


if speedups is not None:
    build_message: Callable[[type[StoredMessage], bytes, int], StoredMessage] = speedups.build_message
else:
    build_message = build_message_py


def record_at_py(cls: type[StoredMessage], buf: Buffer, pos: int, limit: int, phy_offset: int
                 ) -> StoredMessage | None:
    """The record whose bytes start at `pos` of `buf` and end by `limit`, as a `cls`, when it is a
    whole, well-formed record whose PHYSICALOFFSET is `phy_offset`; None for anything else (the caller
    tells why). The pure-Python twin of `record_at`."""
    limit = min(limit, len(buf))
    if pos < 0 or pos > limit - PREFIX_SIZE:
        return None
    total, magic = PREFIX.unpack_from(buf, pos)
    if (magic != MAGIC_V1 and magic != MAGIC_V2) or total < MIN_RECORD_SIZE or total > limit - pos \
            or _PHY_OFFSET_SYS_FLAG.unpack_from(buf, pos + PHY_OFFSET_POS)[0] != phy_offset:
        return None
    try:
        return build_message_py(cls, bytes(buf[pos:pos + total]), magic)
    except ValueError:
        return None


record_at: Callable[[type[StoredMessage], Buffer, int, int, int], StoredMessage | None] = \
    record_at_py if speedups is None else speedups.record_at
