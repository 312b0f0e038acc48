"""A bounded fuzz of every compiled kernel against its pure-Python twin.

Each kernel of `rocketstore._speedups` is held to its twin by hypothesis tests (`_twin_tests()`: most live
beside the code they test, in tests/unit; `record_columns` and `index_put_keys` here). The fuzz feeds
each of those tests seeded random bytes through hypothesis' `fuzz_one_input` (the bytes pick the
generated values) for a share of a time budget, and reports how many inputs each kernel took. Every
input runs both sides: the compiled kernel and its twin give the same answer, raise the same error, or
the kernel declines (None) and writes nothing, leaving the answer to the twin.

    ROCKETSTORE_FUZZ_SECONDS   the budget in seconds, shared by the tests (default: none; then
                               QUICK_INPUTS inputs a test, enough to keep the fuzz itself tested,
                               and none for the tests that take fixtures: a whole hypothesis run each)
    ROCKETSTORE_FUZZ_SEED      the seed (default 30)

CI runs it with the sanitizer build of the module for a few minutes (`.ci/run`), where a read or write
outside a buffer, or undefined behaviour, stops the run with the sanitizer's report.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from rocketstore.format.index import index_file_size
from rocketstore.log.index_file import KEY, IndexFile
from rocketstore.native import speedups
from tests.unit.store import test_query_records as query_twins
from tests.unit.test_speedups import index_file  # noqa: F401  (the fixture of a twin test, found here by name)

pytestmark = pytest.mark.skipif(speedups is None, reason="the compiled module is not built (or "
                                                         "ROCKETSTORE_PURE_PYTHON is set)")


SEED = int(os.environ.get("ROCKETSTORE_FUZZ_SEED", "30"))
BUDGET_SECONDS = float(os.environ.get("ROCKETSTORE_FUZZ_SECONDS", "0") or 0)
QUICK_INPUTS = 3
INPUT_SIZES = (8, 32, 128, 512, 2048, 8192)
"""Lengths of the random inputs: hypothesis draws values from them until they run out (a short input
ends a test case early and is not counted)."""

INT64 = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from(
    [0, 1, -1, 2**31 - 1, 2**31, -(2**31), 2**63 - 1, 2**63 - 2, -(2**63), 2**62]))

# -- twins no other test holds: index_put_keys on any header, record_columns on any records ------------

SLOTS_AND_ENTRIES = st.tuples(st.integers(1, 8), st.integers(1, 12))


@settings(deadline=None, max_examples=300, database=None)
@given(SLOTS_AND_ENTRIES, st.lists(INT64, min_size=6, max_size=6), st.lists(st.tuples(INT64, INT64), max_size=6),
       INT64, st.integers(-2, 8), st.integers(-2, 8), st.binary(min_size=1, max_size=1))
def test_index_put_keys_twins_on_any_header(geometry, header, keys, store_ts, start, stop, fill):
    """index_put_keys answers what IndexFile._put_keys_py writes, or declines (None) without writing."""
    slots, max_entries = geometry
    packed = b"".join(KEY.pack(h, phy) for h, phy in keys)
    compiled = bytearray(fill * index_file_size(slots, max_entries))
    before = bytes(compiled)
    after = speedups.index_put_keys(compiled, slots, tuple(header), packed, store_ts, start, stop)
    if after is None:
        assert compiled == before
        return
    twin = bytearray(before)
    owner = SimpleNamespace(mm=twin, slots=slots)
    assert after == IndexFile._put_keys_py(owner, tuple(header), packed, store_ts, start, stop)  # type: ignore[arg-type]
    assert compiled == twin


def _record_strategy() -> st.SearchStrategy[bytes]:
    from tests.unit.test_speedups import records

    return records


@settings(deadline=None, max_examples=200, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_record_strategy(), min_size=1, max_size=4), st.lists(st.tuples(st.integers(0, 400),
                                                                             st.integers(0, 255)), max_size=3),
       st.lists(st.integers(-100, 100), max_size=4))
def test_record_columns_twins_on_records_and_damaged_ranges(raws, flips, cuts):
    """record_columns gives the batch the row path gives (`to_record_batch` of the decoded records), or
    declines; for a range that does not hold a whole record it declines, reading nothing past it."""
    np = pytest.importorskip("numpy")
    pyarrow = pytest.importorskip("pyarrow")
    from rocketstore.format.message import decode_record
    from rocketstore.scan import columnar
    from rocketstore.scan.records import to_record_batch

    buf = bytearray(b"".join(raws))
    for where, value in flips:
        if buf:
            buf[where % len(buf)] = value
    ends = np.cumsum([len(r) for r in raws], dtype=np.int64)
    starts = ends - np.array([len(r) for r in raws], dtype=np.int64)
    for i, cut in enumerate(cuts[:len(raws)]):
        ends[i] = min(max(starts[i], ends[i] + cut), len(buf))  # shorter or longer, never outside the data
    try:
        buffers = speedups.record_columns(bytes(buf), starts, ends)
    except ValueError as exc:
        pytest.fail(f"a range inside the data refused: {exc}")
    pooled = speedups.record_columns(bytes(buf), starts, ends, pyarrow.allocate_buffer)
    if buffers is None:
        assert pooled is None
        return
    assert [bytes(x) for x in pooled] == list(buffers)  # the same columns in the pool's memory
    messages = [decode_record(bytes(buf[a:b])) for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    assert columnar._from_buffers(len(raws), buffers, "b").equals(to_record_batch(messages, "b"))


@settings(deadline=None, max_examples=200, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_record_strategy(), min_size=1, max_size=5), st.lists(st.tuples(st.integers(0, 400),
                                                                             st.integers(0, 255)), max_size=3),
       st.lists(st.integers(-100, 100), max_size=5), st.lists(st.binary(max_size=3), max_size=3),
       st.lists(st.integers(0, 4), max_size=3))
def test_topic_rows_twins_on_records_and_damaged_ranges(raws, flips, cuts, others, taken):
    """topic_rows keeps the rows topic_rows_py keeps, or leaves the batch undecided where it does; the
    topics asked for are some of the records' own (found before the damage) and some others."""
    np = pytest.importorskip("numpy")
    from rocketstore.scan.columnar import NotColumnar, RecordLayout
    from rocketstore.scan.direct import topic_rows_py

    present = []
    for raw in raws:
        try:
            at = RecordLayout(np.frombuffer(raw, dtype=np.uint8), np.zeros(1, dtype=np.int64),
                              np.array([len(raw)], dtype=np.int64))
        except NotColumnar:
            continue
        present.append(raw[int(at.topic_begin[0]):int(at.topic_end[0])])
    topics = tuple(sorted(set(others) | {present[i % len(present)] for i in taken if present}))
    buf = bytearray(b"".join(raws))
    for where, value in flips:
        buf[where % len(buf)] = value
    ends = np.cumsum([len(r) for r in raws], dtype=np.int64)
    starts = ends - np.array([len(r) for r in raws], dtype=np.int64)
    for i, cut in enumerate(cuts[:len(raws)]):
        ends[i] = min(max(starts[i], ends[i] + cut), len(buf))  # shorter or longer, never outside the data
    keep = np.empty(len(raws), dtype=np.bool_)
    kept = speedups.topic_rows(bytes(buf), starts, ends, topics, keep)
    twin = topic_rows_py(bytes(buf), starts, ends, topics)
    if twin is None:
        assert kept == -1
    else:
        assert kept == int(twin.sum()) and keep.tolist() == twin.tolist()


