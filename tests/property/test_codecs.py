"""Property tests for every codec: round trips, prefixes need more bytes, garbage never crashes."""

from __future__ import annotations

import struct

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.errors import CorruptRecordError, FormatError
from rocketstore.format import consume_queue as cq
from rocketstore.format import index as idx
from rocketstore.format.checkpoint import Checkpoint
from rocketstore.format.filenames import name_to_offset, offset_to_name
from rocketstore.format.hosts import format_host, parse_host
from rocketstore.format.javahash import index_key_hash, java_hash
from rocketstore.format.message import (
    BLANK_MAGIC,
    END_OF_FILE,
    NEED_DATA,
    StoredMessage,
    body_crc,
    decode_message,
    encode_blank,
    encode_message,
    encoded_size,
)
from rocketstore.format.msgid import decode_msg_id, encode_msg_id
from rocketstore.format.properties import decode_properties, encode_properties, java_hashmap_order

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
ipv4 = st.binary(min_size=4, max_size=4)
ip = st.one_of(ipv4, st.binary(min_size=16, max_size=16))
prop_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1,
                    max_size=20)
properties = st.dictionaries(prop_text, prop_text, max_size=6)
topic = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda t: len(t.encode()) <= 127)

records = st.fixed_dictionaries({
    "topic": topic.map(str.encode), "body": st.binary(max_size=300),
    "properties": properties.map(lambda p: encode_properties(p).encode()), "queue_id": int32, "flag": int32,
    "queue_offset": int64, "phy_offset": int64, "sys_flag": int32.map(lambda f: f & ~0x30),
    "born_timestamp": int64, "born_ip": ip, "born_port": int32, "store_timestamp": int64, "store_ip": ip,
    "store_port": int32, "reconsume_times": int32, "prepared_transaction_offset": int64,
    "version": st.sampled_from([1, 2]),
})


def java_hash_reference(text: str) -> int:
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) % 2**32
    return h - 2**32 if h >= 2**31 else h


@given(st.text())
def test_java_hash_matches_the_utf16_definition(text):
    assert java_hash(text) == java_hash_reference(text)


def test_java_hash_worked_examples():
    assert java_hash("TopicTest#KEY1") == -1656969516
    assert java_hash("TopicTest#Aa") == java_hash("TopicTest#BB") == 2744770
    assert java_hash("主题#键") == 634204136
    assert java_hash("T#😀") == 4308978
    assert java_hash("polygenelubricants") == -(2**31)
    assert index_key_hash("polygenelubricants") == 0
    assert index_key_hash("TopicTest#KEY1") == 1656969516


@given(records)
def test_record_round_trip(fields):
    raw = encode_message(**fields)
    assert len(raw) == encoded_size(len(fields["topic"]), len(fields["body"]), len(fields["properties"]),
                                    born_v6=len(fields["born_ip"]) == 16, store_v6=len(fields["store_ip"]) == 16,
                                    version=fields["version"])
    msg = decode_message(raw, 0, check_crc=True)
    assert isinstance(msg, StoredMessage)
    assert msg.raw == raw and msg.size == len(raw)
    assert msg.body == fields["body"]
    assert msg.body_crc == body_crc(fields["body"])
    assert msg.topic == fields["topic"].decode()
    assert msg.properties_string.encode() == fields["properties"]
    for name in ("queue_id", "flag", "queue_offset", "phy_offset", "born_timestamp", "store_timestamp",
                 "reconsume_times", "prepared_transaction_offset"):
        assert getattr(msg, name) == fields[name]
    assert msg.born_host == format_host(fields["born_ip"], fields["born_port"])
    assert msg.store_host == format_host(fields["store_ip"], fields["store_port"])
    assert decode_msg_id(msg.msg_id) == (msg.store_host, fields["phy_offset"])


@settings(suppress_health_check=[HealthCheck.too_slow], max_examples=50)
@given(records)
def test_every_proper_prefix_needs_more_bytes(fields):
    raw = encode_message(**fields)
    for cut in range(len(raw)):
        assert decode_message(raw[:cut], 0) is NEED_DATA


@given(st.binary(max_size=400), st.integers(0, 8))
def test_arbitrary_bytes_give_a_value_a_sentinel_or_corrupt_record(data, pos):
    try:
        result = decode_message(data, pos, check_crc=True)
    except CorruptRecordError:
        return
    assert result is NEED_DATA or result is END_OF_FILE or isinstance(result, StoredMessage)


@given(records, st.integers(0, 10_000), st.integers(0, 7))
def test_bit_flips_never_crash_the_decoder(fields, where, bit):
    raw = bytearray(encode_message(**fields))
    raw[where % len(raw)] ^= 1 << bit
    try:
        result = decode_message(bytes(raw), 0, check_crc=True)
    except CorruptRecordError:
        return
    assert result is NEED_DATA or result is END_OF_FILE or isinstance(result, StoredMessage)


