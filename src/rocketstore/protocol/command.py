"""RemotingCommand: the one message type of the RocketMQ remoting protocol, and its header codecs.

A command is a header (code, language, version, opaque, flag, remark, extFields) plus an opaque
body. Requests carry a request code, responses a response code, the same `opaque` and flag bit 0.
Two header encodings exist; both are read, JSON is written unless the command says otherwise:

JSON (serialize type 0): ``{"code":10,"language":"CPP","version":0,"opaque":3,"flag":0,
"remark":"...","extFields":{"topic":"T",...}}``. Peers differ in what they write, so the reader is
lenient: extFields values may be numbers, booleans or null (read as strings, null dropped), extFields
may be missing or null, `language` may be a name or a number, control characters may appear raw in
strings. The writer always gives extFields values as JSON strings, because the C++ client reads any
other JSON type as 0.

ROCKETMQ binary (serialize type 1):

    len  field
    2    code            int16
    1    language        int8 (LanguageCode)
    2    version         int16
    4    opaque          int32
    4    flag            int32
    4    remark length   int32, then that many UTF-8 bytes
    4    extFields size  int32, then per entry: int16 key length, key, int32 value length, value
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, field

from rocketstore.errors import LocalProtocolError, RemoteProtocolError
from rocketstore.protocol.codes import FLAG_ONEWAY, FLAG_RESPONSE, LanguageCode, SerializeType
from rocketstore.protocol.frame import NEED_DATA, Frame, FrameDecoder, _NeedData, encode_frame

BINARY_FIXED = struct.Struct(
    ">h"  # code
    "b"  # language
    "h"  # version
    "i"  # opaque
    "i"  # flag
)
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")


@dataclass(slots=True)
class RemotingCommand:
    """One request or response.

    Attributes:
        code: request code of a request, response code of a response.
        opaque: request id chosen by the requester, echoed by the response.
        flag: bit 0 response, bit 1 oneway.
        language: sender's language name (``"JAVA"``, ``"CPP"``...).
        version: sender's version number.
        remark: free text, usually an error description.
        ext_fields: the command's custom header, every value a string.
        body: opaque payload.
        serialize_type: header encoding used on the wire.
    """

    code: int
    opaque: int = 0
    flag: int = 0
    language: str = "JAVA"
    version: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    serialize_type: int = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        """True for a response."""
        return bool(self.flag & FLAG_RESPONSE)

    @property
    def is_oneway(self) -> bool:
        """True when the sender expects no response (the C++ client never sets this bit)."""
        return bool(self.flag & FLAG_ONEWAY)

    def response(self, code: int, remark: str | None = None, ext_fields: dict[str, object] | None = None,
                 body: bytes = b"", *, version: int = 0) -> RemotingCommand:
        """A response to this request: same opaque, flag 1, JSON header, values as strings."""
        fields_ = {k: v if type(v) is str else _to_text(v) for k, v in (ext_fields or {}).items() if v is not None}
        return RemotingCommand(code=int(code), opaque=self.opaque, flag=FLAG_RESPONSE, language="JAVA",
                               version=version, remark=remark, ext_fields=fields_, body=body)


def _to_text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _language_name(value: object) -> str:
    if type(value) is str:
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return LanguageCode(value).name
        except ValueError:
            return LanguageCode.OTHER.name
    return str(value) if value is not None else LanguageCode.OTHER.name


def _as_int(header: dict[str, object], name: str, default: int | None = None) -> int:
    value = header.get(name, default)
    if type(value) is int:
        return value
    if value is None:
        raise RemoteProtocolError(f"header field {name!r} is missing")
    try:
        return int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError, OverflowError) as exc:
        raise RemoteProtocolError(f"header field {name!r} is not an integer: {value!r}") from exc


# -- JSON header -----------------------------------------------------------------------------------


_JSON_DECODE = json.JSONDecoder(strict=False).decode
_JSON_STRING = json.encoder.encode_basestring  # a str as a JSON string, quoted, non-ASCII kept (ensure_ascii=False)


def encode_json_header(cmd: RemotingCommand) -> bytes:
    """JSON header bytes of `cmd` (extFields values written as strings), what
    ``json.dumps(header, separators=(",", ":"), ensure_ascii=False)`` writes, in one format string."""
    ext = ",".join(f"{_JSON_STRING(k)}:{_JSON_STRING(v if type(v) is str else _to_text(v))}"
                   for k, v in cmd.ext_fields.items())
    remark = "" if cmd.remark is None else f',"remark":{_JSON_STRING(cmd.remark)}'
    return (f'{{"code":{int(cmd.code)},"extFields":{{{ext}}},"flag":{int(cmd.flag)},'
            f'"language":{_JSON_STRING(cmd.language)},"opaque":{int(cmd.opaque)},'
            f'"serializeTypeCurrentRPC":"JSON","version":{int(cmd.version)}{remark}}}').encode()


def decode_json_header(data: bytes) -> RemotingCommand:
    """Command (without body) from JSON header bytes.

    Raises:
        RemoteProtocolError: not JSON, not an object, or code/opaque/flag not integers.
    """
    try:
        header = _JSON_DECODE(data.decode("utf-8", errors="replace"))
    except (ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"header is not JSON: {exc}") from exc
    if not isinstance(header, dict):
        raise RemoteProtocolError("header is not a JSON object")
    ext = header.get("extFields") or {}
    if not isinstance(ext, dict):
        raise RemoteProtocolError("extFields is not a JSON object")
    for value in ext.values():
        if type(value) is not str:  # numbers, booleans or null: read as text, null dropped
            ext = {k: _to_text(v) for k, v in ext.items() if v is not None}
            break
    remark = header.get("remark")
    return RemotingCommand(
        code=_as_int(header, "code"),
        opaque=_as_int(header, "opaque", 0),
        flag=_as_int(header, "flag", 0),
        language=_language_name(header.get("language")),
        version=_as_int(header, "version", 0),
        remark=None if remark is None else str(remark),
        ext_fields=ext,
        serialize_type=SerializeType.JSON,
    )


# -- ROCKETMQ binary header ----------------------------------------------------------------------


def encode_binary_header(cmd: RemotingCommand) -> bytes:
    """ROCKETMQ binary header bytes of `cmd`.

    Raises:
        LocalProtocolError: a value out of its field's range.
    """
    try:
        language = LanguageCode[cmd.language] if cmd.language in LanguageCode.__members__ else LanguageCode.OTHER
        parts = [BINARY_FIXED.pack(cmd.code, language, cmd.version, cmd.opaque, cmd.flag)]
        remark = (cmd.remark or "").encode("utf-8")
        parts += [_INT.pack(len(remark)), remark]
        fields_ = []
        for key, value in cmd.ext_fields.items():
            k, v = key.encode("utf-8"), _to_text(value).encode("utf-8")
            fields_ += [_SHORT.pack(len(k)), k, _INT.pack(len(v)), v]
    except struct.error as exc:
        raise LocalProtocolError(f"header field out of range: {exc}") from exc
    body = b"".join(fields_)
    parts += [_INT.pack(len(body)), body]
    return b"".join(parts)


class _Cursor:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise RemoteProtocolError(f"binary header ends early at byte {self.pos} (wanted {n} more)")
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def unpack(self, st: struct.Struct) -> tuple[int, ...]:
        return st.unpack(self.take(st.size))


def decode_binary_header(data: bytes) -> RemotingCommand:
    """Command (without body) from ROCKETMQ binary header bytes.

    Raises:
        RemoteProtocolError: lengths that run past the header.
    """
    cur = _Cursor(data)
    code, language, version, opaque, flag = cur.unpack(BINARY_FIXED)
    (remark_len,) = cur.unpack(_INT)
    remark = cur.take(remark_len).decode("utf-8", errors="replace") if remark_len > 0 else None
    (ext_len,) = cur.unpack(_INT)
    ext_cur = _Cursor(cur.take(ext_len))
    ext: dict[str, str] = {}
    while ext_cur.pos < len(ext_cur.data):
        (klen,) = ext_cur.unpack(_SHORT)
        key = ext_cur.take(klen).decode("utf-8", errors="replace")
        (vlen,) = ext_cur.unpack(_INT)
        ext[key] = ext_cur.take(vlen).decode("utf-8", errors="replace")
    return RemotingCommand(code=code, opaque=opaque, flag=flag, language=_language_name(language),
                           version=version, remark=remark, ext_fields=ext,
                           serialize_type=SerializeType.ROCKETMQ)


_HEADER_DECODERS: dict[int, Callable[[bytes], RemotingCommand]] = {
    SerializeType.JSON: decode_json_header,
    SerializeType.ROCKETMQ: decode_binary_header,
}
_HEADER_ENCODERS: dict[int, Callable[[RemotingCommand], bytes]] = {
    SerializeType.JSON: encode_json_header,
    SerializeType.ROCKETMQ: encode_binary_header,
}


def encode_command(cmd: RemotingCommand) -> bytes:
    """Wire bytes of `cmd`, framed.

    Raises:
        LocalProtocolError: the command cannot be encoded.
    """
    encoder = _HEADER_ENCODERS.get(cmd.serialize_type)
    if encoder is None:
        raise LocalProtocolError(f"unknown serialize type {cmd.serialize_type}")
    return encode_frame(Frame(cmd.serialize_type, encoder(cmd), cmd.body))


def decode_command(frame: Frame) -> RemotingCommand:
    """Command of one frame.

    Raises:
        RemoteProtocolError: the header cannot be decoded.
    """
    decoder = _HEADER_DECODERS.get(frame.serialize_type)
    if decoder is None:
        raise RemoteProtocolError(f"unknown serialize type {frame.serialize_type}")
    cmd = decoder(frame.header)
    cmd.body = frame.body
    return cmd


class CommandReader:
    """Bytes in, commands out: a `FrameDecoder` plus header decoding.

    Args:
        max_frame_size: largest accepted frame length.
    """

    def __init__(self, max_frame_size: int | None = None) -> None:
        self._frames = FrameDecoder() if max_frame_size is None else FrameDecoder(max_frame_size)

    def feed(self, data: bytes) -> None:
        """Append received bytes."""
        self._frames.feed(data)

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as commands (an unfinished frame)."""
        return self._frames.buffered

    def next_command(self) -> RemotingCommand | _NeedData:
        """The next whole command, or NEED_DATA.

        Raises:
            RemoteProtocolError: bad framing or an undecodable header; the connection is unusable.
        """
        frame = self._frames.next_frame()
        if frame is NEED_DATA:
            return NEED_DATA
        assert isinstance(frame, Frame)
        return decode_command(frame)
