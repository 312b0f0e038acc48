"""The batched put path and the windowed get path against plain reference code on the same inputs.

Puts: every record equals what the reference encoder (`encode_message` with `encode_properties`) writes
for the PutResult's positions, and putting in batches writes the same files as putting one by one.
Gets and queries: the same answer as a straightforward walk over the consume queue / the whole log.
"""
# Every property test runs with deadline=None: no test asserts a timing (the machine is shared and noisy).

from __future__ import annotations

import contextlib
import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, PutResult, PutStatus, StoreConfig
from rocketstore.errors import MessageNotFoundError
from rocketstore.format.consume_queue import FILLER_SIZE, UNIT, UNIT_SIZE
from rocketstore.format.hosts import parse_host
from rocketstore.format.javahash import java_hash
from rocketstore.format.message import encode_message
from rocketstore.format.msgid import encode_msg_id
from rocketstore.format.properties import encode_properties, split_keys
from rocketstore.log.entry_run import get_run_py
from rocketstore.results import GetResult
from rocketstore.store import read_path
from rocketstore.store.write_path import _put_result

CONFIG = StoreConfig(commitlog_file_size=4096, consume_queue_file_entries=8, index_hash_slots=11,
                     index_max_entries=16)
STORE_HOST = parse_host(CONFIG.store_host)
HEALTH = [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]

words = st.text(st.sampled_from("abcé"), min_size=1, max_size=4)
messages = st.builds(
    lambda topic, body, queue_id, tags, keys, extra, sys_flag, born_host, born_ts: Message(
        topic, body, queue_id=queue_id, tags=tags, keys=keys, properties=extra, sys_flag=sys_flag,
        born_host=born_host, born_timestamp=born_ts, flag=queue_id * 3, reconsume_times=queue_id),
    topic=st.sampled_from(["TopicA", "TopicB"]),
    body=st.binary(max_size=120),
    queue_id=st.integers(0, 2),
    tags=st.one_of(st.none(), st.sampled_from(["TagA", "TagB", "TagC"])),
    keys=st.lists(words, max_size=3),
    extra=st.one_of(st.none(), st.dictionaries(st.sampled_from(["UNIQ_KEY", "p1", "p2", "KEYS"]), words,
                                               max_size=3)),
    sys_flag=st.sampled_from([0, 0x4, 0x8, 0xC, 0x1, 0x301]),
    born_host=st.sampled_from([None, "10.1.2.3:4567", "[::1]:99"]),
    born_ts=st.one_of(st.none(), st.integers(0, 2**40)),
)


def _expected_properties(m: Message) -> dict[str, str]:
    properties = dict(m.properties or {})
    if m.tags is not None and "TAGS" not in properties:
        properties["TAGS"] = m.tags
    if m.keys and "KEYS" not in properties:
        properties["KEYS"] = " ".join(m.keys)
    return properties


def _store_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.parts[len(root.parts)] in ("commitlog", "consumequeue", "index")}


def _open(root: Path) -> MessageStore:
    # a still clock: background services read it too, so a moving one would differ between two stores
    return MessageStore.open(root, CONFIG, clock=lambda: 1_700_000_000_000)


@settings(max_examples=20, deadline=None, suppress_health_check=HEALTH)
@given(batch=st.lists(messages, min_size=1, max_size=40), cuts=st.lists(st.integers(0, 40), max_size=4))
def test_put_batch_writes_the_reference_records_and_the_same_files_as_put(tmp_path_factory, batch, cuts):
    one_root, many_root = tmp_path_factory.mktemp("one"), tmp_path_factory.mktemp("many")
    with _open(one_root) as one, _open(many_root) as many:
        singles = [one.put(m) for m in batch]
        results = []
        bounds = sorted({0, len(batch), *(c for c in cuts if c < len(batch))})
        for lo, hi in itertools.pairwise(bounds):
            results += many.put_batch(batch[lo:hi])
        assert results == singles
        for m, r in zip(batch, results, strict=True):
            born_ip, born_port = parse_host(m.born_host) if m.born_host else (STORE_HOST[0], 0)
            expected = encode_message(
                topic=m.topic.encode(), body=m.body, properties=encode_properties(_expected_properties(m)).encode(),
                queue_id=m.queue_id, flag=m.flag, queue_offset=r.queue_offset, phy_offset=r.phy_offset,
                sys_flag=m.sys_flag, born_timestamp=r.store_timestamp if m.born_timestamp is None else m.born_timestamp,
                born_ip=born_ip, born_port=born_port, store_timestamp=r.store_timestamp, store_ip=STORE_HOST[0],
                store_port=STORE_HOST[1], reconsume_times=m.reconsume_times)
            assert many.message_at(r.phy_offset).raw == expected
            assert r.msg_id == encode_msg_id(STORE_HOST[0], STORE_HOST[1], r.phy_offset)
            assert r.size == len(expected)
        for m in batch:
            for key in [*m.keys, *(_expected_properties(m).get("UNIQ_KEY") or "x",)]:
                assert many.query(m.topic, key) == one.query(m.topic, key)
    assert _store_files(one_root) == _store_files(many_root)


