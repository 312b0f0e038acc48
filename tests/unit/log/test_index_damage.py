"""Damaged index files: `IndexFile.find_damage` names what is wrong (the compiled scan and its Python twin
agree), and a lookup that meets damage raises IndexDamagedError instead of a bare error, a walk that never
ends or an answer silently cut short."""

from __future__ import annotations

import dataclasses
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import IndexDamagedError, StoreError
from rocketstore.format.index import (
    DAMAGE_COUNT,
    DAMAGE_ENTRY_HASH,
    DAMAGE_ENTRY_LINK,
    DAMAGE_ENTRY_PHY,
    DAMAGE_ENTRY_TIME,
    DAMAGE_NONE,
    DAMAGE_ORDER,
    DAMAGE_PAST_COUNT,
    DAMAGE_SLOT,
    DAMAGE_SLOT_COUNT,
    ENTRY,
    HEADER,
    SLOT,
    IndexHeader,
    entry_pos,
    header_damage,
    index_damage_scan,
    slot_pos,
)
from rocketstore.log.index_file import KEY, IndexFile
from rocketstore.native import speedups
from tests.conftest import GOLDEN_DIR, GOLDEN_GEOMETRY

SLOTS, MAX_ENTRIES = 7, 40
T0 = 1_700_000_000_000
compiled = pytest.mark.skipif(speedups is None, reason="the compiled module is not built")


def fill(f: IndexFile, keys: list[tuple[int, int, int]]) -> None:
    """Put (key hash, phy offset, store timestamp) keys, as the dispatch does."""
    for key_hash, phy, ts in keys:
        assert f.put_keys(KEY.pack(key_hash, phy), ts) == 1


def sample_keys(count: int, start_phy: int = 1000, start_ts: int = T0) -> list[tuple[int, int, int]]:
    return [((n * 7919) % 50, start_phy + 100 * n, start_ts + 700 * n) for n in range(count)]


@pytest.fixture
def index_file(tmp_path) -> Iterator[IndexFile]:
    f = IndexFile(tmp_path / "20261127000000000", SLOTS, MAX_ENTRIES, create=True)
    yield f
    f.close()


def scan_both(buf: bytes) -> tuple[int, int]:
    """index_damage_scan's answer, held equal to the compiled scan's where there is one."""
    python = index_damage_scan(buf, SLOTS, MAX_ENTRIES)
    if speedups is not None:
        assert speedups.index_damage(buf, SLOTS, MAX_ENTRIES) == python
    return python


def set_int(f: IndexFile, pos: int, fmt: str, value: int) -> None:
    struct.pack_into(fmt, f.mm, pos, value)
    f.header = IndexHeader.unpack(f.mm)


ENTRY_FIELD = {"hash": (0, ">i"), "phy": (4, ">q"), "diff": (12, ">i"), "prev": (16, ">i")}
HEADER_FIELD = {"begin_ts": (0, ">q"), "end_ts": (8, ">q"), "begin_phy": (16, ">q"), "end_phy": (24, ">q"),
                "slot_count": (32, ">i"), "count": (36, ">i")}


def test_files_the_store_writes_and_rocketmq_wrote_are_not_damaged(index_file, tmp_path):
    f = index_file
    assert f.find_damage() is None and f.find_damage(full=True) is None  # a new file
    fill(f, sample_keys(20))
    f.put_keys(b"".join(KEY.pack(h, 9000) for h in (3, 3, 10, 41)), T0 + 60_000)  # one record's keys
    assert f.find_damage() is None and f.find_damage(full=True) is None
    fill(f, sample_keys(MAX_ENTRIES - f.header.index_count, 9100, T0 + 61_000))
    assert f.full and f.find_damage() is None and f.find_damage(full=True) is None
    after = IndexFile(tmp_path / "20261127000000001", SLOTS, MAX_ENTRIES, create=True)  # as IndexService rolls
    try:
        h = f.header
        after.header.begin_phy_offset = after.header.end_phy_offset = h.end_phy_offset
        after.header.begin_timestamp = after.header.end_timestamp = h.end_timestamp
        after.write_header()
        assert after.find_damage(full=True) is None
        fill(after, sample_keys(5, h.end_phy_offset, h.end_timestamp + 3_600_000))  # entry 1: an hour on
        assert after.find_damage() is None and after.find_damage(full=True) is None
    finally:
        after.close()
    for path in sorted((GOLDEN_DIR / "store" / "index").iterdir()):
        golden = IndexFile(path, GOLDEN_GEOMETRY["index_hash_slots"], GOLDEN_GEOMETRY["index_max_entries"],
                           read_only=True)
        try:
            assert golden.find_damage() is None and golden.find_damage(full=True) is None, path.name
        finally:
            golden.close()