BLANK = (8).to_bytes(4, "big") + (0xCBD43194).to_bytes(4, "big")


@settings(deadline=None, max_examples=200, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_record_strategy(), st.just(BLANK), st.binary(max_size=12)), min_size=1, max_size=6),
       st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 255)), max_size=3),
       st.tuples(st.integers(-2, 3000), st.integers(-2, 3000), st.integers(-2, 3000)),
       st.one_of(st.integers(0, 2**40), INT64), st.booleans(), st.integers(-1, 5), st.integers(-1, 3000),
       st.integers(0, 6))
def test_record_spans_twins_on_any_bytes(pieces, flips, positions, file_start, at_own_offsets, max_rows, max_bytes,
                                         room):
    """record_spans gives what record_spans_py gives (count, position, stop, the spans written), or raises
    the same ValueError, on records, blanks and junk, flipped bytes and any positions and limits."""
    np = pytest.importorskip("numpy")
    from rocketstore.format.spans import record_spans_py

    buf = bytearray(b"".join(pieces))
    at = 0
    for piece in pieces:  # records at their own offsets, as a commitlog file holds them
        if at_own_offsets and len(piece) >= 36 and 0 <= file_start + at < 2**63:
            buf[at + 28:at + 36] = (file_start + at).to_bytes(8, "big")
        at += len(piece)
    for where, value in flips:
        if buf:
            buf[where % len(buf)] = value
    pos, limit, written = positions
    answers = []
    for kernel in (speedups.record_spans, record_spans_py):
        starts, ends = np.full(room, -7, dtype=np.int64), np.full(room, -7, dtype=np.int64)
        try:
            answer: object = kernel(bytes(buf), pos, limit, written, file_start, max_rows, max_bytes, starts, ends)
        except ValueError as exc:
            answer = ("ValueError", str(exc))
        answers.append((answer, starts.tolist(), ends.tolist()))
    assert answers[0] == answers[1]