def _reference_get(store: MessageStore, topic: str, queue_id: int, offset: int, max_count: int,
                   tags: str | None) -> tuple[list[int], int]:
    """RocketMQ's getMessage loop over the raw entries, read in one go."""
    wanted = None if tags in (None, "*") else {java_hash(t.strip()) for t in tags.split("||")}
    entries = list(store.queue_entries(topic, queue_id, offset, offset + max(800, max_count)))
    found, total, consumed = [], 0, 0
    for e in entries:
        if found and (len(found) >= max_count or total + e.size > 256 * 1024):
            break
        consumed += 1
        if wanted is not None and e.tags_code not in wanted:
            continue
        found.append(e.phy_offset)
        total += e.size
    return found, offset + consumed


@settings(max_examples=12, deadline=None, suppress_health_check=HEALTH)
@given(batch=st.lists(messages, min_size=1, max_size=120),
       reads=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 60), st.integers(1, 40),
                                st.sampled_from([None, "*", "TagA", "TagB || TagC", "TagZ"])), max_size=15))
def test_get_answers_what_a_plain_queue_walk_answers(tmp_path_factory, batch, reads):
    with _open(tmp_path_factory.mktemp("get")) as store:
        store.put_batch(batch)
        for queue_id, offset, max_count, tags in reads:
            got = store.get("TopicA", queue_id, offset, max_count, tags=tags)
            if offset >= store.max_offset("TopicA", queue_id):
                assert not got.messages
                continue
            phys, next_offset = _reference_get(store, "TopicA", queue_id, offset, min(max_count, 32), tags)
            assert [m.phy_offset for m in got.messages] == phys
            assert got.next_offset == next_offset
            assert list(store.iter_queue("TopicA", queue_id, offset, next_offset)) == \
                [store.message_at(e.phy_offset) for e in store.queue_entries("TopicA", queue_id, offset, next_offset)]


def _damage_entry(store: MessageStore, root: Path, queue_id: int, offset: int, kind: str,
                  records: list[tuple[int, int]]) -> None:
    """Overwrite entry `offset` of TopicA's queue `queue_id` (through its file: the store's mapping sees it)."""
    per_file = CONFIG.consume_queue_file_entries
    path = root / "consumequeue" / "TopicA" / str(queue_id) / f"{offset // per_file * per_file * UNIT_SIZE:020d}"
    phy, size = {"zero": (0, 0), "filler": (0, FILLER_SIZE), "past": (store.max_phy_offset + 64, 200),
                 "short": (records[offset % len(records)][0], 7)}.get(kind, records[offset % len(records)])
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, UNIT.pack(phy, size, 0), offset % per_file * UNIT_SIZE)
    finally:
        os.close(fd)


@settings(max_examples=25, deadline=None, suppress_health_check=HEALTH)
@given(batch=st.lists(messages, min_size=20, max_size=80),
       damage=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2**16),
                                 st.sampled_from(["other", "zero", "filler", "past", "short"])),
                       min_size=1, max_size=6))
def test_a_plain_get_answers_what_the_general_reader_answers_on_damaged_queues(tmp_path_factory, batch, damage):
    """A get without tags takes one run of the kernel when every entry of its window gives its message;
    whatever the entries (pointing at another record, fillers, zeros, past the log, a size cutting the
    record), its answer is the one the general reader (`tags="*"`, the same subscription) gives."""
    root = tmp_path_factory.mktemp("damaged")
    with _open(root) as store:
        store.put_batch(batch)
        records = [(m.phy_offset, m.size) for m in store.scan()]
        for queue_id, at, kind in damage:
            if (end := store.max_offset("TopicA", queue_id)) > 0:
                _damage_entry(store, root, queue_id, at % end, kind, records)
        for queue_id in range(3):
            for offset in range(store.max_offset("TopicA", queue_id) + 1):
                for max_count in (1, 3, 32):
                    general = _answer(store.get("TopicA", queue_id, offset, max_count, tags="*"))
                    assert _answer(store.get("TopicA", queue_id, offset, max_count)) == general
                    with _get_run(get_run_py):  # the twin of the compiled get_run, where it is built
                        assert _answer(store.get("TopicA", queue_id, offset, max_count)) == general