@given(st.integers(8, 2**31 - 1))
def test_blank_record(remaining):
    raw = encode_blank(remaining)
    assert raw == struct.pack(">iI", remaining, BLANK_MAGIC)
    assert decode_message(raw, 0) is END_OF_FILE
    assert decode_message(raw[:7], 0) is NEED_DATA


def test_worked_example_record_bytes():
    raw = encode_message(
        topic=b"TopicTest", body=b"Hello", properties=b"KEYS\x01KEY1\x02TAGS\x01TagA", queue_id=0,
        flag=0, queue_offset=0, phy_offset=0, sys_flag=0, born_timestamp=1700000000000,
        born_ip=bytes([127, 0, 0, 1]), born_port=54321, store_timestamp=1700000000123,
        store_ip=bytes([192, 168, 0, 1]), store_port=10911)
    assert raw.hex().upper() == (
        "0000007CDAA320A777D18982000000000000000000000000000000000000000000000000"
        "000000000000018BCFE568007F0000010000D4310000018BCFE5687BC0A8000100002A9F"
        "0000000000000000000000000000000548656C6C6F09546F706963546573740013"
        "4B455953014B45593102544147530154616741")
    msg = decode_message(raw)
    assert msg.msg_id == "C0A8000100002A9F0000000000000000"
    assert msg.tags == "TagA" and msg.keys == ["KEY1"]


@given(st.lists(st.tuples(prop_text, prop_text), max_size=8))
def test_properties_round_trip(pairs):
    expected = {}
    for k, v in pairs:
        expected.pop(k, None)
        expected[k] = v
    text = encode_properties(pairs)
    assert decode_properties(text) == expected
    assert decode_properties(encode_properties(pairs, trailing_separator=True)) == expected


def test_properties_parse_rule_drops_empty_names_and_values():
    assert decode_properties("\x01v\x02k\x01\x02a\x01b\x01c\x02\x02") == {"a": "b\x01c"}


def test_java_hashmap_order_worked_example():
    names = ["UNIQ_KEY", "WAIT", "TAGS", "KEYS", "CLUSTER"]
    assert java_hashmap_order(names) == ["KEYS", "UNIQ_KEY", "CLUSTER", "WAIT", "TAGS"]
    assert java_hashmap_order(names, 128) == ["UNIQ_KEY", "CLUSTER", "TAGS", "KEYS", "WAIT"]


@given(int64, st.integers(1, 2**31 - 1), int64)
def test_consume_queue_unit_round_trip(phy, size, code):
    raw = cq.pack_unit(phy, size, code)
    assert len(raw) == cq.UNIT_SIZE == 20
    assert cq.unpack_unit(raw) == (phy, size, code)
    assert cq.iter_units(raw * 3 + b"xx") == [(phy, size, code)] * 3


def test_tags_code_is_sign_extended_in_the_unit():
    assert cq.pack_unit(0, 124, java_hash("TagA")).hex().upper().endswith("000000000027A807")
    assert cq.pack_unit(0, 1, -1656969516)[12:].hex().upper() == "FFFFFFFF9D3CA6D4"


@given(int64, int64, int64, int64, int32, st.integers(1, 2**31 - 1))
def test_index_header_round_trip(a, b, c, d, e, f):
    header = idx.IndexHeader(a, b, c, d, e, f)
    assert idx.IndexHeader.unpack(header.pack()) == header


def test_index_positions_worked_examples():
    assert idx.index_file_size(5_000_000, 20_000_000) == 420_000_040
    assert idx.slot_pos(1656969516, 5_000_000) == 7_878_104
    assert idx.entry_pos(1, 5_000_000) == 20_000_060
    assert idx.entry_pos(399, 100) == 8440 - 20
    assert idx.time_diff_seconds(1700000005999, 1700000000123) == 5
    assert idx.time_diff_seconds(5, 0) == 0


@given(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1))
def test_checkpoint_round_trip(p, lg, i):
    cp = Checkpoint(p, lg, i)
    assert Checkpoint.unpack(cp.pack_v4()) == cp
    assert Checkpoint(1700000000123, 1700000000100, 1699999990000).min_timestamp == 1699999997100


@given(st.integers(0, 10**20 - 1))
def test_file_names_round_trip(offset):
    name = offset_to_name(offset)
    assert len(name) == 20 and name_to_offset(name) == offset


@given(ip, st.integers(0, 65535), st.integers(0, 2**63 - 1))
def test_msg_id_round_trip(address, port, offset):
    msg_id = encode_msg_id(address, port, offset)
    assert len(msg_id) == (32 if len(address) == 4 else 56)
    host, got = decode_msg_id(msg_id)
    assert got == offset and parse_host(host) == (address, port)


@given(st.text(max_size=60))
def test_msg_id_decoder_rejects_garbage_with_format_error(text):
    try:
        decode_msg_id(text)
    except FormatError:
        pass