@pytest.mark.parametrize(("where", "field", "value", "code", "cheap"), [
    ("header", "count", MAX_ENTRIES + 1, DAMAGE_COUNT, "indexCount 41 outside"),
    ("header", "count", -3, DAMAGE_COUNT, "indexCount -3 outside"),
    ("header", "end_ts", T0 - 1, DAMAGE_ORDER, "header begins after it ends"),
    ("header", "begin_phy", 10**9, DAMAGE_ORDER, "header begins after it ends"),
    ("header", "slot_count", 3, DAMAGE_SLOT_COUNT, None),
    ("header", "count", 12, DAMAGE_SLOT, "entry 12 is written past indexCount"),  # a stale header (a torn put)
    ("entry 4", "hash", -5, DAMAGE_ENTRY_HASH, None),
    ("entry 4", "phy", 5, DAMAGE_ENTRY_PHY, None),
    ("entry 4", "phy", 10**9, DAMAGE_ENTRY_PHY, None),
    ("entry 4", "diff", -1, DAMAGE_ENTRY_TIME, None),
    ("entry 4", "diff", 3600, DAMAGE_ENTRY_TIME, None),
    ("entry 4", "prev", 4, DAMAGE_ENTRY_LINK, None),  # a loop on itself
    ("entry 4", "prev", 9, DAMAGE_ENTRY_LINK, None),  # forwards
    ("entry 1", "prev", 2, DAMAGE_ENTRY_LINK, "entry 1 does not link"),
    ("entry 15", "phy", 5, DAMAGE_ENTRY_PHY, "entry 15 points outside"),  # the last: phy is endPhyOffset
    ("entry 15", "diff", 0, DAMAGE_NONE, "entry 15 has a time outside"),  # the header's end time is its time
    ("entry 16", "hash", 1, DAMAGE_PAST_COUNT, "entry 16 is written past"),
    ("entry 17", "prev", 1, DAMAGE_PAST_COUNT, None),
    ("slot 3", "value", 0, DAMAGE_SLOT, None),  # a slot emptied: every key of it silently gone
    ("slot 3", "value", 16, DAMAGE_SLOT, None),  # one past the last entry
])
def test_each_damage_is_named_by_the_full_check_and_the_header_ones_by_the_cheap_one(
        index_file, where, field, value, code, cheap):
    f = index_file
    fill(f, sample_keys(15))  # entries 1..15, indexCount 16
    assert scan_both(bytes(f.mm)) == (DAMAGE_NONE, 0)
    if where == "header":
        pos, fmt = HEADER_FIELD[field]
    elif where.startswith("entry"):
        n = int(where.split()[1])
        pos, fmt = entry_pos(n, SLOTS) + ENTRY_FIELD[field][0], ENTRY_FIELD[field][1]
    else:
        pos, fmt = slot_pos(int(where.split()[1]), SLOTS), ">i"
    set_int(f, pos, fmt, value)
    assert scan_both(bytes(f.mm))[0] == code
    reason = f.find_damage(full=True)
    assert reason is not None
    if cheap is None:
        assert f.find_damage() is None  # only the full check reads that far
    else:
        assert cheap in (f.find_damage() or "")
        assert reason == f.find_damage()


def test_a_slot_one_past_the_last_entry_of_a_full_file_is_an_index_damaged_error_not_a_struct_error(index_file):
    """Regression: the Python lookup read entry max_entries, past the end of the file (struct.error)."""
    f = index_file
    fill(f, sample_keys(MAX_ENTRIES - 1))
    assert f.full
    key_hash = 5
    set_int(f, slot_pos(key_hash, SLOTS), ">i", f.header.index_count)
    for lookup in (f.lookup, f.lookup_py):
        out: list[int] = []
        with pytest.raises(IndexDamagedError, match=r"slot 5 points at entry 40, outside the file") as caught:
            lookup(key_hash, 10, 0, 2**63 - 1, out)
        assert out == [] and isinstance(caught.value, StoreError) and caught.value.path == f.path
        assert "rocketstore recover" in str(caught.value)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("field", "value", "message"), [
    ("prev", 5, "entry 5 links to entry 5"),  # a loop
    ("prev", -2, "entry 5 links to entry -2"),
    ("phy", 10, "entry 5 points outside the header's physical offsets"),  # the query would miss it
    ("diff", -7, "entry 5 has a negative key hash or time"),  # RocketMQ's walk stops there
    ("hash", -1, "entry 5 has a negative key hash or time"),
])
def test_a_lookup_meeting_damage_raises_instead_of_looping_or_missing(index_file, field, value, message):
    f = index_file
    fill(f, [(3, 1000 + 100 * n, T0 + 1000 * n) for n in range(9)])  # one chain: 9 -> 8 -> ... -> 1
    offset, fmt = ENTRY_FIELD[field]
    set_int(f, entry_pos(5, SLOTS) + offset, fmt, value)
    for lookup in (f.lookup, f.lookup_py):
        out: list[int] = []
        with pytest.raises(IndexDamagedError, match=message):
            lookup(3, 64, 0, 2**63 - 1, out)
        assert out == []
        lookup(3, 4, 0, 2**63 - 1, out)  # the four newest lie before the damage
        assert out == [1800, 1700, 1600, 1500]


