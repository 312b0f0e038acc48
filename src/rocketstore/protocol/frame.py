"""Remoting frames: the length-prefixed envelope around every RocketMQ command (sans-IO).

    pos  len  field
    0    4    frame length L   int32 = 4 + header length + body length (this field excluded)
    4    1    serialize type   0 = JSON, 1 = ROCKETMQ binary
    5    3    header length H  unsigned 24-bit
    8    H    header           JSON text or RocketMQ binary header
    8+H  L-4-H  body           opaque bytes                                  all big-endian

`FrameDecoder` takes bytes as they arrive and hands out whole `Frame`s; it never touches a socket.
A malformed or oversize frame raises `RemoteProtocolError` and poisons the decoder: a stream
cannot be resynchronised after a bad length, so the caller closes the connection.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from rocketstore.errors import LocalProtocolError, RemoteProtocolError
from rocketstore.protocol.codes import SerializeType

PREFIX = struct.Struct(
    ">i"  # frame length: everything after this field
    "I"  # serialize type (high byte) | header length (low 3 bytes)
)
PREFIX_SIZE = PREFIX.size  # 8
LENGTH_FIELD_SIZE = struct.calcsize(">i")  # 4
HEADER_LENGTH_MASK = 0x00FFFFFF
SERIALIZE_TYPE_SHIFT = 24
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024  # RocketMQ's default (com.rocketmq.remoting.frameMaxLength)
_SERIALIZE_TYPES = frozenset(int(t) for t in SerializeType)


class _NeedData:
    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA = _NeedData()
"""Returned by `FrameDecoder.next_frame` when the buffer ends inside a frame."""


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame as it travels: the header still encoded, the body as bytes."""

    serialize_type: int
    header: bytes
    body: bytes


def encode_frame(frame: Frame) -> bytes:
    """Bytes of one frame.

    Raises:
        LocalProtocolError: header longer than 24 bits can say, or an unknown serialize type.
    """
    if len(frame.header) > HEADER_LENGTH_MASK:
        raise LocalProtocolError(f"header of {len(frame.header)} bytes does not fit 24 bits")
    if frame.serialize_type not in _SERIALIZE_TYPES:
        raise LocalProtocolError(f"unknown serialize type {frame.serialize_type}")
    length = LENGTH_FIELD_SIZE + len(frame.header) + len(frame.body)
    word = (frame.serialize_type << SERIALIZE_TYPE_SHIFT) | len(frame.header)
    return b"".join((PREFIX.pack(length, word), frame.header, frame.body))


class FrameDecoder:
    """Incremental frame reader: `feed` bytes, then call `next_frame` until it says NEED_DATA.

    Args:
        max_frame_size: largest accepted frame length (the first int32); longer frames are refused
            before their bytes are buffered.
    """

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        self.max_frame_size = max_frame_size
        self._buf = bytearray()
        self._error: RemoteProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buf)

    def feed(self, data: bytes) -> None:
        """Append received bytes."""
        self._buf += data

    def next_frame(self) -> Frame | _NeedData:
        """The next whole frame, or NEED_DATA.

        Raises:
            RemoteProtocolError: the buffered bytes cannot start a valid frame (negative or oversize
                length, header longer than the frame, unknown serialize type). Every later call
                raises the same error.
        """
        if self._error is not None:
            raise self._error
        if len(self._buf) < PREFIX_SIZE:
            if len(self._buf) >= LENGTH_FIELD_SIZE:
                self._check_length(struct.unpack_from(">i", self._buf)[0])
            return NEED_DATA
        length, word = PREFIX.unpack_from(self._buf)
        self._check_length(length)
        serialize_type = word >> SERIALIZE_TYPE_SHIFT
        header_length = word & HEADER_LENGTH_MASK
        if serialize_type not in _SERIALIZE_TYPES:
            self._fail(f"unknown serialize type {serialize_type}")
        if header_length > length - LENGTH_FIELD_SIZE:
            self._fail(f"header length {header_length} exceeds frame length {length}")
        end = LENGTH_FIELD_SIZE + length
        if len(self._buf) < end:
            return NEED_DATA
        header_end = PREFIX_SIZE + header_length
        frame = Frame(serialize_type, bytes(self._buf[PREFIX_SIZE:header_end]), bytes(self._buf[header_end:end]))
        del self._buf[:end]
        return frame

    def _check_length(self, length: int) -> None:
        if length < LENGTH_FIELD_SIZE:
            self._fail(f"frame length {length} is smaller than {LENGTH_FIELD_SIZE}")
        if length > self.max_frame_size:
            self._fail(f"frame length {length} exceeds the limit of {self.max_frame_size}")

    def _fail(self, reason: str) -> None:
        self._error = RemoteProtocolError(reason)
        self._buf.clear()
        raise self._error
