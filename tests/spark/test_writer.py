"""Writing DataFrames into a store: appends, roll-backs, the single-writer lock, the streaming sink."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from rocketstore import MessageStore
from rocketstore.spark.options import WriteOptions
from rocketstore.spark.writer import SINK_STATE_FILE, RocketStoreStreamWriter, StagedFile, load_sink_state
from tests.spark.spark_helpers import row_schema, sample_messages, small_config, small_options

pytestmark = pytest.mark.spark

ROW_SCHEMA = row_schema()


def _rows(count: int, start: int = 0) -> list[tuple[Any, ...]]:
    return [
        (f"Topic{i % 2}", f"payload-{i}", i % 3, f"Tag{i % 4}", [f"key-{i}", "all"], {"n": str(i)})
        for i in range(start, start + count)
    ]


def _stored(root: Path) -> list[Any]:
    with MessageStore.open(root, small_config(), read_only=True) as store:
        return list(store.scan())


def _new_store(root: Path, messages: int = 0) -> Path:
    with MessageStore.open(root, small_config()) as store:
        for m in sample_messages(messages):
            store.put(m)
    return root


def _save(df: Any, root: Path, **options: str) -> None:
    df.write.format("rocketstore").options(**small_options(), **options).mode("append").save(str(root))


def test_append_writes_every_row_once_with_its_fields(spark, tmp_path):
    root = _new_store(tmp_path / "store", messages=5)
    df = spark.createDataFrame(_rows(40), ROW_SCHEMA).repartition(3)
    _save(df, root)
    written = [m for m in _stored(root) if m.topic in ("Topic0", "Topic1")]
    assert len(written) == 40
    by_n = {int(m.properties["n"]): m for m in written}
    assert sorted(by_n) == list(range(40))
    for i, m in by_n.items():
        assert (m.topic, m.body, m.queue_id, m.tags, m.keys) == (
            f"Topic{i % 2}", f"payload-{i}".encode(), i % 3, f"Tag{i % 4}", [f"key-{i}", "all"]
        )
    with MessageStore.open(root, small_config(), read_only=True) as store:
        assert [m.properties["n"] for m in store.query("Topic1", "key-7")] == ["7"]
        assert store.max_offset("Topic0", 0) == 7  # n = 0, 6, 12, ... 36
    assert not os.listdir(root / "spark-staging")  # staged files are gone after the commit


def test_topic_option_and_binary_body(spark, tmp_path):
    root = tmp_path / "store"
    schema = StructType([StructField("body", BinaryType())])
    df = spark.createDataFrame([(bytes([i, 0, 255]),) for i in range(6)], schema)
    _save(df, root, topic="Bin")
    stored = _stored(root)
    assert sorted(m.body for m in stored) == sorted(bytes([i, 0, 255]) for i in range(6))
    assert {(m.topic, m.queue_id) for m in stored} == {("Bin", 0)}


def test_written_rows_read_back_through_spark(spark, tmp_path):
    root = tmp_path / "store"
    _save(spark.createDataFrame(_rows(12), ROW_SCHEMA), root)
    back = spark.read.format("rocketstore").options(**small_options()).load(str(root))
    got = sorted((r.topic, r.body.decode(), r.properties["n"]) for r in back.collect())
    assert got == sorted((t, b, p["n"]) for t, b, _, _, _, p in _rows(12))


def test_failed_task_rolls_back_the_whole_job(spark, tmp_path):
    root = _new_store(tmp_path / "store", messages=7)
    before = _stored(root)
    rows = _rows(30) + [("Topic0", None, 0, None, None, None)]  # a row without a body fails its task
    df = spark.createDataFrame(rows, ROW_SCHEMA).repartition(4)
    with pytest.raises(Exception, match="body"):
        _save(df, root)
    assert _stored(root) == before


def test_row_the_store_rejects_rolls_back_the_whole_job(spark, tmp_path):
    root = _new_store(tmp_path / "store", messages=3)
    before = _stored(root)
    rows = _rows(50) + [("bad topic!", "x", 0, None, None, None)]
    with pytest.raises(Exception, match="topic"):
        _save(spark.createDataFrame(rows, ROW_SCHEMA).repartition(3), root)
    assert _stored(root) == before


def test_job_fails_and_appends_nothing_while_another_writer_owns_the_store(spark, tmp_path):
    root = _new_store(tmp_path / "store", messages=2)
    before = _stored(root)
    with MessageStore.open(root, small_config()), pytest.raises(Exception, match="[Ll]ock"):
        _save(spark.createDataFrame(_rows(5), ROW_SCHEMA), root)
    assert _stored(root) == before


def test_overwrite_is_refused(spark, tmp_path):
    with pytest.raises(Exception, match="append"):
        spark.createDataFrame(_rows(1), ROW_SCHEMA).write.format("rocketstore").mode("overwrite").save(
            str(tmp_path / "store")
        )


def test_streaming_sink_appends_each_batch_once(spark, make_store, tmp_path):
    source = make_store("source", sample_messages(30))
    target = tmp_path / "target"

    def run() -> None:
        stream = (
            spark.readStream.format("rocketstore")
            .options(**small_options(), startingOffsets="earliest", maxMessagesPerTrigger="8")
            .load(str(source))
            .selectExpr("topic", "body", "queueId", "tags", "keys", "properties")
        )
        query = (
            stream.writeStream.format("rocketstore")
            .options(**small_options(), sinkId="copy")
            .option("checkpointLocation", str(tmp_path / "cp"))
            .trigger(availableNow=True)
            .start(str(target))
        )
        query.awaitTermination(120)

    run()
    with MessageStore.open(source, small_config()) as store:
        for m in sample_messages(6, start=30):
            store.put(m)
    run()
    copied = _stored(target)
    assert sorted(int(m.properties["n"]) for m in copied) == list(range(36))
    assert load_sink_state(str(target))["copy"]["state"] == "committed"


def _stage(tmp_path: Path, name: str, messages: list[Any]) -> StagedFile:
    import pickle

    path = tmp_path / name
    with open(path, "wb") as fh:
        pickle.dump(messages, fh)
    return StagedFile(str(path), 0, len(messages))


def test_sink_skips_a_replayed_batch_and_resumes_a_torn_one(tmp_path):
    root = _new_store(tmp_path / "store")
    writer = RocketStoreStreamWriter(WriteOptions.parse({"path": str(root), **small_options(), "sinkId": "s1"}))
    writer.commit([_stage(tmp_path, "b0", sample_messages(5))], 0)
    writer.commit([_stage(tmp_path, "b0-again", sample_messages(5))], 0)  # replay of batch 0
    assert len(_stored(root)) == 5
    # A crash while appending batch 1: 3 of its 6 messages reached the log before the state said done.
    batch1 = sample_messages(6, start=5)
    with MessageStore.open(root, small_config()) as store:
        start = store.max_phy_offset
        store.put_batch(batch1[:3])
    state_path = root / "config" / SINK_STATE_FILE
    state = json.loads(state_path.read_text())
    state["s1"] = {"batchId": 1, "state": "appending", "startPhyOffset": start}
    state_path.write_text(json.dumps(state))
    writer.commit([_stage(tmp_path, "b1", batch1)], 1)
    assert sorted(int(m.properties["n"]) for m in _stored(root)) == list(range(11))
    writer.commit([_stage(tmp_path, "b0-late", sample_messages(2, start=90))], 0)  # older than committed
    assert len(_stored(root)) == 11
    assert load_sink_state(str(root))["s1"] == {"batchId": 1, "state": "committed", "startPhyOffset": start}
