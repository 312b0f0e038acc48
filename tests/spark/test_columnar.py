"""The column-wise record batch equals the row-by-row reference on every record, and takes the fast path
on the records stores hold: through the compiled `record_columns` and through its numpy twin alike."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import MessageStore, StoreConfig
from rocketstore.format.message import decode_record, encode_message
from rocketstore.native import speedups
from rocketstore.scan import columnar
from rocketstore.scan.columnar import record_batch
from rocketstore.spark.schema import ARROW_SCHEMA, to_record_batch
from tests.conftest import GOLDEN_GEOMETRY, copy_golden_store

pytestmark = pytest.mark.spark

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
ipv4 = st.binary(min_size=4, max_size=4)
# properties strings as they may lie on disk: empty names and values, segments without U+0001, repeated
# names, spaces in KEYS, a trailing separator (5.x), non-ASCII text
prop_name = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "ключ", ""])
prop_value = st.sampled_from(["", "x", "TagA", "k1 k2", " k1  k2 ", "v\x01w", "значение"])
segment = st.one_of(st.tuples(prop_name, prop_value).map(lambda nv: f"{nv[0]}\x01{nv[1]}"), prop_value)
props_text = st.lists(segment, max_size=6).map("\x02".join)
distinct_props = st.dictionaries(prop_name.filter(bool), prop_value.filter(bool), max_size=4).map(
    lambda d: "\x02".join(f"{k}\x01{v}" for k, v in d.items()))


def record(topic: bytes, body: bytes, properties: str, *, version: int = 1, born_ip: bytes = b"\x7f\0\0\1",
           store_ip: bytes = b"\xc0\xa8\0\1", **fields: Any) -> bytes:
    values: dict[str, Any] = {
        "queue_id": 3, "flag": 0, "queue_offset": 7, "phy_offset": 1024, "sys_flag": 0,
        "born_timestamp": 1_700_000_000_000, "born_port": 50_000, "store_timestamp": 1_700_000_000_123,
        "store_port": 10911, **fields,
    }
    return encode_message(topic=topic, body=body, properties=properties.encode(), version=version,
                          born_ip=born_ip, store_ip=store_ip, **values)


def assert_equal_batches(raws: list[bytes]) -> None:
    messages = [decode_record(raw) for raw in raws]
    expected = to_record_batch(messages, "broker-a")
    got = record_batch(messages, "broker-a")
    assert got.schema == ARROW_SCHEMA
    for i, field in enumerate(ARROW_SCHEMA):
        assert got.column(i).equals(expected.column(i)), field.name


@pytest.fixture(scope="module", params=["compiled", "numpy"], autouse=True)
def column_path(request: pytest.FixtureRequest) -> Any:
    """Every test of the module through each way of making the columns."""
    saved = columnar._record_columns
    if request.param == "compiled":
        if speedups is None:
            pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
        columnar._record_columns = speedups.record_columns
    else:
        columnar._record_columns = None
    yield request.param
    columnar._record_columns = saved


@pytest.fixture
def no_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail if the column-wise path hands the batch to the row-by-row reference."""
    def refuse(*_: object) -> None:
        raise AssertionError("record_batch fell back to the row path")
    monkeypatch.setattr(columnar, "to_record_batch", refuse)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(props_text, st.binary(max_size=64), st.sampled_from([1, 2])), min_size=1, max_size=12))
def test_equals_the_row_path_for_any_properties(rows):
    assert_equal_batches([record(b"TopicA", body, props, version=v) for props, body, v in rows])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.fixed_dictionaries({
    "properties": distinct_props, "body": st.binary(max_size=300), "version": st.sampled_from([1, 2]),
    "topic": st.sampled_from([b"T", b"%RETRY%group", "Тема".encode()]), "born_ip": ipv4, "store_ip": ipv4,
    "queue_id": int32, "flag": int32, "queue_offset": int64, "phy_offset": int64, "born_port": int32,
    "store_port": int32, "born_timestamp": int64, "store_timestamp": int64, "reconsume_times": int32,
    "sys_flag": int32.map(lambda f: f & ~0x30),
}), min_size=1, max_size=8))
def test_ipv4_records_with_distinct_property_names_take_the_column_path(rows):
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(columnar, "to_record_batch", lambda *_: pytest.fail("fell back to the row path"))
        raws = [record(r.pop("topic"), r.pop("body"), r.pop("properties"), **r) for r in rows]
        messages = [decode_record(raw) for raw in raws]
        got = record_batch(messages, "broker-a")
    expected = to_record_batch(messages, "broker-a")
    for i, field in enumerate(ARROW_SCHEMA):
        assert got.column(i).equals(expected.column(i)), field.name


@pytest.mark.parametrize("case", ["ipv6 store host", "ipv6 born host", "repeated name", "invalid utf-8",
                                  "a surrogate", "an overlong form", "past U+10FFFF", "a topic not UTF-8"])
def test_rows_the_column_path_does_not_cover_give_the_reference_batch(case):
    plain = record(b"T", b"body", "TAGS\x01a\x02KEYS\x01k1 k2")
    bad_bytes = {"a surrogate": b"\xed\xa0\x80", "an overlong form": b"\xc0\x80", "past U+10FFFF": b"\xf4\x90\x80\x80"}
    if case == "ipv6 store host":
        odd = record(b"T", b"b", "TAGS\x01b", store_ip=bytes(range(16)))
    elif case == "ipv6 born host":
        odd = record(b"T", b"b", "TAGS\x01b", born_ip=bytes(range(16)))
    elif case == "repeated name":
        odd = record(b"T", b"b", "TAGS\x01a\x02KEYS\x01k\x02TAGS\x01b")
    elif case in bad_bytes:  # bytes Python's strict UTF-8 decoder refuses, in a value
        raw = bytearray(record(b"T", b"b", "TAGS\x01zzzz"))
        raw[-4:] = bad_bytes[case].ljust(4, b"z")
        odd = bytes(raw)
    elif case == "a topic not UTF-8":
        odd = record(b"T\xff", b"b", "TAGS\x01b")
    else:
        odd = bytearray(record(b"T", b"b", "TAGS\x01zz"))
        odd[-1] = 0xFF  # the properties' last byte is no longer UTF-8
        odd = bytes(odd)
    assert_equal_batches([plain, odd, plain])


def test_the_golden_store_reads_the_same_either_way(tmp_path, no_fallback, monkeypatch):
    root = copy_golden_store(tmp_path / "golden")
    with MessageStore.open(root, StoreConfig(**GOLDEN_GEOMETRY), read_only=True) as store:
        messages = list(store.scan())
    assert messages
    got = record_batch(messages, "golden")
    monkeypatch.undo()
    expected = to_record_batch(messages, "golden")
    assert got.equals(expected)
    assert got.num_rows == len(messages)


def test_batches_are_cut_by_rows_and_by_bytes():
    messages = [decode_record(record(b"T", bytes(1000), "TAGS\x01a", queue_offset=i)) for i in range(10)]
    size = messages[0].size
    by_rows = list(columnar.batches(messages, "b", rows=4))
    assert [b.num_rows for b in by_rows] == [4, 4, 2]
    by_bytes = list(columnar.batches(messages, "b", rows=100, max_bytes=3 * size))
    assert [b.num_rows for b in by_bytes] == [3, 3, 3, 1]
    assert [o for b in by_bytes for o in b.column("queueOffset").to_pylist()] == list(range(10))
    assert list(columnar.batches([], "b")) == []
