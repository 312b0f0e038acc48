"""The numpy paths over a consume-queue file (the read-only open's end, the first entry at or after an
offset, recovery's check of the entries) equal the plain walks, on entries of every kind (fillers,
valid, invalid, past the log's end, zeros)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rocketstore.format import consume_queue as cq

pytest.importorskip("numpy", reason="numpy is an optional dependency (extras fast, spark)")

entry = st.one_of(
    st.just((0, cq.FILLER_SIZE, 0)),
    st.tuples(st.integers(0, 10_000), st.integers(1, 500), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.integers(-(2**63), -1), st.integers(-(2**31), 2**31 - 1), st.integers(0, 9)),
    st.tuples(st.integers(0, 2**62), st.integers(-(2**31), 0), st.integers(0, 9)),
    st.just((0, 0, 0)),
)


@given(st.lists(entry, max_size=40), st.integers(0, 12_000), st.integers(0, 19))
def test_the_numpy_path_equals_the_walk(entries, phy_end, tail):
    buf = b"".join(cq.pack_unit(*e) for e in entries) + b"\0" * tail
    assert cq.kept_prefix(buf, phy_end) == cq.kept_prefix_py(buf, phy_end)


def test_the_numpy_layout_is_the_declared_unit():
    import numpy as np

    assert np.dtype(cq._UNIT_DTYPE).itemsize == cq.UNIT_SIZE
    buf = cq.pack_unit(7, 300, -5)
    assert np.frombuffer(buf, dtype=cq._UNIT_DTYPE)[0].tolist() == cq.UNIT.unpack(buf)


@given(st.lists(entry, max_size=40), st.integers(0, 12_000))
def test_the_first_entry_at_or_after_an_offset_is_the_walks(entries, min_phy):
    buf = b"".join(cq.pack_unit(*e) for e in entries)
    assert cq.first_at_or_after(buf, min_phy) == cq.first_at_or_after_py(buf, min_phy)


@given(st.lists(entry, max_size=40), st.sampled_from([-1, 0, 5_000]), st.integers(0, 19), st.booleans())
def test_the_check_of_the_entries_is_the_walks(entries, after_phy, tail, increasing):
    if increasing:  # mostly a queue's shape: fillers, then entries pointing further on, then zeros
        entries = sorted(entries, key=lambda e: (e != (0, cq.FILLER_SIZE, 0), e[0]))
    buf = b"".join(cq.pack_unit(*e) for e in entries) + b"\0" * tail
    assert cq.scan_entries(buf, after_phy) == cq.scan_entries_py(buf, after_phy)
    zeros_from = len(buf) // 2  # a caller's own answer for the zeros
    assert cq.scan_entries(buf, after_phy, lambda pos: pos >= zeros_from) == \
        cq.scan_entries_py(buf, after_phy, lambda pos: pos >= zeros_from)
