"""Batch index building writes exactly the bytes that building one key at a time writes."""
# Every property test runs with deadline=None: no test asserts a timing (the machine is shared and noisy).

from __future__ import annotations

import itertools
from pathlib import Path
from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore.log import index_file, index_service
from rocketstore.log.index_file import KEY, IndexFile
from rocketstore.log.index_service import IndexService, index_keys_of

SLOTS, MAX_ENTRIES = 7, 12

keys = st.lists(st.text(st.sampled_from(["a", "b", "c", "é", " "]), max_size=4), max_size=3)
records = st.lists(st.tuples(st.sampled_from(["T1", "T2"]), st.integers(0, 3), st.integers(0, 2500), keys,
                             st.one_of(st.none(), st.just(""), st.text(st.sampled_from("xyz"), max_size=3))),
                   max_size=40)


def _files(directory: Path) -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted(directory.iterdir())]


def _as_batches(raw: list[tuple[str, int, int, list[str], str | None]], cuts: list[int]) -> list[list[tuple]]:
    """Give the generated records increasing offsets and cut them into batches at `cuts`; a batch's
    records share its store timestamp (the first record's step), the batches' timestamps go up."""
    phy, ts, batch, out = 0, 1_700_000_000_000, [], []
    for i, (topic, gap, step, k, uniq) in enumerate(raw):
        if i in cuts or not batch:
            ts += step
            batch = []
            out.append(batch)
        phy += 100 + gap
        batch.append((topic, phy, ts, tuple(k), uniq))
    return out


@settings(deadline=None, max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=records, cuts=st.lists(st.integers(0, 40), max_size=4))
def test_build_keys_writes_what_build_writes(tmp_path_factory, raw, cuts):
    """Each batch's keys as pack_run packs them, in one call, against one `build` per record: the same
    files, headers and answers, also when a file fills inside a batch or at its end."""
    batches = _as_batches(raw, cuts)
    roots = [tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("many")]
    services = []
    for root in roots:
        ticks = itertools.count(1_700_000_000_000, 7)
        services.append(IndexService(root, SLOTS, MAX_ENTRIES, clock=lambda t=ticks: next(t)))
    one, many = services
    for batch in batches:
        for topic, phy, ts, k, uniq in batch:
            one.build(topic, phy, ts, k, uniq)
        packed = bytearray(index_keys_of([(topic, phy, k, uniq) for topic, phy, _, k, uniq in batch]))
        _, _, ts, k, uniq = batch[-1]
        many.build_keys(packed, ts, ends_keyless=not (uniq or any(k)))
    if not batches:
        one.current()
        many.current()
    try:
        assert _files(roots[0] / "index") == _files(roots[1] / "index")
        assert [f.header for f in one.files] == [f.header for f in many.files]
        for topic, _, _, k, uniq in itertools.chain.from_iterable(batches):
            for key in [*k, uniq or "x"]:
                assert one.query(topic, key, 64, 0, 2**62) == many.query(topic, key, 64, 0, 2**62)
    finally:
        one.close()
        many.close()


def test_build_keys_skips_the_keys_of_messages_already_indexed(tmp_path):
    """A re-dispatch hands over keys the file holds already: only the newer ones are added."""
    service = IndexService(tmp_path, SLOTS, MAX_ENTRIES, clock=lambda: 1_700_000_000_000)
    service.build("T", 100, 1_700_000_000_000, ("a",), None)
    service.build("T", 150, 1_700_000_000_000, ("z",), None)
    packed = bytearray(index_keys_of([("T", 100, ("a",), None), ("T", 200, ("b", "c"), None)]))
    service.build_keys(packed, 1_700_000_000_000, ends_keyless=False)
    try:
        assert service.files[-1].header.index_count == 1 + 4  # entry numbers start at 1
        assert service.query("T", "a", 64, 0, 2**62) == [100]
        assert service.query("T", "c", 64, 0, 2**62) == [200]
    finally:
        service.close()


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
    stamp = 1_700_000_000_000
    packed = b"".join(KEY.pack(h, p) for h, p in zip(hashes, phys, strict=True))
    try:
        expected = sum(one.put_key(h, p, stamp) for h, p in zip(hashes[start:], phys[start:], strict=True))
        assert batch.put_keys(packed, stamp, start) == expected
        with mock.patch.object(index_file, "_native_put", None):
            assert python.put_keys(packed, stamp, start) == expected
        assert bytes(one.mm) == bytes(batch.mm) == bytes(python.mm)
        assert one.header == batch.header == python.header
    finally:
        for f in files:
            f.close()


@settings(deadline=None, max_examples=40)
@given(raw=st.lists(st.tuples(st.sampled_from(["T1", "主题"]), keys, st.sampled_from([None, "", "UNIQ-1", "\ud800"])),
                    min_size=8, max_size=40))
def test_index_keys_of_hashes_a_large_batch_as_it_hashes_each_key(raw):
    """Without the compiled module a batch of 16 keys or more is hashed in one go (numpy where it is
    installed): the same hashes as one key at a time."""
    records = [(topic, 100 * i, tuple(k), uniq) for i, (topic, k, uniq) in enumerate(raw)]
    one_by_one = b"".join(index_service.index_keys_of([r]) for r in records)
    with mock.patch.object(index_service, "speedups", None):
        assert index_service.index_keys_of(records) == one_by_one
