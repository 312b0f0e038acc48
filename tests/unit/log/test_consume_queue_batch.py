"""`ConsumeQueue.put_units` writes exactly the bytes, files and bookkeeping of one `put` per entry."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.errors import StoreError
from rocketstore.format.consume_queue import pack_unit
from rocketstore.log.consume_queue import ConsumeQueue

ENTRIES_PER_FILE = 4


def files_of(root: Path) -> dict[str, bytes]:
    folder = root / "consumequeue" / "T" / "0"
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())} if folder.exists() else {}


def put_one_by_one(cq: ConsumeQueue, entries: list[tuple[int, int, int, int]]) -> int:
    last = -1
    for i, entry in enumerate(entries):
        if cq.put(*entry):
            last = i
    return last


def put_as_units(cq: ConsumeQueue, entries: list[tuple[int, int, int, int]]) -> int:
    """The entries as a batch hands them over: the first queue offset and the packed units."""
    units = bytearray(b"".join(pack_unit(phy, size, code) for phy, size, code, _ in entries))
    return cq.put_units(entries[0][3] if entries else 0, units)


def entries_from(start_offset: int, sizes: list[int], phy_start: int) -> list[tuple[int, int, int, int]]:
    out, phy = [], phy_start
    for i, size in enumerate(sizes):
        out.append((phy, size, 1000 + i, start_offset + i))
        phy += size
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    first=st.lists(st.integers(100, 300), max_size=7),
    second=st.lists(st.integers(100, 300), min_size=1, max_size=11),
    replayed=st.integers(0, 7),
)
def test_put_units_equals_put_one_by_one(tmp_path_factory, first, second, replayed):
    """A batch after `first` entries that replays the last `replayed` of them (as a re-dispatch does),
    crossing file ends: the same files, bytes, max offsets and last-written index."""
    roots = [tmp_path_factory.mktemp("units"), tmp_path_factory.mktemp("single")]
    before = entries_from(0, first, 0)
    replayed = min(replayed, len(before))
    phy_next = before[-1][0] + before[-1][1] if before else 0
    batch = before[len(before) - replayed:] + entries_from(len(before), second, phy_next)
    lasts, states = [], []
    for root, put in zip(roots, (put_as_units, put_one_by_one), strict=True):
        cq = ConsumeQueue(root, "T", 0, ENTRIES_PER_FILE)
        cq.load()
        put_one_by_one(cq, before)
        lasts.append(put(cq, batch))
        states.append((cq.min_offset, cq.max_offset, cq.max_physic_offset, files_of(root)))
        cq.close()
    assert lasts[0] == lasts[1] == len(batch) - 1
    assert states[0] == states[1]
    assert states[0][1] == len(before) + len(second)


def test_put_units_starting_mid_queue_writes_fillers_like_put(tmp_path):
    entries = entries_from(6, [120, 130, 140], 5000)
    roots = [tmp_path / "units", tmp_path / "single"]
    for root, put in zip(roots, (put_as_units, put_one_by_one), strict=True):
        cq = ConsumeQueue(root, "T", 0, ENTRIES_PER_FILE)
        cq.load()
        assert put(cq, entries) == 2
        assert (cq.min_offset, cq.max_offset) == (6, 9)
        cq.close()
    assert files_of(roots[0]) == files_of(roots[1])


def test_put_units_refuses_a_gap_and_keeps_what_came_before(tmp_path):
    cq = ConsumeQueue(tmp_path, "T", 0, ENTRIES_PER_FILE)
    cq.load()
    assert put_as_units(cq, entries_from(0, [100, 100], 0)) == 1
    snapshot = files_of(tmp_path)
    with pytest.raises(StoreError, match="gap"):
        put_as_units(cq, entries_from(5, [100], 200))  # offset 5 where 2 is next
    assert cq.max_offset == 2 and files_of(tmp_path) == snapshot
    assert [u.phy_offset for u in cq.units(0, 2)] == [0, 100]
    cq.close()


def test_put_units_of_entries_already_there_writes_nothing(tmp_path):
    cq = ConsumeQueue(tmp_path, "T", 0, ENTRIES_PER_FILE)
    cq.load()
    entries = entries_from(0, [100, 100, 100], 0)
    assert put_as_units(cq, entries) == 2
    snapshot = files_of(tmp_path)
    assert put_as_units(cq, entries) == -1
    assert files_of(tmp_path) == snapshot
    assert cq.put_units(3, bytearray()) == -1
    cq.close()
