"""A read narrowed by topic or queue only (option `topics`, a filter on topic or queueId) reads the queues'
records in log order, passing over the records of other topics on their bytes before any column is built
(`direct.topic_rows`), with the rows of the same read through the queues; `topic_rows` never leaves out a
record the full decode would give with a wanted topic, whatever bytes the records hold (seeded damage,
v1 and v2 records, topics of other lengths and with shared prefixes)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import rocketstore.arrow
import rocketstore.scan.direct as direct
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.message import MAGIC_V1, MAGIC_V2, decode_message
from rocketstore.scan.filters import Prune, predicates
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.plan import CommitLogRange, QueueRange, plan_partitions

FILE_SIZE = 16 * 1024
GEOMETRY = {"commitlogFileSize": FILE_SIZE, "consumeQueueFileEntries": 10}
SMALL = {**GEOMETRY, "bytesPerPartition": 4096, "messagesPerPartition": 7}
TOPICS = ("TopicA", "TopicAB", "TopicB", "T", "Topic%A|1")

pytestmark = pytest.mark.skipif(not direct.AVAILABLE, reason="the compiled record_columns is not built")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five topics (one a prefix of another, one of %, | and a digit) x three queues over many commitlog files."""
    root = tmp_path_factory.mktemp("topics") / "store"
    with MessageStore.open(root, StoreConfig(commitlog_file_size=FILE_SIZE, consume_queue_file_entries=10)) as s:
        for i in range(400):
            s.put(Message(TOPICS[i % len(TOPICS)], f"body-{i}".encode() * (1 + i % 6), queue_id=i % 3,
                          tags=f"T{i % 4}", keys=(f"k{i}",)))
    return root


def _opts(root: Path, **options: Any) -> ReadOptions:
    return ReadOptions.parse({**{k: str(v) for k, v in SMALL.items()}, "path": str(root), **options})


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.drop_columns(["broker"]).to_pylist(), key=lambda r: r["commitLogOffset"])


@pytest.mark.parametrize(("options", "filters"), [
    ({"topics": "TopicA"}, []),
    ({"topics": "TopicA,Topic%A|1"}, []),
    ({}, [("topic", "=", "TopicAB")]),
    ({}, [("topic", "in", ["T", "TopicB"])]),
    ({}, [("topic", "!=", "TopicA")]),
    ({}, [("queueId", "=", 1)]),
    ({"topics": "TopicB"}, [("queueId", "in", [0, 2])]),
    ({"topics": "TopicA"}, [("topic", "=", "TopicB")]),
])
def test_a_topic_or_queue_read_plans_log_order_with_the_rows_of_the_queues(
        store: Path, options: dict[str, str], filters: list[tuple[str, str, Any]]) -> None:
    parts = plan_partitions(_opts(store, **options), Prune.of(predicates(filters)))
    assert {type(p) for p in parts} <= {CommitLogRange}
    queued = rocketstore.arrow.read(str(store), {**SMALL, **options, "scan": "queues"}, filters=filters).read_all()
    got = rocketstore.arrow.read(str(store), {**SMALL, **options}, filters=filters).read_all()
    assert _rows(got) == _rows(queued)
    offsets = got.column("commitLogOffset").to_pylist()
    assert offsets == sorted(offsets)


def test_other_bounds_still_read_through_the_queues(store: Path) -> None:
    assert {type(p) for p in plan_partitions(_opts(store, topics="TopicA", startingOffsets='{"TopicA": {"0": 3}}'))} \
        == {QueueRange}
    assert {type(p) for p in plan_partitions(_opts(store), Prune.of(predicates([("queueOffset", ">", 3)])))} \
        == {QueueRange}
    assert {type(p) for p in plan_partitions(_opts(store), Prune.of(predicates([("tags", "=", "T1")])))} \
        == {QueueRange}


