"""The fast walks over a consume-queue file (the read-only open's end, the first entry at or after an
offset, recovery's check of the entries) equal the plain walks, on entries of every kind (fillers,
valid, invalid, past the log's end, zeros): the compiled kernels (`queue_kept_prefix`,
`queue_first_at_or_after`, `queue_scan`) on any bounds, and the numpy path that runs where the compiled
module is not built."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.format import consume_queue as cq
from rocketstore.native import speedups

entry = st.one_of(
    st.just((0, cq.FILLER_SIZE, 0)),
    st.tuples(st.integers(0, 10_000), st.integers(1, 500), st.integers(-(2**63), 2**63 - 1)),
    st.tuples(st.integers(-(2**63), -1), st.integers(-(2**31), 2**31 - 1), st.integers(0, 9)),
    st.tuples(st.integers(0, 2**62), st.integers(-(2**31), 0), st.integers(0, 9)),
    st.tuples(st.integers(2**63 - 2**31, 2**63 - 1), st.integers(1, 2**31 - 1), st.integers(0, 9)),
    st.just((0, 0, 0)),
)
entries = st.lists(entry, max_size=40)
bound = st.one_of(st.integers(-1, 12_000), st.integers(-(2**64), 2**64), st.sampled_from([2**63 - 1, -(2**63)]))
"""An offset bound: near the entries' offsets mostly, past int64 sometimes (the kernels decline those)."""

needs_compiled = pytest.mark.skipif(speedups is None, reason="the compiled module is not built (or "
                                                             "ROCKETSTORE_PURE_PYTHON is set)")


def _file(units: list[tuple[int, int, int]], tail: int) -> bytes:
    return b"".join(cq.pack_unit(*e) for e in units) + b"\0" * tail


@contextmanager
def _numpy_path() -> Iterator[None]:
    """The wrappers without their compiled kernels: what runs where the module is not built."""
    pytest.importorskip("numpy", reason="numpy is optional (the extras spark and sql bring it)")
    saved = cq._queue_scan, cq._queue_first_at_or_after, cq._queue_kept_prefix
    cq._queue_scan = cq._queue_first_at_or_after = cq._queue_kept_prefix = None
    try:
        yield
    finally:
        cq._queue_scan, cq._queue_first_at_or_after, cq._queue_kept_prefix = saved


# -- the compiled kernels against the walks, on any bounds (tests/adversarial fuzzes these) -------------

@needs_compiled
@settings(deadline=None, max_examples=300)
@given(entries, bound, st.integers(0, 19))
def test_queue_kept_prefix_twins(units, phy_end, tail):
    buf = _file(units, tail)
    answer = speedups.queue_kept_prefix(buf, phy_end)
    if answer is None:  # declined: a bound past int64
        assert not -(2**63) <= phy_end < 2**63
        return
    assert answer == cq.kept_prefix_py(buf, phy_end)


@needs_compiled
@settings(deadline=None, max_examples=300)
@given(entries, bound, st.one_of(st.integers(-30, 900), st.integers(-(2**64), 2**64)))
def test_queue_first_at_or_after_twins(units, min_phy, end):
    buf = _file(units, 0)
    answer = speedups.queue_first_at_or_after(buf, min_phy, end)
    if answer is None:  # declined: a bound past int64, or a negative end
        assert not -(2**63) <= min_phy < 2**63 or end < 0
        return
    assert (None if answer < 0 else answer) == cq.first_at_or_after_py(buf[:end], min_phy)


@needs_compiled
@settings(deadline=None, max_examples=300)
@given(entries, bound, st.integers(0, 19), st.booleans())
def test_queue_scan_twins(units, after_phy, tail, increasing):
    if increasing:  # mostly a queue's shape: fillers, then entries pointing further on, then zeros
        units = sorted(units, key=lambda e: (e != (0, cq.FILLER_SIZE, 0), e[0]))
    buf = _file(units, tail)
    answer = speedups.queue_scan(buf, after_phy)
    if answer is None:
        assert not -(2**63) <= after_phy < 2**63
        return
    twin = cq.scan_entries_py(buf, after_phy, lambda pos: False)  # a stop as damage: the stop's entry named
    written, last, stop = answer
    assert (written, last) == (twin.written, twin.last_phy)
    assert (stop is None) == (twin.problem is None)
    if stop is not None:
        assert stop == cq.unpack_unit(buf, written * cq.UNIT_SIZE)


