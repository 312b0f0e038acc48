"""Batch index building writes exactly the bytes that building one key at a time writes."""
# Every property test runs with deadline=None: no test asserts a timing (the machine is shared and noisy).

from __future__ import annotations

import itertools
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.log import index_file
from rocketstore.log.index_file import IndexFile
from rocketstore.log.index_service import IndexService

SLOTS, MAX_ENTRIES = 7, 12

keys = st.lists(st.text(st.sampled_from(["a", "b", "c", "é", " "]), max_size=4), max_size=3)
records = st.lists(st.tuples(st.sampled_from(["T1", "T2"]), st.integers(0, 3), st.integers(0, 2500), keys,
                             st.one_of(st.none(), st.just(""), st.text(st.sampled_from("xyz"), max_size=3))),
                   max_size=40)


def _files(directory: Path) -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(directory.iterdir())]


def _as_log(raw: list[tuple[str, int, int, list[str], str | None]]) -> list[tuple]:
    """Give the generated records increasing offsets and non-decreasing timestamps."""
    phy, ts, out = 0, 1_700_000_000_000, []
    for topic, gap, step, k, uniq in raw:
        phy += 100 + gap
        ts += step
        out.append((topic, phy, ts, tuple(k), uniq))
    return out


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=records, cut=st.integers(0, 40))
def test_build_many_writes_what_build_writes(tmp_path_factory, raw, cut):
    log = _as_log(raw)
    roots = [tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("many")]
    services = []
    for root in roots:
        ticks = itertools.count(1_700_000_000_000, 7)
        services.append(IndexService(root, SLOTS, MAX_ENTRIES, clock=lambda t=ticks: next(t)))
    one, many = services
    for topic, phy, ts, k, uniq in log:
        one.build(topic, phy, ts, k, uniq)
    many.build_many(log[:cut])  # two batches: a file may fill inside either
    many.build_many(log[cut:])
    if not log:
        one.current()
        many.current()
    try:
        assert _files(roots[0] / "index") == _files(roots[1] / "index")
        assert [f.header for f in one.files] == [f.header for f in many.files]
        for topic, _, _, k, uniq in log:
            for key in [*k, uniq or "x"]:
                assert one.query(topic, key, 64, 0, 2**62) == many.query(topic, key, 64, 0, 2**62)
    finally:
        one.close()
        many.close()


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hashes=st.lists(st.integers(0, 2**31 - 1), max_size=30), start=st.integers(0, 5),
       begin=st.integers(0, 1), room=st.integers(1, MAX_ENTRIES))
def test_put_keys_writes_what_put_key_and_the_python_twin_write(tmp_path_factory, hashes, start, begin, room):
    """One key at a time, a batch, and a batch through the pure-Python twin of the compiled writer:
    the same bytes and header, also when the file fills up part-way."""
    root = tmp_path_factory.mktemp("file")
    files = [IndexFile(root / name, SLOTS, MAX_ENTRIES, create=True) for name in ("one", "batch", "python")]
    for f in files:
        f.header.index_count = MAX_ENTRIES - room + 1 if room < MAX_ENTRIES else 1  # a partly used file
        if begin:  # a file that follows a full one starts with the previous file's end
            f.header.begin_timestamp = f.header.end_timestamp = 1_699_999_999_000
        f.write_header()
    one, batch, python = files
    phys = [1000 + 50 * i for i in range(len(hashes))]
    stamps = [1_700_000_000_000 + 400 * i for i in range(len(hashes))]
    try:
        expected = sum(one.put_key(h, p, t) for h, p, t in zip(hashes[start:], phys[start:], stamps[start:],
                                                                strict=True))
        assert batch.put_keys(hashes, phys, stamps, start) == expected
        with mock.patch.object(index_file, "_native_put", None):
            assert python.put_keys(hashes, phys, stamps, start) == expected
        assert bytes(one.mm) == bytes(batch.mm) == bytes(python.mm)
        assert one.header == batch.header == python.header
    finally:
        for f in files:
            f.close()
