"""Frame codec: layout bytes, incremental feeding, limits, and hypothesis fuzzing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.errors import LocalProtocolError, RemoteProtocolError
from rocketstore.protocol.frame import (
    LENGTH_FIELD_SIZE,
    NEED_DATA,
    PREFIX_SIZE,
    Frame,
    FrameDecoder,
    encode_frame,
)


def test_layout_sizes_follow_the_declared_structs():
    assert (LENGTH_FIELD_SIZE, PREFIX_SIZE) == (4, 8)


def test_encode_frame_writes_length_type_and_header_length():
    data = encode_frame(Frame(1, b"HDR", b"body!"))
    assert data == bytes.fromhex("0000000c" "01000003") + b"HDR" + b"body!"
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4


def test_decoder_returns_the_frame_and_keeps_following_bytes():
    first, second = encode_frame(Frame(0, b"{}", b"abc")), encode_frame(Frame(0, b'{"a":1}', b""))
    dec = FrameDecoder()
    dec.feed(first + second[:5])
    assert dec.next_frame() == Frame(0, b"{}", b"abc")
    assert dec.next_frame() is NEED_DATA
    assert dec.buffered == 5
    dec.feed(second[5:])
    assert dec.next_frame() == Frame(0, b'{"a":1}', b"")
    assert dec.buffered == 0


def test_every_proper_prefix_needs_data():
    data = encode_frame(Frame(0, b'{"code":1}', b"xyz"))
    for cut in range(len(data)):
        dec = FrameDecoder()
        dec.feed(data[:cut])
        assert dec.next_frame() is NEED_DATA, cut


def test_byte_at_a_time_feeding_yields_the_same_frames():
    frames = [Frame(0, b"{}", b""), Frame(1, b"\x00" * 20, b"payload"), Frame(0, b"{" * 3, b"\xff")]
    dec = FrameDecoder()
    out = []
    for byte in b"".join(encode_frame(f) for f in frames):
        dec.feed(bytes([byte]))
        while (frame := dec.next_frame()) is not NEED_DATA:
            out.append(frame)
    assert out == frames


@pytest.mark.parametrize(("prefix", "reason"), [
    (struct.pack(">iI", 3, 0), "smaller than 4"),
    (struct.pack(">iI", -1, 0), "smaller than 4"),
    (struct.pack(">iI", 101, 0), "exceeds the limit of 100"),
    (struct.pack(">iI", 20, 17), "header length 17 exceeds frame length 20"),
    (struct.pack(">iI", 20, (2 << 24) | 4), "unknown serialize type 2"),
])
def test_bad_prefixes_raise_and_poison_the_decoder(prefix, reason):
    dec = FrameDecoder(max_frame_size=100)
    dec.feed(prefix + b"\x00" * 16)
    with pytest.raises(RemoteProtocolError, match=reason):
        dec.next_frame()
    dec.feed(encode_frame(Frame(0, b"{}", b"")))
    with pytest.raises(RemoteProtocolError):
        dec.next_frame()


def test_oversize_length_is_refused_from_the_first_four_bytes():
    dec = FrameDecoder(max_frame_size=1024)
    dec.feed(struct.pack(">i", 1 << 30))
    with pytest.raises(RemoteProtocolError, match="exceeds the limit"):
        dec.next_frame()
    assert dec.buffered == 0


def test_encode_refuses_what_the_layout_cannot_carry():
    with pytest.raises(LocalProtocolError):
        encode_frame(Frame(9, b"", b""))


frames_strategy = st.builds(Frame, st.sampled_from([0, 1]), st.binary(max_size=300), st.binary(max_size=300))


@settings(max_examples=200, deadline=None)
@given(st.lists(frames_strategy, max_size=6), st.data())
def test_round_trip_in_random_chunks(frames, data):
    wire = b"".join(encode_frame(f) for f in frames)
    dec = FrameDecoder()
    out = []
    pos = 0
    while pos < len(wire):
        step = data.draw(st.integers(1, max(1, len(wire) - pos)))
        dec.feed(wire[pos:pos + step])
        pos += step
        while (frame := dec.next_frame()) is not NEED_DATA:
            out.append(frame)
    assert out == frames
    assert dec.buffered == 0


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=400), st.integers(8, 512))
def test_any_bytes_give_frames_need_data_or_protocol_error(blob, limit):
    dec = FrameDecoder(max_frame_size=limit)
    dec.feed(blob)
    consumed = 0
    try:
        while (frame := dec.next_frame()) is not NEED_DATA:
            assert isinstance(frame, Frame)
            consumed += PREFIX_SIZE + len(frame.header) + len(frame.body)
            assert PREFIX_SIZE + len(frame.header) + len(frame.body) - LENGTH_FIELD_SIZE <= limit
    except RemoteProtocolError:
        return
    assert consumed + dec.buffered == len(blob)