def test_entries_ahead_of_the_header_are_read_as_a_put_in_flight_writes_them(index_file):
    """A put writes its entries and slots before the header (RocketMQ's too): a reader whose header is
    older follows the slot to them instead of calling the file damaged or missing its older entries."""
    f = index_file
    fill(f, [(3, 1000 + 100 * n, T0 + 1000 * n) for n in range(4)])
    stale = dataclasses.replace(f.header)
    fill(f, [(3, 2000, T0 + 9000), (3, 2100, T0 + 9000)])
    f.header = stale
    for lookup in (f.lookup, f.lookup_py):
        out: list[int] = []
        lookup(3, 64, 0, 2**63 - 1, out)
        assert out == [2100, 2000, 1300, 1200, 1100, 1000]


def test_a_query_on_a_damaged_index_file_raises_naming_the_file_and_recover(tmp_path):
    cfg = StoreConfig(index_hash_slots=4, index_max_entries=8, deliver_delayed_messages=False)
    with MessageStore.open(tmp_path, cfg) as store:
        for n in range(20):
            store.put(Message("T", f"m{n}".encode(), keys=("same",)))
        assert len(store.query("T", "same")) == 20
        first = store.index.files[0]
        last = first.header.index_count - 1
        ENTRY.pack_into(first.mm, entry_pos(last, 4), *ENTRY.unpack_from(first.mm, entry_pos(last, 4))[:3], last)
        named = rf"index file .*{first.path.name} is damaged .*rocketstore recover"
        with pytest.raises(IndexDamagedError, match=named):
            store.query("T", "same")
        with pytest.raises(IndexDamagedError):
            store.index_lookup("T", "same")
        assert first.find_damage() is not None  # the last entry of the file: the cheap check sees it


# --- generated damage: the compiled scan and lookup agree with their Python twins ---------------------

MUTATION = st.one_of(
    st.tuples(st.just("header"), st.sampled_from(sorted(HEADER_FIELD)), st.integers(-3, 50)),
    st.tuples(st.just("header"), st.sampled_from(sorted(HEADER_FIELD)), st.integers(T0 - 5000, T0 + 60_000)),
    st.tuples(st.just("entry"), st.tuples(st.integers(1, 6) | st.integers(0, MAX_ENTRIES - 1),
                                          st.sampled_from(sorted(ENTRY_FIELD))), st.integers(-3, MAX_ENTRIES + 2)),
    st.tuples(st.just("entry"), st.tuples(st.integers(0, MAX_ENTRIES - 1), st.just("phy")),
              st.integers(900, 6000)),
    st.tuples(st.just("entry"), st.tuples(st.integers(1, 6), st.sampled_from(["hash", "diff"])),
              st.integers(-(2**31), -1)),
    st.tuples(st.just("slot"), st.integers(0, SLOTS - 1), st.integers(-2, MAX_ENTRIES + 2)),
    st.tuples(st.just("byte"), st.integers(0, entry_pos(MAX_ENTRIES, SLOTS) - 1), st.integers(0, 255)),
)


def mutate(buf: bytearray, mutation: tuple[str, object, int]) -> None:
    kind, where, value = mutation
    if kind == "header":
        pos, fmt = HEADER_FIELD[str(where)]
    elif kind == "entry":
        n, field = where  # type: ignore[misc]
        pos, fmt = entry_pos(n, SLOTS) + ENTRY_FIELD[field][0], ENTRY_FIELD[field][1]
    elif kind == "slot":
        pos, fmt = slot_pos(int(where), SLOTS), ">i"  # type: ignore[call-overload]
    else:
        buf[int(where)] = value  # type: ignore[call-overload]
        return
    if fmt == ">i":  # an int32 field takes the low 32 bits
        value = (value + 2**31) % 2**32 - 2**31
    struct.pack_into(fmt, buf, pos, value)


