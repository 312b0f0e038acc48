"""The RocketMQ remoting protocol, sans-IO: bytes in, commands out, no sockets.

Layer: beside `storage`, above `format`. Nothing here opens a socket, starts a thread or reads a
clock; `rocketstore.broker` does that.
"""

from rocketstore.protocol.codes import (
    FLAG_ONEWAY,
    FLAG_RESPONSE,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
)
from rocketstore.protocol.command import CommandReader, RemotingCommand, decode_command, encode_command
from rocketstore.protocol.frame import NEED_DATA, Frame, FrameDecoder, encode_frame

__all__ = [
    "FLAG_ONEWAY",
    "FLAG_RESPONSE",
    "NEED_DATA",
    "CommandReader",
    "Frame",
    "FrameDecoder",
    "LanguageCode",
    "RemotingCommand",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "decode_command",
    "encode_command",
    "encode_frame",
]