def test_the_kernels_refuse_what_is_not_a_buffer_and_an_int():
    if speedups is None:
        pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
    for call in (lambda: speedups.queue_scan(b"", "0"), lambda: speedups.queue_kept_prefix(b""),
                 lambda: speedups.queue_first_at_or_after(b"", 0), lambda: speedups.queue_scan("text", 0)):
        with pytest.raises(TypeError):
            call()


# -- the wrappers the store calls, on each path ----------------------------------------------------------

@pytest.fixture(params=["compiled", "numpy"])
def path(request: pytest.FixtureRequest) -> str:
    if request.param == "compiled" and speedups is None:
        pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
    return str(request.param)


@contextmanager
def _taking(path: str) -> Iterator[None]:
    if path == "numpy":
        with _numpy_path():
            yield
    else:
        yield


def test_the_read_only_end_is_the_walks(path):
    @settings(deadline=None)
    @given(entries, bound, st.integers(0, 19))
    def check(units, phy_end, tail):
        buf = _file(units, tail)
        assert cq.kept_prefix(buf, phy_end) == cq.kept_prefix_py(buf, phy_end)

    with _taking(path):
        check()


def test_the_numpy_layout_is_the_declared_unit():
    np = pytest.importorskip("numpy", reason="numpy is optional (the extras spark and sql bring it)")
    assert np.dtype(cq._UNIT_DTYPE).itemsize == cq.UNIT_SIZE
    buf = cq.pack_unit(7, 300, -5)
    assert np.frombuffer(buf, dtype=cq._UNIT_DTYPE)[0].tolist() == cq.UNIT.unpack(buf)


def test_the_first_entry_at_or_after_an_offset_is_the_walks(path):
    @settings(deadline=None)
    @given(entries, bound, st.one_of(st.none(), st.integers(0, 900)))
    def check(units, min_phy, end):
        buf = _file(units, 0)
        assert cq.first_at_or_after(buf, min_phy, end) == cq.first_at_or_after_py(buf[:end], min_phy)

    with _taking(path):
        check()


def test_the_check_of_the_entries_is_the_walks(path):
    @settings(deadline=None)
    @given(entries, st.one_of(st.sampled_from([-1, 0, 5_000]), bound), st.integers(0, 19), st.booleans())
    def check(units, after_phy, tail, increasing):
        if increasing:
            units = sorted(units, key=lambda e: (e != (0, cq.FILLER_SIZE, 0), e[0]))
        buf = _file(units, tail)
        assert cq.scan_entries(buf, after_phy) == cq.scan_entries_py(buf, after_phy)
        zeros_from = len(buf) // 2  # a caller's own answer for the zeros
        assert cq.scan_entries(buf, after_phy, lambda pos: pos >= zeros_from) == \
            cq.scan_entries_py(buf, after_phy, lambda pos: pos >= zeros_from)

    with _taking(path):
        check()


@needs_compiled
def test_the_store_opens_without_importing_numpy(tmp_path):
    """numpy is imported on first use: importing rocketstore, and writing, closing and opening a store
    again (the recovery's walks over queues of several files included) load none of it."""
    import subprocess
    import sys

    store = str(tmp_path / "s")
    script = (
        "import sys\n"
        "from rocketstore import Message, MessageStore, StoreConfig\n"
        "assert 'numpy' not in sys.modules, 'imported with rocketstore'\n"
        "config = StoreConfig(consume_queue_file_entries=8)\n"
        f"with MessageStore.open({store!r}, config) as store:\n"
        "    for i in range(40):\n"
        "        store.put(Message('T', b'x', queue_id=i % 2, keys=(f'k{i}',)))\n"
        f"with MessageStore.open({store!r}, config) as store:\n"
        "    assert len(store.get('T', 0, 0, 32).messages) == 20\n"
        "    assert [m.keys for m in store.query('T', 'k39')] == [['k39']]\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'numpy')[:1])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"
