"""The fast codec paths give exactly what the plain reference code gives, on the same inputs."""
# Every property test runs with deadline=None: no test asserts a timing (the machine is shared and noisy).

from __future__ import annotations

import pickle
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.format import javahash
from rocketstore.format.consume_queue import UNIT, CqUnit, iter_units
from rocketstore.format.message import (
    STORED_MESSAGE_FIELDS,
    decode_message,
    encode_message,
    header_struct,
    record_sys_flag,
)
from rocketstore.format.msgid import encode_msg_id, msg_id_at, msg_id_prefix
from rocketstore.format.properties import _decode_properties_reference, decode_properties, split_keys

# any code point, lone surrogates included (Java strings may hold them)
any_text = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=40)
ascii_text = st.text(st.characters(min_codepoint=0, max_codepoint=127), max_size=40)
texts = st.one_of(ascii_text, any_text)


def reference_java_hash(text: str) -> int:
    """String.hashCode as Java writes it: one UTF-16 code unit at a time, int32 overflow."""
    data = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", data):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def test_java_hash_of_known_strings():
    assert javahash.java_hash("") == 0
    assert javahash.java_hash("a") == 97
    assert javahash.java_hash("TagA") == 2598919
    assert javahash.java_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert javahash.index_key_hash("polygenelubricants") == 0


@settings(deadline=None)
@given(texts)
def test_java_hash_matches_the_java_loop(text):
    assert javahash.java_hash(text) == reference_java_hash(text)


@settings(deadline=None)
@given(texts, texts)
def test_java_hash_concat_matches_hash_of_the_concatenation(prefix, text):
    assert javahash.java_hash_concat(prefix, text) == reference_java_hash(prefix + text)


@settings(deadline=None, max_examples=200)
@given(st.lists(texts, max_size=80))
def test_java_hash_many_matches_the_pure_python_path(batch):
    expected = [reference_java_hash(t) for t in batch]
    assert javahash.java_hash_many_py(batch) == expected
    assert javahash.java_hash_many(batch) == expected


@settings(deadline=None, max_examples=200)
@given(st.lists(texts, min_size=1, max_size=80))
def test_numpy_hash_path_matches_the_pure_python_path(batch):
    pytest.importorskip("numpy")
    assert javahash._java_hash_many_np(batch) == javahash.java_hash_many_py(batch)


@settings(deadline=None)
@given(st.lists(st.one_of(texts, st.just("polygenelubricants")), max_size=60))
def test_index_key_hashes_match_index_key_hash(batch):
    expected = [javahash.index_key_hash(t) for t in batch]
    assert javahash.index_key_hashes(batch) == expected
    assert javahash.index_key_hashes(batch * 20) == expected * 20  # large enough for the numpy path


properties_alphabet = st.text(st.sampled_from(["a", "b", "K", "\x01", "\x02", "é", " "]), max_size=24)


@settings(deadline=None)
@given(properties_alphabet)
def test_decode_properties_matches_rocketmqs_loop(text):
    assert list(decode_properties(text).items()) == list(_decode_properties_reference(text).items())


@settings(deadline=None)
@given(st.one_of(st.none(), st.text(st.sampled_from(["a", "b", " "]), max_size=12)))
def test_split_keys_matches_a_plain_split(keys):
    assert split_keys(keys) == ([k for k in keys.split(" ") if k] if keys else [])


@settings(deadline=None)
@given(st.integers(-(2**31), 2**31 - 1), st.sampled_from([4, 16]), st.sampled_from([4, 16]))
def test_record_sys_flag_keeps_every_bit_but_the_host_bits(flag, born_len, store_len):
    expected = (flag & ~0x30) | (0x10 if born_len == 16 else 0) | (0x20 if store_len == 16 else 0)
    assert record_sys_flag(flag, bytes(born_len), bytes(store_len)) == expected


def test_record_sys_flag_keeps_the_compression_type():
    assert record_sys_flag(0x301, bytes(4), bytes(4)) == 0x301


@settings(deadline=None)
@given(st.sampled_from([bytes([127, 0, 0, 1]), bytes(range(16))]), st.integers(0, 65535),
       st.integers(0, 2**63 - 1))
def test_msg_id_with_cached_prefix_matches_encode_msg_id(ip, port, offset):
    assert msg_id_at(msg_id_prefix(ip, port), offset) == encode_msg_id(ip, port, offset)


@settings(deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**31), 2**31 - 1),
                          st.integers(-(2**63), 2**63 - 1)), max_size=20), st.integers(0, 19))
def test_iter_units_matches_unpacking_each_entry(entries, tail):
    buf = b"".join(UNIT.pack(*e) for e in entries) + bytes(tail)
    units = iter_units(buf)
    assert units == [CqUnit(*e) for e in entries]
    assert all(type(u) is CqUnit for u in units)


int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
ips = st.sampled_from([bytes([10, 0, 0, 7]), bytes(range(16))])


@settings(deadline=None)
@given(topic=st.text(st.characters(min_codepoint=32, max_codepoint=0x3000), min_size=1, max_size=20).filter(
           lambda t: len(t.encode()) <= 127),
       body=st.binary(max_size=64), properties=st.text(max_size=40).filter(lambda t: len(t.encode()) <= 32767),
       queue_id=int32, flag=int32, queue_offset=int64, phy_offset=int64, sys_flag=int32, born_ts=int64,
       born_ip=ips, born_port=int32, store_ts=int64, store_ip=ips, store_port=int32, reconsume=int32,
       prepared=int64)
def test_lazily_decoded_fields_equal_an_eager_decode(topic, body, properties, queue_id, flag, queue_offset,
                                                     phy_offset, sys_flag, born_ts, born_ip, born_port, store_ts,
                                                     store_ip, store_port, reconsume, prepared):
    raw = encode_message(topic=topic.encode(), body=body, properties=properties.encode(), queue_id=queue_id,
                         flag=flag, queue_offset=queue_offset, phy_offset=phy_offset, sys_flag=sys_flag,
                         born_timestamp=born_ts, born_ip=born_ip, born_port=born_port, store_timestamp=store_ts,
                         store_ip=store_ip, store_port=store_port, reconsume_times=reconsume,
                         prepared_transaction_offset=prepared)
    msg = decode_message(raw)
    # eager reference: one unpack of the whole header
    (total, magic, crc, *_rest) = header_struct(len(born_ip), len(store_ip)).unpack_from(raw)
    assert (msg.size, msg.magic, msg.body_crc) == (total, magic, crc)
    assert (msg.queue_id, msg.flag, msg.queue_offset, msg.phy_offset) == (queue_id, flag, queue_offset, phy_offset)
    assert (msg.born_timestamp, msg.store_timestamp, msg.reconsume_times, msg.prepared_transaction_offset) == \
        (born_ts, store_ts, reconsume, prepared)
    assert msg.sys_flag == record_sys_flag(sys_flag, born_ip, store_ip)
    assert (msg.topic, msg.body, msg.properties_string) == (topic, body, properties)
    assert msg.properties == _decode_properties_reference(properties)
    assert msg.msg_id == encode_msg_id(store_ip, store_port, phy_offset)
    copy = pickle.loads(pickle.dumps(msg))
    assert copy == msg and copy.to_dict() == msg.to_dict()
    assert set(msg.to_dict()) == set(STORED_MESSAGE_FIELDS)