def test_records_of_other_topics_are_passed_over_before_their_columns_are_built(
        store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    columns_of = direct.columns_of

    def counting(data: Any, starts: np.ndarray, ends: np.ndarray, broker: str) -> Any:
        built.append(len(starts))
        return columns_of(data, starts, ends, broker)

    monkeypatch.setattr(direct, "columns_of", counting)
    got = rocketstore.arrow.read(str(store), {**SMALL, "topics": "TopicA"}).read_all()
    assert got.num_rows == sum(built) == 400 // len(TOPICS)
    built.clear()
    rocketstore.arrow.read(str(store), {**SMALL, "scan": "commitlog", "topics": "TopicB"}).read_all()
    assert sum(built) == 400 // len(TOPICS)


def _records(root: Path) -> tuple[bytes, np.ndarray, np.ndarray]:
    """One commitlog file's bytes and its records' starts and ends."""
    data = (root / "commitlog" / f"{0:020d}").read_bytes()
    starts, pos = [], 0
    while pos + 8 <= len(data):
        size = int.from_bytes(data[pos:pos + 4], "big", signed=True)
        if size <= 0 or int.from_bytes(data[pos + 4:pos + 8], "big") not in (MAGIC_V1, MAGIC_V2):
            break
        starts.append(pos)
        pos += size
    begin = np.array(starts, dtype=np.int64)
    return data, begin, np.append(begin[1:], pos)


def _as_v2(data: bytes, at: int, end: int) -> bytes:
    """The record at `[at, end)` rewritten as a v2 record (2-byte topic length)."""
    rec = bytearray(data[at:end])
    body = int.from_bytes(rec[84:88], "big")
    tl = rec[88 + body]
    rec[4:8] = MAGIC_V2.to_bytes(4, "big")
    rec[88 + body:89 + body] = tl.to_bytes(2, "big")
    rec[0:4] = len(rec).to_bytes(4, "big")
    return bytes(rec)


@pytest.mark.parametrize("seed", range(40))
def test_topic_rows_never_leaves_out_a_record_the_decoder_gives_with_a_wanted_topic(store: Path, seed: int) -> None:
    data, starts, ends = _records(store)
    rng = random.Random(seed)
    pieces, new_starts, at = [], [], 0
    for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
        rec = _as_v2(data, s, e) if rng.random() < 0.3 else data[s:e]
        if rng.random() < 0.2:  # damage a stretch of the record
            damaged = bytearray(rec)
            k = rng.randrange(len(damaged))
            for j in range(k, min(len(damaged), k + rng.choice([1, 2, 4, 40]))):
                damaged[j] = rng.choice([0, 0xFF, rng.randrange(256)])
            rec = bytes(damaged)
        new_starts.append(at)
        pieces.append(rec)
        at += len(rec)
    buf = b"".join(pieces)
    begin = np.array(new_starts, dtype=np.int64)
    end = np.append(begin[1:], at)
    wanted = tuple(sorted(t.encode() for t in rng.sample(TOPICS, rng.randint(1, 3))))
    decided = 0
    for lo in range(0, len(begin), 16):  # chunks: a record it cannot read leaves its whole chunk undecided
        keep = direct.topic_rows(buf, begin[lo:lo + 16], end[lo:lo + 16], wanted)
        if keep is None:
            continue
        for i in range(lo, min(lo + 16, len(begin))):
            try:
                topic = getattr(decode_message(buf[int(begin[i]):int(end[i])], 0), "topic", None)
            except Exception:  # the decoder gives no record here: leaving it out or not loses nothing
                continue
            if isinstance(topic, str):
                assert bool(keep[i - lo]) == (topic.encode() in wanted), (seed, i, topic)
                decided += 1
    assert decided > 0


@pytest.mark.parametrize(("rows", "nbytes"), [(5, 1 << 20), (4096, 700), (3, 100)])
def test_the_kept_records_make_batches_within_a_batchs_rows_and_bytes(
        store: Path, monkeypatch: pytest.MonkeyPatch, rows: int, nbytes: int) -> None:
    want = _rows(rocketstore.arrow.read(str(store), {**SMALL, "topics": "TopicA,TopicB"}).read_all())
    monkeypatch.setattr(direct, "BATCH_ROWS", rows)
    monkeypatch.setattr(direct, "BATCH_BYTES", nbytes)
    batches = list(rocketstore.arrow.read(str(store), {**SMALL, "topics": "TopicA,TopicB"}))
    for batch in batches:
        sizes = batch.column("storeSize").to_pylist()
        assert len(sizes) <= rows and (sum(sizes) <= nbytes or len(sizes) == 1), (len(sizes), sum(sizes))
    assert _rows(pa.Table.from_batches(batches)) == want


def test_a_read_of_some_queues_takes_ranges_as_much_longer_as_they_hold_fewer_messages(store: Path) -> None:
    every = plan_partitions(_opts(store, bytesPerPartition="4096"))
    one = plan_partitions(_opts(store, bytesPerPartition="4096", topics="TopicA"))  # a fifth of the messages
    assert all(isinstance(p, CommitLogRange) for p in every + one)
    total = every[-1].end - every[0].start
    assert len(one) <= -(-total // (5 * 4096)) < len(every)  # ranges of five times the bytes, cut evenly
    assert (one[0].end - one[0].start) > (every[0].end - every[0].start)
    assert one[0].start == every[0].start and one[-1].end == every[-1].end


def test_the_log_is_cut_into_ranges_of_about_the_same_length(store: Path) -> None:
    """As many ranges as `bytesPerPartition` makes, none a short leftover: each within a record or two
    of the even share (a leftover of a few records would be a Spark task of its own)."""
    whole = plan_partitions(_opts(store, bytesPerPartition=str(1 << 30)))
    total = whole[-1].end - whole[0].start
    step = total * 2 // 5  # two and a half ranges' worth: three ranges, not two and a leftover
    ranges = plan_partitions(_opts(store, bytesPerPartition=str(step)))
    lengths = [p.end - p.start for p in ranges]
    assert len(ranges) == 3 and sum(lengths) == total
    assert max(lengths) - min(lengths) < total // 10, lengths