def _answer(result: GetResult) -> tuple[object, ...]:
    return (result.status, result.next_offset, result.min_offset, result.max_offset,
            [m.raw for m in result.messages])


@contextlib.contextmanager
def _get_run(kernel: Callable[..., Any]) -> Iterator[None]:
    """The plain get's kernel replaced by `kernel` inside the block."""
    saved = read_path.get_run
    read_path.get_run = kernel
    try:
        yield
    finally:
        read_path.get_run = saved


@pytest.mark.parametrize("twin", [False, True], ids=["kernel", "twin"])
def test_a_plain_get_of_whole_entries_is_answered_by_one_get_run(tmp_path, twin):
    """Every plain get whose window lies in one consume-queue file of whole entries is answered by the
    kernel (compiled where built, and its twin), with what the general reader answers; a window that
    crosses a file, an offset out of the queue and a subscription are declined or not asked."""
    kernel = get_run_py if twin else read_path.get_run
    answered: list[bool] = []

    def counting(*args: Any) -> Any:
        answer = kernel(*args)
        answered.append(answer is not None)
        return answer

    per_file, log_file = CONFIG.consume_queue_file_entries, CONFIG.commitlog_file_size
    with _open(tmp_path) as store, _get_run(counting):
        store.put_batch([Message("TopicA", b"m%d" % i, queue_id=i % 2, keys=(f"k{i}",)) for i in range(60)])
        phys = [e.phy_offset for e in store.queue_entries("TopicA", 0, 0, 30)]
        kernel_answers = 0
        for offset in range(31):
            for max_count in (1, 3, 32):
                answered.clear()
                got = _answer(store.get("TopicA", 0, offset, max_count))
                last = offset + min(30 - offset, max_count) - 1
                one_file = offset // per_file == last // per_file  # of the queue, and of the log:
                assert answered == [offset < 30 and one_file and phys[offset] // log_file == phys[last] // log_file]
                kernel_answers += answered[0]
                assert got == _answer(store.get("TopicA", 0, offset, max_count, tags="*"))
        assert kernel_answers > 40  # of the 90 gets
        answered.clear()
        store.get("TopicA", 0, 0, 3, tags="TagA")
        assert answered == []


@settings(max_examples=12, deadline=None, suppress_health_check=HEALTH)
@given(batch=st.lists(messages, min_size=1, max_size=60), key=words)
def test_query_answers_what_a_scan_of_the_log_answers(tmp_path_factory, batch, key):
    with _open(tmp_path_factory.mktemp("query")) as store:
        store.put_batch(batch)
        for topic in ("TopicA", "TopicB"):
            expected = [m.phy_offset for m in store.scan()
                        if m.topic == topic and (m.sys_flag & 0xC) != 0xC and
                        (key in split_keys(m.properties.get("KEYS")) or m.properties.get("UNIQ_KEY") == key)]
            assert [m.phy_offset for m in store.query(topic, key)] == expected[-CONFIG.max_query_results:]


@settings(max_examples=10, deadline=None, suppress_health_check=HEALTH)
@given(batch=st.lists(messages, min_size=1, max_size=40), sizes=st.lists(st.integers(-1, 300), max_size=3))
def test_message_at_answers_a_record_start_and_refuses_every_other_offset(tmp_path_factory, batch, sizes):
    """Every offset of the log, record starts and the rest (inside records, blanks, past the end), with
    no size, the record's size and others: a record start gives the record the scan decodes (when the
    size given holds it and stays within the file's data), anything else MessageNotFoundError."""
    with _open(tmp_path_factory.mktemp("at")) as store:
        store.put_batch(batch)
        records = {m.phy_offset: m for m in store.scan()}
        for phy in range(-1, store.commitlog.max_offset + 2):
            mf = store.commitlog.queue.find(phy)
            data_end = -1 if mf is None else mf.file_from_offset + mf.wrote_position
            for size in (None, *sizes, records[phy].size if phy in records else 1):
                if phy in records and (size is None or records[phy].size <= size and phy + size <= data_end):
                    assert store.commitlog.message_at(phy, size).raw == records[phy].raw
                else:
                    with pytest.raises(MessageNotFoundError):
                        store.commitlog.message_at(phy, size)


@settings(deadline=None)
@given(st.tuples(st.sampled_from(list(PutStatus)), st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1),
                 st.integers(0, 2**31), st.text(max_size=56), st.integers(0, 2**63 - 1), st.text(max_size=10),
                 st.integers(0, 2**31 - 1)))
def test_put_results_equal_the_dataclass_built_the_usual_way(values):
    made = _put_result(*values)
    assert type(made) is PutResult
    assert made == PutResult(*values) and hash(made) == hash(PutResult(*values))
