"""Streaming reads: per-queue offsets, micro-batches of new messages, limits, restarts from checkpoints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketstore import MessageStore
from rocketstore.spark.options import StreamOptions
from rocketstore.spark.streaming import DataLossError, RocketStoreStreamReader, allocate
from tests.spark.spark_helpers import sample_messages, small_config, small_options

pytestmark = pytest.mark.spark


def _put(root: Path, messages: list[Any]) -> None:
    with MessageStore.open(root, small_config()) as store:
        for message in messages:
            assert store.put(message).ok


def _ids(rows: list[Any]) -> list[tuple[str, int, int]]:
    return sorted((r.topic, r.queueId, r.queueOffset) for r in rows)


def _recording_query(spark: Any, root: Path, checkpoint: Path, batches: dict[int, list[Any]],
                     **options: str) -> Any:
    def record(df: Any, batch_id: int) -> None:
        batches[batch_id] = df.collect()

    stream = spark.readStream.format("rocketstore").options(**small_options(), **options).load(str(root))
    return stream.writeStream.foreachBatch(record).option("checkpointLocation", str(checkpoint))


def test_allocate_shares_rows_evenly_and_gives_leftovers_to_bigger_queues() -> None:
    assert allocate({"a": 100, "b": 2, "c": 100}, 10) == {"a": 4, "b": 2, "c": 4}
    assert allocate({"a": 3, "b": 0}, 10) == {"a": 3, "b": 0}
    assert sum(allocate({f"q{i}": 5 for i in range(7)}, 3).values()) == 3


def test_stream_picks_up_exactly_the_messages_put_after_the_previous_trigger(spark, make_store, tmp_path):
    root = make_store("s", sample_messages(20))
    batches: dict[int, list[Any]] = {}
    query = _recording_query(spark, root, tmp_path / "cp", batches, startingOffsets="earliest").start()
    try:
        query.processAllAvailable()
        first = [row for rows in batches.values() for row in rows]
        assert len(first) == 20
        seen = len(batches)
        _put(root, sample_messages(15, start=20))
        query.processAllAvailable()
        later = [row for batch_id, rows in sorted(batches.items()) if batch_id >= seen for row in rows]
    finally:
        query.stop()
    with MessageStore.open(root, small_config(), read_only=True) as store:
        new = [m for m in store.scan() if int(m.properties["n"]) >= 20]
    assert _ids(later) == sorted((m.topic, m.queue_id, m.queue_offset) for m in new)
    assert {bytes(r.body) for r in later} == {m.body for m in sample_messages(15, start=20)}


def test_starting_latest_skips_what_was_there(spark, make_store, tmp_path):
    root = make_store("s", sample_messages(12))
    batches: dict[int, list[Any]] = {}
    query = _recording_query(spark, root, tmp_path / "cp", batches).start()  # default: latest
    try:
        query.processAllAvailable()
        _put(root, sample_messages(5, start=12))
        query.processAllAvailable()
    finally:
        query.stop()
    rows = [row for rows in batches.values() for row in rows]
    assert sorted(int(r.properties["n"]) for r in rows) == list(range(12, 17))


def test_available_now_honours_max_messages_per_trigger(spark, make_store, tmp_path):
    root = make_store("s", sample_messages(35))
    batches: dict[int, list[Any]] = {}
    writer = _recording_query(spark, root, tmp_path / "cp", batches, startingOffsets="earliest",
                              maxMessagesPerTrigger="10")
    writer.trigger(availableNow=True).start().awaitTermination(120)
    sizes = [len(rows) for _, rows in sorted(batches.items())]
    assert sizes == [10, 10, 10, 5]
    assert len({(r.topic, r.queueId, r.queueOffset) for rows in batches.values() for r in rows}) == 35


def test_restart_from_checkpoint_resumes_exactly_once(spark, make_store, tmp_path):
    root = make_store("s", sample_messages(25))
    out, checkpoint = tmp_path / "out", tmp_path / "cp"

    def run() -> None:
        stream = (
            spark.readStream.format("rocketstore")
            .options(**small_options(), startingOffsets="earliest", maxMessagesPerTrigger="9")
            .load(str(root))
        )
        query = (
            stream.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)

    run()
    assert spark.read.parquet(str(out)).count() == 25
    _put(root, sample_messages(14, start=25))
    run()
    run()  # nothing new: must add nothing
    rows = spark.read.parquet(str(out)).select("topic", "queueId", "queueOffset", "properties").collect()
    assert len(rows) == 39
    assert len(set(_ids(rows))) == 39
    assert sorted(int(r.properties["n"]) for r in rows) == list(range(39))


def test_offsets_are_per_queue_and_new_queues_start_at_their_minimum(make_store):
    root = make_store("s", sample_messages(8))
    reader = RocketStoreStreamReader(StreamOptions.parse({"path": str(root), **small_options(),
                                                          "startingOffsets": '{"TopicA": {"0": 1}}'}))
    start = reader.initialOffset()
    assert start == {"TopicA/0": 1, "TopicA/1": 2, "TopicB/0": 2, "TopicB/1": 2}
    _put(root, sample_messages(1, topics=("TopicN",)))
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["TopicN/0"] == 1
    parts = reader.partitions(start, end)
    ranges = [r for p in parts for r in p.value]  # Spark input partitions holding the read core's queue ranges
    assert len(parts) == 1  # two ranges of one message each: one task
    assert [(r.topic, r.queue_id, r.start, r.end) for r in ranges] == [("TopicA", 0, 1, 2), ("TopicN", 0, 0, 1)]


def test_deleted_unread_offsets_fail_or_skip_by_fail_on_data_loss(make_store):
    root = make_store("s", sample_messages(4))
    for fail, expect in ((True, DataLossError), (False, None)):
        reader = RocketStoreStreamReader(StreamOptions.parse({"path": str(root), **small_options(),
                                                              "failOnDataLoss": str(fail).lower()}))
        start = reader.initialOffset()
        # Pretend the queue's retained minimum moved past offset 0 of TopicA/0.
        reader._bounds = _shifted(reader._bounds, "TopicA/0", 1)  # type: ignore[method-assign]
        start["TopicA/0"] = 0
        from pyspark.sql.streaming.datasource import ReadAllAvailable

        if expect is None:
            assert reader.latestOffset(start, ReadAllAvailable())["TopicA/0"] == 1
        else:
            with pytest.raises(expect, match="failOnDataLoss"):
                reader.latestOffset(start, ReadAllAvailable())


def _shifted(bounds: Callable[[], Any], key: str, low: int) -> Callable[[], Any]:
    def shifted() -> Any:
        result = bounds()
        for per_root in result.values():
            if key in per_root:
                per_root[key] = (low, per_root[key][1])
        return result

    return shifted
