"""RemotingCommand headers: bytes captured from the real C++ client, JSON quirks, the binary
ROCKETMQ header, responses, and fuzzing of the command reader."""

from __future__ import annotations

import json
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.errors import RemoteProtocolError
from rocketstore.protocol import (
    NEED_DATA,
    CommandReader,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    decode_command,
    encode_command,
)
from rocketstore.protocol.command import decode_binary_header, decode_json_header, encode_binary_header
from rocketstore.protocol.frame import Frame

# GET_ROUTEINFO_BY_TOPIC as librocketmq (PyPI rocketmq 0.4.4) wrote it, captured on loopback.
CPP_ROUTE_REQUEST = bytes.fromhex(
    "000000be000000ba7b22636f6465223a3130352c226578744669656c6473223a7b224163636573734b6579223a22222c"
    "224f6e734368616e6e656c223a22414c4959554e222c225369676e6174757265223a2253663535412b595a4e3231697a"
    "46744a5a2b33366f494e7a6f4c773d222c22746f706963223a22546f70696341227d2c22666c6167223a302c226c616e"
    "6775616765223a22435050222c226f7061717565223a302c2272656d61726b223a22222c2276657273696f6e223a3633"
    "7d0a")


def test_decodes_a_request_captured_from_the_cpp_client():
    reader = CommandReader()
    reader.feed(CPP_ROUTE_REQUEST)
    cmd = reader.next_command()
    assert cmd == RemotingCommand(
        code=RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque=0, flag=0, language="CPP", version=63, remark="",
        ext_fields={"AccessKey": "", "OnsChannel": "ALIYUN", "Signature": "Sf55A+YZN21izFtJZ+36oINzoLw=",
                    "topic": "TopicA"})
    assert reader.next_command() is NEED_DATA


def test_response_echoes_opaque_sets_flag_and_writes_every_ext_value_as_a_string():
    request = RemotingCommand(code=10, opaque=41, language="CPP")
    response = request.response(ResponseCode.SUCCESS, ext_fields={"queueId": 3, "queueOffset": 2**40,
                                                                   "ok": True, "skip": None})
    data = encode_command(response)
    length, word = struct.unpack(">iI", data[:8])
    assert length == len(data) - 4 and word >> 24 == SerializeType.JSON
    header = json.loads(data[8:8 + (word & 0xFFFFFF)])
    assert header["opaque"] == 41 and header["flag"] == 1 and header["code"] == 0
    assert header["extFields"] == {"queueId": "3", "queueOffset": "1099511627776", "ok": "true"}
    assert "remark" not in header


@pytest.mark.parametrize(("header", "expected"), [
    (b'{"code":11,"extFields":{"queueId":3,"commit":true,"x":null,"f":1.5}}',
     {"queueId": "3", "commit": "true", "f": "1.5"}),
    (b'{"code":11}', {}),
    (b'{"code":11,"extFields":null}', {}),
    (b'{"code":"11","extFields":{"props":"A\x01B\x02C\x01D"}}', {"props": "A\x01B\x02C\x01D"}),
])
def test_json_header_reader_is_lenient(header, expected):
    cmd = decode_json_header(header)
    assert cmd.code == 11 and cmd.ext_fields == expected


def test_language_may_be_a_name_or_a_number():
    assert decode_json_header(b'{"code":1,"language":1}').language == "CPP"
    assert decode_json_header(b'{"code":1,"language":"GO"}').language == "GO"
    assert decode_json_header(b'{"code":1,"language":99}').language == "OTHER"


@pytest.mark.parametrize("header", [b"nope", b"[1]", b'{"opaque":1}', b'{"code":"x"}', b'{"code":1e400}',
                                    b'{"code":1,"extFields":[1]}', b"\xff\xfe", b"[" * 100_000])
def test_bad_json_headers_raise_remote_protocol_error(header):
    with pytest.raises(RemoteProtocolError):
        decode_json_header(header)


def test_binary_header_layout():
    cmd = RemotingCommand(code=105, opaque=7, flag=0, language="JAVA", version=433, remark="hi",
                          ext_fields={"topic": "T"}, serialize_type=SerializeType.ROCKETMQ)
    header = encode_binary_header(cmd)
    assert header == (struct.pack(">hbhii", 105, 0, 433, 7, 0) + struct.pack(">i", 2) + b"hi"
                      + struct.pack(">i", 2 + 5 + 4 + 1) + struct.pack(">h", 5) + b"topic"
                      + struct.pack(">i", 1) + b"T")
    assert decode_command(Frame(1, header, b"B")) == RemotingCommand(
        code=105, opaque=7, flag=0, language="JAVA", version=433, remark="hi", ext_fields={"topic": "T"},
        body=b"B", serialize_type=SerializeType.ROCKETMQ)


def test_binary_header_lengths_past_the_end_raise():
    header = encode_binary_header(RemotingCommand(code=1, ext_fields={"k": "v"}, serialize_type=1))
    for cut in range(len(header)):
        with pytest.raises(RemoteProtocolError):
            decode_binary_header(header[:cut])


texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=20)
commands = st.builds(
    RemotingCommand, code=st.integers(-2**15, 2**15 - 1), opaque=st.integers(-2**31, 2**31 - 1),
    flag=st.integers(0, 3), language=st.sampled_from(["JAVA", "CPP", "GO", "PYTHON"]),
    version=st.integers(0, 2**15 - 1), remark=st.one_of(st.none(), texts.filter(bool)),
    ext_fields=st.dictionaries(texts, texts, max_size=5), body=st.binary(max_size=64),
    serialize_type=st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ]))


@settings(max_examples=300, deadline=None)
@given(st.lists(commands, max_size=5))
def test_commands_round_trip_through_the_reader(cmds):
    reader = CommandReader()
    reader.feed(b"".join(encode_command(c) for c in cmds))
    out = []
    while (cmd := reader.next_command()) is not NEED_DATA:
        out.append(cmd)
    assert out == cmds


@settings(max_examples=500, deadline=None)
@given(st.sampled_from([0, 1]), st.binary(max_size=200), st.binary(max_size=50))
def test_any_header_bytes_decode_or_raise_remote_protocol_error(serialize_type, header, body):
    try:
        cmd = decode_command(Frame(serialize_type, header, body))
    except RemoteProtocolError:
        return
    assert isinstance(cmd.code, int) and cmd.body == body
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in cmd.ext_fields.items())
