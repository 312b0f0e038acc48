"""The read core without Spark: predicates, the prunes they give the plan, and `rocketstore.arrow`'s rows
held against a row-by-row evaluation of the same predicates (SQL's rule for nulls) over a full read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import rocketstore.arrow
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.scan.filters import EVERYTHING, Interval, Prune, predicates
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.plan import QueueRange, _read, plan_partitions
from tests.conftest import GOLDEN_GEOMETRY, copy_golden_store

GEOMETRY = {k: v for k, v in GOLDEN_GEOMETRY.items() if k != "store_host"}
OPTIONS = {"commitlogFileSize": 65536, "consumeQueueFileEntries": 100, "indexHashSlots": 100, "indexMaxEntries": 400}
KEY = ("broker", "commitLogOffset", "topic", "queueId", "queueOffset")


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_golden_store(tmp_path_factory.mktemp("golden") / "store")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three topics x three queues over several small commitlog files, a third of the messages untagged."""
    root = tmp_path_factory.mktemp("written") / "store"
    config = StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=10, index_hash_slots=16,
                         index_max_entries=9)
    with MessageStore.open(root, config) as store:
        for i in range(240):
            tags = ("TagA", "TagB", None)[i % 3]
            assert store.put(Message(("T1", "T2", "T3")[i % 3], b"x" * (20 + i % 50), queue_id=(i // 3) % 3,
                                     tags=tags, keys=[f"k{i}"])).ok
        for level in (2, 3):  # parked in SCHEDULE_TOPIC_XXXX, whose entries hold delivery times, not tags codes
            assert store.put(Message("T1", b"later", tags="TagA", properties={"DELAY": str(level)})).ok
    return root


def _holds(row: dict[str, Any], pred: tuple[Any, ...]) -> bool | None:
    """One predicate on one row, three-valued (None: unknown)."""
    column, op, value = (*pred, None)[:3]
    x = row[column]
    if op == "is null":
        return x is None
    if op == "is not null":
        return x is not None
    if x is None:
        return None
    if op in ("in", "not in"):
        hit = x in [v for v in value if v is not None]
        if op == "in":
            return True if hit else (None if None in value else False)
        return False if hit else (None if None in value else True)
    return {"=": x == value, "!=": x != value, "<": x < value, "<=": x <= value, ">": x > value,
            ">=": x >= value}[op]


def _rows(table: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in KEY) for r in table.to_pylist())