@settings(deadline=None, max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(keys=st.lists(st.tuples(st.integers(0, 30) | st.integers(0, 2**31 - 1), st.integers(0, 300),
                               st.integers(0, 4000)), min_size=1, max_size=MAX_ENTRIES + 3),
       after_full=st.booleans(), mutations=st.lists(MUTATION, max_size=3),
       probes=st.lists(st.integers(0, 40) | st.integers(0, 2**31 - 1), min_size=1, max_size=4))
def test_generated_damaged_and_whole_files_get_the_same_answer_from_both_twins(keys, after_full, mutations, probes):
    with tempfile.TemporaryDirectory() as directory:
        f = IndexFile(Path(directory) / "20261127000000000", SLOTS, MAX_ENTRIES, create=True)
        try:
            phy, ts = 1000, T0
            if after_full:  # begins with the end of a file before it
                f.header.begin_phy_offset = f.header.end_phy_offset = phy
                f.header.begin_timestamp = f.header.end_timestamp = ts
                f.write_header()
            for key_hash, phy_step, ms in keys:
                phy, ts = phy + phy_step, ts + ms
                f.put_keys(KEY.pack(key_hash, phy), ts)
            whole = bytes(f.mm)
            assert scan_both(whole) == (DAMAGE_NONE, 0) and header_damage(whole, SLOTS, MAX_ENTRIES) is None
            buf = bytearray(whole)
            for mutation in mutations:
                mutate(buf, mutation)
            code, _ = scan_both(bytes(buf))
            event(f"damage code {code}")
            f.mm[:] = buf
            f.header = IndexHeader.unpack(buf)
            for key_hash in probes:
                python: list[int] | None = []
                try:
                    f.lookup_py(key_hash, 8, 0, 2**63 - 1, python)  # type: ignore[arg-type]
                except IndexDamagedError:
                    python = None
                    assert code != DAMAGE_NONE  # a lookup sees damage only where the scan does
                if speedups is not None:
                    h = f.header
                    got: list[int] = []
                    answered = speedups.index_lookup(f.mm, SLOTS, key_hash, h.index_count, h.begin_timestamp,
                                                     h.begin_phy_offset, h.end_phy_offset, 0, 2**63 - 1, 8, got)
                    if answered:
                        assert got == python
                    else:  # declined: damage, or a begin time past what the compiled arithmetic takes
                        assert python is None or h.begin_timestamp < -(2**63) + 2**31 * 1000
        finally:
            f.close()


@compiled
def test_the_compiled_scan_declines_what_it_does_not_take():
    buf = bytes(entry_pos(MAX_ENTRIES, SLOTS))
    assert speedups.index_damage(buf, SLOTS, MAX_ENTRIES) == (DAMAGE_NONE, 0)
    assert speedups.index_damage(buf[:-1], SLOTS, MAX_ENTRIES) is None  # not the geometry's size
    assert speedups.index_damage(buf, 0, MAX_ENTRIES) is None
    assert speedups.index_damage(buf, 2**41, MAX_ENTRIES) is None
    assert speedups.index_damage(buf, SLOTS, 2**70) is None
    with pytest.raises(TypeError):
        speedups.index_damage(buf, SLOTS)


def test_the_header_check_takes_a_buffer_of_another_size_as_damage():
    buf = bytearray(entry_pos(MAX_ENTRIES, SLOTS))
    HEADER.pack_into(buf, 0, 0, 0, 0, 0, 0, 1)
    assert header_damage(buf, SLOTS, MAX_ENTRIES) is None
    assert "not the" in (header_damage(buf[:-20], SLOTS, MAX_ENTRIES) or "")
    SLOT.pack_into(buf, slot_pos(2, SLOTS), 1)
    assert scan_both(bytes(buf)) == (DAMAGE_SLOT, 2)


def test_a_header_read_while_another_process_writes_it_is_read_again_until_two_reads_agree(tmp_path, monkeypatch):
    """A broker writes a header field by field: a read between two writes pairs a new entry count with an
    old end offset, which a lookup would take for damage."""
    path = tmp_path / "20261127000000000"
    f = IndexFile(path, SLOTS, MAX_ENTRIES, create=True)
    fill(f, sample_keys(6))
    whole = bytes(f.mm[:40])
    f.close()
    torn = whole[:24] + struct.pack(">q", 1000) + whole[32:]  # endPhyOffset of the first entry, count of six
    reads = iter([torn, whole, whole])
    monkeypatch.setattr("rocketstore.log.index_file.os.pread", lambda fd, size, pos: next(reads))
    assert IndexFile(path, SLOTS, MAX_ENTRIES, read_only=True).header == IndexHeader.unpack(whole)