QUERY_KEYS = st.one_of(st.sampled_from(["k0", "k1", "键", "😀", "Aa", "BB", "x y", "U3", "", "\ud800"]),
                      st.text(max_size=4))
QUERY_TIMES = st.one_of(st.none(), st.integers(-5, 950), INT64)


@functools.cache
def _query_store() -> tuple[Any, list[int]]:
    """The store of tests/unit/store/test_query_records (colliding keys over several index files), opened
    read-only once for the process."""
    from rocketstore import MessageStore

    root = Path(tempfile.mkdtemp(prefix="rocketstore-fuzz-query-"))
    times = query_twins._written(root / "store")
    store = MessageStore.open(root / "store", query_twins.CONFIG, read_only=True)
    atexit.register(shutil.rmtree, root, True)
    atexit.register(store.close)
    return store, times


def _query_outcome(store: Any, compiled: bool, topic: str, key: str, bounds: dict[str, Any]) -> object:
    from rocketstore.errors import RocketStoreError
    from rocketstore.store import read_path

    saved = read_path._query_records
    read_path._query_records = saved if compiled else None
    try:
        return [(m.phy_offset, m.raw) for m in store.query(topic, key, **bounds)]
    except RocketStoreError as exc:
        return type(exc), str(exc)
    finally:
        read_path._query_records = saved


@settings(deadline=None, max_examples=50, database=None)
@given(st.sampled_from(["Orders", "Pay_ments", "Other", "None_such"]), QUERY_KEYS,
       st.one_of(st.sampled_from([1, 2, 5, 64, 1000]), st.integers(-2, 3000)), QUERY_TIMES, QUERY_TIMES)
def test_query_records_twins_on_any_bounds(topic, key, max_count, begin, end):
    """A query answers the same through query_records as through query_py, or refuses alike, for keys,
    counts and time bounds in and far outside the store's."""
    store, _ = _query_store()
    bounds: dict[str, Any] = {"max_count": max_count}
    if begin is not None:
        bounds["begin_ms"] = query_twins.START_MS + begin * 250 + begin % 3 - 1 if -5 <= begin <= 950 else begin
    if end is not None:
        bounds["end_ms"] = query_twins.START_MS + end * 250 + end % 2 if -5 <= end <= 950 else end
    assert _query_outcome(store, True, topic, key, bounds) == _query_outcome(store, False, topic, key, bounds)


# -- which tests hold which kernel ---------------------------------------------------------------------

NOT_FUZZED = {
    "layout": "constants, not a kernel: test_speedups holds them to the Python declarations",
    "msync": "a system call on a mapping (storage.fs); no value to compare",
    "populate": "a system call on a mapping (storage.fs); no value to compare",
    "MessageBase": "the type build_message and record_at fill: fuzzed through them",
    "MappedFileState": "the state MappedFile is: put_one, Appender and query_records read and write it, fuzzed "
                       "through them",
    "FileQueueState": "the files MappedFileQueue is: put_one reads them, fuzzed through it",
    "ConsumeQueueState": "the state ConsumeQueue is: put_one reads and writes it, fuzzed through it",
    "IndexFileState": "the state IndexFile is: put_one and query_records read and write it, fuzzed through them",
    "WriteMarks": "the marks WritePath is: Appender moves them on, fuzzed through it",
    "StoreLock": "a lock, no value to compare: tests/unit/test_kernels.py holds it to threading.Lock's answers",
}