def _cases(full: list[dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    topics = sorted({r["topic"] for r in full})
    times = sorted(r["storeTimestamp"] for r in full)
    mid, quarter = times[len(times) // 2], times[len(times) // 4]
    offsets = sorted(r["commitLogOffset"] for r in full)
    one = full[len(full) // 3]
    return [
        [("topic", "=", topics[0])],
        [("topic", "in", [topics[0], topics[-1], None])],
        [("topic", "!=", topics[0])],
        [("topic", "not in", [topics[0]])],
        [("topic", "not in", [topics[0], None])],
        [("topic", "is null")],
        [("topic", "is not null"), ("queueId", "=", 1)],
        [("queueId", "in", [0, 2])],
        [("queueId", ">=", 2)],
        [("queueId", "<", 1), ("queueId", "!=", 0)],
        [("queueOffset", ">=", 3), ("queueOffset", "<", 9)],
        [("queueOffset", "=", 2**40)],
        [("queueOffset", "in", [1, 5, None])],
        [("commitLogOffset", ">", offsets[len(offsets) // 2])],
        [("commitLogOffset", "<=", offsets[10]), ("topic", "=", topics[-1])],
        [("commitLogOffset", "=", offsets[7])],
        [("commitLogOffset", "=", offsets[7] + 1)],
        [("storeTimestamp", ">=", mid)],
        [("storeTimestamp", ">", quarter), ("storeTimestamp", "<=", mid), ("topic", "=", topics[0])],
        [("msgId", "=", one["msgId"])],
        [("msgId", "=", one["msgId"].lower())],
        [("msgId", "=", "not an id")],
        [("msgId", "!=", one["msgId"]), ("queueId", "=", one["queueId"])],
        [("tags", "=", "TagA")],
        [("tags", "!=", "TagA")],
        [("tags", "is null")],
        [("tags", "is not null"), ("topic", "=", topics[0])],
        [("tags", "in", ["TagA", None])],
        [("tags", "in", ["TagB", ""])],
        [("tags", "=", "TagA"), ("tags", "in", ["TagA", "TagB"])],
        [("tags", "not in", ["TagB"])],
        [("tags", "not in", ["TagB", None])],
        [("storeSize", ">", 300), ("bodyCRC", "!=", 0)],
        [("topic", "=", one["topic"]), ("queueId", "=", one["queueId"]),
         ("queueOffset", "=", one["queueOffset"]), ("storeTimestamp", "=", one["storeTimestamp"])],
    ]


@pytest.mark.parametrize("scan", ["queues", "commitlog"])
@pytest.mark.parametrize("which", ["golden", "written"])
def test_arrow_reader_keeps_exactly_the_rows_the_predicates_hold_true_for(request, which, scan):
    root = request.getfixturevalue(which)
    options = {**(OPTIONS if which == "golden" else {}), "scan": scan, "messagesPerPartition": 7}
    full = rocketstore.arrow.read(str(root), options).read_all()
    rows = full.to_pylist()
    assert len(rows) > 200
    opts = ReadOptions.parse({**{k: str(v) for k, v in options.items()}, "path": str(root)})
    everything = plan_partitions(opts)
    for preds in _cases(rows):
        want = sorted(tuple(r[c] for c in KEY) for r in rows if all(_holds(r, p) is True for p in preds))
        got = _rows(rocketstore.arrow.read(str(root), options, filters=preds).read_all())
        assert got == want, preds
        assert len(plan_partitions(opts, Prune.of(predicates(preds)))) <= len(everything), preds


def test_the_plan_leaves_out_what_the_predicates_exclude(golden):
    opts = ReadOptions.parse({**{k: str(v) for k, v in OPTIONS.items()}, "path": str(golden),
                              "messagesPerPartition": "10", "scan": "queues"})
    full = rocketstore.arrow.read(str(golden), OPTIONS).read_all().to_pylist()
    everything = plan_partitions(opts)

    def plan(*preds: tuple[str, str, Any]) -> list[Any]:
        return plan_partitions(opts, Prune.of(predicates(preds)))

    by_topic = plan(("topic", "=", "TopicA"))
    assert by_topic and {p.topic for p in by_topic} == {"TopicA"} and len(by_topic) < len(everything)
    assert {(p.topic, p.queue_id) for p in plan(("queueId", "in", [1]))} == {
        (p.topic, 1) for p in everything if p.queue_id == 1}
    ranged = plan(("topic", "=", "TopicA"), ("queueId", "=", 0), ("queueOffset", ">=", 35), ("queueOffset", "<", 52))
    assert [(p.start, p.end) for p in ranged] == [(35, 45), (45, 52)]
    one = full[123]
    assert plan(("msgId", "=", one["msgId"])) == [
        QueueRange(str(golden), one["topic"], one["queueId"], one["queueOffset"], one["queueOffset"] + 1,
                   everything[0].config)]
    mid = sorted(r["storeTimestamp"] for r in full)[len(full) // 2]
    late = plan(("storeTimestamp", ">=", mid))
    assert sum(p.end - p.start for p in late) < sum(p.end - p.start for p in everything)
    assert plan(("topic", "is null")) == [] and plan(("topic", "not in", ["TopicA", None])) == []
    tagged = plan(("tags", "=", "TagA"))  # the same ranges, which read only the entries of TagA's code
    assert [(p.topic, p.queue_id, p.start, p.end) for p in tagged] == [
        (p.topic, p.queue_id, p.start, p.end) for p in everything]
    read = sum(b.num_rows for p in tagged for b in _read(opts, p))
    tag_a = sum(r["tags"] == "TagA" for r in full)
    assert tag_a <= read < len(full) // 2

    commitlog = ReadOptions.parse({**{k: str(v) for k, v in OPTIONS.items()}, "path": str(golden),
                                   "scan": "commitlog", "bytesPerPartition": "16384"})
    ranges = plan_partitions(commitlog)
    assert len(ranges) > 5
    cut = plan_partitions(commitlog, Prune.of(predicates([("commitLogOffset", ">=", 100000),
                                                          ("commitLogOffset", "<", 140000)])))
    assert 0 < len(cut) < len(ranges) and all(p.end > 100000 and p.start < 140000 for p in cut)


def test_prune_of_each_kind_of_predicate():
    assert Prune.of([]) == EVERYTHING
    assert Prune.of(predicates([("topic", "in", ["A", "B", None]), ("topic", "=", "B")])).topics == {"B"}
    assert Prune.of(predicates([("topic", "!=", "A")])).not_topics == {"A"}
    assert not Prune.of(predicates([("topic", "!=", "A")])).keeps_topic("A")
    assert Prune.of(predicates([("queueId", ">", 1), ("queueId", "<=", 4)])).queue_id == Interval(2, 5)
    assert Prune.of(predicates([("queueOffset", "in", [9, 4])])).queue_offset == Interval(4, 10)
    assert Prune.of(predicates([("msgId", "=", "7F00000100002A9F00000000000000D1")])).phy_offset == Interval(209, 210)
    assert Prune.of(predicates([("msgId", "=", "7f00000100002a9f00000000000000d1")])) == EVERYTHING
    assert Prune.of(predicates([("storeTimestamp", ">=", 5), ("storeTimestamp", "<", 3)])).store_time.empty
    assert Prune.of(predicates([("queueId", "is null")])).nothing
    assert Prune.of(predicates([("tags", "is null"), ("bornHost", "=", "x")])) == EVERYTHING
    assert Prune.of(predicates([("tags", "in", ["TagA", "TagB", None])])).tags_codes == {2598919, 2598920}
    assert Prune.of(predicates([("tags", "=", "TagA"), ("tags", "=", "TagB")])).tags_codes == frozenset()
    assert Prune.of(predicates([("tags", "=", "")])) == EVERYTHING
    assert Prune.of(predicates([("storeTimestamp", ">", (1 << 63) - 1)])).time_bounds(None, None) == (
        (1 << 63) - 1, None)


@pytest.mark.parametrize("bad", [
    [("nope", "=", 1)], [("keys", "=", "a")], [("queueId", "=", "1")], [("queueId", "=", True)],
    [("topic", "<", "A")], [("topic", "like", "A")], [("queueId", "in", 3)], [("tags", "is null", "x")],
    [("queueOffset", "=", 1 << 64)], [("topic",)],
])
def test_malformed_predicates_are_refused_by_name(bad):
    with pytest.raises(ValueError, match="[Ff]ilter"):
        predicates(bad)