def _twin_tests() -> dict[str, list[Callable[..., Any]]]:
    from tests.adversarial import test_hostile_arguments as hostile
    from tests.unit import test_speedups as su
    from tests.unit.format import test_fast_paths as fast
    from tests.unit.format import test_kept_prefix as queue_walks
    from tests.unit.log import test_index_batch as batch
    from tests.unit.log import test_index_damage as damage
    from tests.unit.store import test_hot_paths as hot
    from tests.unit.store import test_misplaced_entries as misplaced
    from tests.unit.store import test_put_one as put_one

    return {
        "build_message": [su.test_build_message_twins_on_records_and_damaged_records, su.test_message_getters_twins],
        "crc32": [su.test_crc32_twins],
        "crc32_portable": [su.test_crc32_twins],
        "decode_properties": [su.test_decode_properties_twins, fast.test_decode_properties_matches_rocketmqs_loop],
        "decode_run": [su.test_decode_run_twins,
                       misplaced.test_the_compiled_decode_loop_checks_the_queue_as_its_twin_does],
        "dispatch_packed": [su.test_dispatch_packed_twins],
        "dispatch_requests": [su.test_dispatch_requests_twins],
        "fill_slots": [hot.test_put_results_equal_the_dataclass_built_the_usual_way, su.test_put_results_twins],
        "get_run": [hot.test_a_plain_get_answers_what_the_general_reader_answers_on_damaged_queues],
        "index_damage": [damage.test_generated_damaged_and_whole_files_get_the_same_answer_from_both_twins],
        "index_lookup": [su.test_index_lookup_twins],
        "index_put_keys": [test_index_put_keys_twins_on_any_header,
                           batch.test_put_keys_writes_what_put_key_and_the_python_twin_write],
        "install_message_call": [hostile.test_the_compiled_prepare_takes_the_decisions_of_its_twin],
        "java_hash": [su.test_java_hash_twins],
        "java_hash_concat": [fast.test_java_hash_concat_matches_hash_of_the_concatenation],
        "pack_requests": [su.test_pack_requests_twins],
        "pack_run": [su.test_pack_run_twins, su.test_pack_run_packs_the_index_keys_of_index_keys_of],
        "prepare_many": [su.test_prepare_many_twins],
        "prepare_plain": [su.test_prepare_plain_twins,
                          hostile.test_the_compiled_prepare_takes_the_decisions_of_its_twin],
        "properties_at": [su.test_properties_at_twins],
        "Appender": [put_one.test_any_puts_leaving_their_dispatch_behind_write_the_same_store],
        "put_one": [put_one.test_any_single_puts_write_the_same_through_either_path],
        "put_results": [su.test_put_results_twins],
        "query_records": [test_query_records_twins_on_any_bounds],
        "queue_first_at_or_after": [queue_walks.test_queue_first_at_or_after_twins],
        "queue_kept_prefix": [queue_walks.test_queue_kept_prefix_twins],
        "queue_scan": [queue_walks.test_queue_scan_twins],
        "record_at": [su.test_record_at_twins],
        "record_columns": [test_record_columns_twins_on_records_and_damaged_ranges],
        "record_spans": [test_record_spans_twins_on_any_bytes],
        "topic_rows": [test_topic_rows_twins_on_records_and_damaged_ranges],
        "walk_records": [su.test_walk_records_twins],
    }


FIXTURES = ("index_file", "tmp_path_factory")
"""The pytest fixtures twin tests take besides their generated values."""


def _exported() -> set[str]:
    return {name for name in dir(speedups) if not name.startswith("_")}


def test_every_exported_kernel_is_fuzzed_or_says_why_not():
    tests = _twin_tests()
    assert _exported() == set(tests) | set(NOT_FUZZED)
    assert all(hasattr(t, "hypothesis") for ts in tests.values() for t in ts)


def _fuzz_bytes(test: Callable[..., Any], rng: random.Random, deadline: float, at_least: int) -> int:
    """Random inputs through `test`'s fuzz_one_input until `deadline` (and at least `at_least` ran)."""
    fuzz_one_input = test.hypothesis.fuzz_one_input  # type: ignore[attr-defined]
    ran = tries = 0
    while ran < at_least or time.monotonic() < deadline:
        data = rng.randbytes(rng.choice(INPUT_SIZES))
        tries += 1
        try:
            fuzz_one_input(data)
        except BaseException as exc:
            raise AssertionError(f"{test.__module__}.{test.__name__} failed on fuzz input {tries} "
                                 f"(ROCKETSTORE_FUZZ_SEED={SEED}): {data.hex()[:400]}") from exc
        ran = _RAN[0]
        if tries > 50 * max(at_least, 1) and ran == 0:
            raise AssertionError(f"{test.__name__}: no random input makes a whole test case")
    return ran


def _fuzz_seeds(test: Callable[..., Any], rng: random.Random, deadline: float, fixtures: dict[str, Any]) -> int:
    """Whole hypothesis runs of `test` (which takes pytest fixtures, so no fuzz_one_input), each from a new
    seed, until `deadline` (at least one)."""
    missing = object()
    saved = getattr(test, "_hypothesis_internal_use_seed", missing)
    try:
        while True:
            seed(rng.getrandbits(64))(test)
            test(**fixtures)
            if time.monotonic() >= deadline:
                return _RAN[0]
    finally:  # the attribute as it was: hypothesis reads it (None included) on every later run
        if saved is missing:
            del test._hypothesis_internal_use_seed  # type: ignore[attr-defined]
        else:
            test._hypothesis_internal_use_seed = saved  # type: ignore[attr-defined]


_RAN = [0]
"""Test cases run to the end by the twin test being fuzzed (its counting inner test adds to it)."""


def _fuzz(test: Callable[..., Any], rng: random.Random, deadline: float, at_least: int,
          fixtures: dict[str, Any]) -> int:
    """Inputs through `test` until `deadline`: the count of test cases that ran to the end."""
    handle = test.hypothesis  # type: ignore[attr-defined]
    inner = handle.inner_test

    def counted(*args: Any, **kwargs: Any) -> Any:
        answer = inner(*args, **kwargs)
        _RAN[0] += 1
        return answer

    _RAN[0] = 0
    handle.inner_test = counted
    try:
        if fixtures:
            return _fuzz_seeds(test, rng, deadline, fixtures)
        return _fuzz_bytes(test, rng, deadline, at_least)
    finally:
        handle.inner_test = inner


def test_fuzz_every_kernel_against_its_twin(request, capsys):
    tests = _twin_tests()
    distinct = list({id(t): t for ts in tests.values() for t in ts}.values())
    share = BUDGET_SECONDS / len(distinct)
    ran: dict[str, int] = {}
    seconds: dict[str, float] = {}
    started = time.monotonic()
    for test in distinct:
        params = inspect.signature(test.hypothesis.inner_test).parameters  # type: ignore[attr-defined]
        if not share and any(name in params for name in FIXTURES):
            continue  # a whole hypothesis run each: left to the budgeted fuzz and to the test's own module
        fixtures = {name: request.getfixturevalue(name) for name in FIXTURES if name in params}
        rng = random.Random(zlib.crc32(f"{SEED}:{test.__name__}".encode()))
        begun = time.monotonic()
        ran[test.__name__] = _fuzz(test, rng, begun + share, 0 if share else QUICK_INPUTS, fixtures)
        seconds[test.__name__] = time.monotonic() - begun
    elapsed = time.monotonic() - started
    lines = [f"kernel fuzz against the pure twins: seed {SEED}, {elapsed:.0f} s, {sum(ran.values())} inputs"]
    for kernel, ts in sorted(tests.items()):
        count = sum(ran.get(t.__name__, 0) for t in ts)
        spent = sum(seconds.get(t.__name__, 0.0) for t in ts)
        lines.append(f"  {kernel:22} {count:8d} inputs {spent:7.1f} s  ({', '.join(t.__name__ for t in ts)})")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    assert all(ran.values()), ran


def test_the_module_file_variable_loads_that_file_and_fails_on_one_that_does_not_load(tmp_path):
    """ROCKETSTORE_SPEEDUPS (how CI loads its sanitizer build) loads the module from that file; a file that
    does not load stops the import instead of leaving the pure twins to run unnoticed."""
    code = "from rocketstore.native import speedups; print(speedups.__file__)"
    env = {k: v for k, v in os.environ.items() if k != "ROCKETSTORE_PURE_PYTHON"}
    loaded = subprocess.run([sys.executable, "-c", code], env={**env, "ROCKETSTORE_SPEEDUPS": speedups.__file__},
                            capture_output=True, text=True, check=True)
    assert loaded.stdout.strip() == speedups.__file__
    bad = tmp_path / "_speedups.so"
    bad.write_bytes(b"not a shared object")
    refused = subprocess.run([sys.executable, "-c", code], env={**env, "ROCKETSTORE_SPEEDUPS": str(bad)},
                             capture_output=True, text=True)
    assert refused.returncode != 0 and "ImportError" in refused.stderr and str(bad) in refused.stderr
