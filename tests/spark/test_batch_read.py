"""Batch reads through Spark: the golden RocketMQ store, bounds, scan modes, key lookups, many stores."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from rocketstore import MessageStore
from rocketstore.spark import register
from rocketstore.spark.schema import COLUMNS
from tests.spark.spark_helpers import geometry_options, sample_messages, small_config, small_options

pytestmark = pytest.mark.spark


def _expected_row(m: dict[str, Any]) -> dict[str, Any]:
    """A message of expected.json in the source's column names and types."""
    return {
        "topic": m["topic"],
        "queueId": m["queueId"],
        "queueOffset": m["queueOffset"],
        "commitLogOffset": m["commitLogOffset"],
        "storeSize": m["storeSize"],
        "msgId": m["msgId"],
        "uniqKey": m["uniqKey"],
        "tags": m["tags"],
        "keys": [k for k in (m["keys"] or "").split(" ") if k],
        "properties": dict(m["properties"]),
        "body": bytes.fromhex(m["bodyHex"]),
        "flag": m["flag"],
        "sysFlag": m["sysFlag"],
        "bornTimestamp": m["bornTimestamp"],
        "bornHost": m["bornHost"],
        "storeTimestamp": m["storeTimestamp"],
        "storeHost": m["storeHost"],
        "reconsumeTimes": m["reconsumeTimes"],
        "bodyCRC": m["bodyCRC"],
    }


def _rows(df: Any) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


@pytest.fixture
def golden_options(golden_config: Any) -> dict[str, str]:
    return geometry_options(golden_config)


def test_golden_store_read_by_spark_equals_expected_json(spark, golden_store, golden_expected, golden_options):
    df = spark.read.format("rocketstore").options(**golden_options).load(str(golden_store))
    assert tuple(df.columns) == COLUMNS
    rows = _rows(df)
    assert {r["broker"] for r in rows} == {str(golden_store)}
    got = {r["commitLogOffset"]: {k: v for k, v in r.items() if k != "broker"} for r in rows}
    expected = {m["commitLogOffset"]: _expected_row(m) for m in golden_expected["messages_in_commitlog_order"]}
    assert len(rows) == len(expected) == 520
    assert got == expected


def test_golden_queue_counts_match_expected_offsets(spark, golden_store, golden_expected, golden_options):
    df = spark.read.format("rocketstore").options(**golden_options).load(str(golden_store))
    counts = {(r["topic"], str(r["queueId"])): r["count"] for r in df.groupBy("topic", "queueId").count().collect()}
    expected = {
        (topic, qid): q["maxOffset"] - q["minOffset"]
        for topic, queues in golden_expected["queues"].items()
        for qid, q in queues.items()
    }
    assert counts == expected


def test_commitlog_scan_returns_every_record_in_log_order(spark, golden_store, golden_expected, golden_options):
    df = (
        spark.read.format("rocketstore")
        .options(**golden_options, scan="commitlog", bytesPerPartition="40000")
        .load(str(golden_store))
    )
    assert df.rdd.getNumPartitions() >= 5  # 4 commitlog files, split further inside each
    offsets = [r.commitLogOffset for r in df.select("commitLogOffset").collect()]
    assert offsets == [m["commitLogOffset"] for m in golden_expected["messages_in_commitlog_order"]]


def test_commitlog_scan_sees_records_the_queues_do_not_have(spark, golden_store, golden_options):
    shutil.rmtree(golden_store / "consumequeue")
    queues = spark.read.format("rocketstore").options(**golden_options).load(str(golden_store))
    log = spark.read.format("rocketstore").options(**golden_options, scan="commitlog").load(str(golden_store))
    assert queues.count() == 0
    assert log.count() == 520


def test_offsets_bound_the_rows(spark, golden_store, golden_options):
    df = (
        spark.read.format("rocketstore")
        .options(**golden_options)
        .option("topics", "TopicA")
        .option("startingOffsets", '{"TopicA": {"0": 95, "2": -1}}')
        .option("endingOffsets", '{"TopicA": {"0": 105, "1": 3}}')
        .load(str(golden_store))
    )
    got = sorted((r.queueId, r.queueOffset) for r in df.select("queueId", "queueOffset").collect())
    expected = [(0, q) for q in range(95, 105)] + [(1, q) for q in range(3)] + [(3, q) for q in range(33)]
    assert got == expected


def test_timestamps_bound_the_rows(spark, golden_store, golden_expected, golden_options):
    times = sorted(m["storeTimestamp"] for m in golden_expected["messages_in_commitlog_order"])
    begin, end = times[100], times[300]
    for scan in ("queues", "commitlog"):
        df = (
            spark.read.format("rocketstore")
            .options(**golden_options, scan=scan, startingTimestamp=str(begin), endingTimestamp=str(end))
            .load(str(golden_store))
        )
        got = sorted(r.commitLogOffset for r in df.select("commitLogOffset").collect())
        expected = sorted(
            m["commitLogOffset"]
            for m in golden_expected["messages_in_commitlog_order"]
            if begin <= m["storeTimestamp"] < end
        )
        assert got == expected, scan


def test_topics_filter_applies_to_both_scans(spark, golden_store, golden_options):
    for scan in ("queues", "commitlog"):
        df = spark.read.format("rocketstore").options(**golden_options, scan=scan, topics="TopicB,TopicC")
        topics = {r.topic: r["count"] for r in df.load(str(golden_store)).groupBy("topic").count().collect()}
        assert topics == {"TopicB": 135, "TopicC": 134}, scan


def test_key_lookup_returns_the_messages_carrying_the_key(spark, golden_store, golden_expected, golden_options):
    df = spark.read.format("rocketstore").options(**golden_options, key="even").load(str(golden_store))
    got = sorted((r.topic, r.commitLogOffset) for r in df.select("topic", "commitLogOffset").collect())
    expected = sorted(
        (m["topic"], m["commitLogOffset"])
        for m in golden_expected["messages_in_commitlog_order"]
        if "even" in (m["keys"] or "").split(" ")
    )
    assert len(expected) > 64  # more than RocketMQ's maxMsgsNumBatch: the source is not capped
    assert got == expected


def test_two_stores_read_together_name_their_broker(spark, make_store):
    a = make_store("broker-a", sample_messages(30))
    b = make_store("broker-b", sample_messages(20, topics=("TopicB", "TopicC"), start=1000))
    df = spark.read.format("rocketstore").options(**small_options()).load(f"{a},{b}")
    counts = {(r.broker, r.topic): r["count"] for r in df.groupBy("broker", "topic").count().collect()}
    assert counts == {
        (str(a), "TopicA"): 15,
        (str(a), "TopicB"): 15,
        (str(b), "TopicB"): 10,
        (str(b), "TopicC"): 10,
    }
    globbed = spark.read.format("rocketstore").options(**small_options()).load(str(a.parent / "broker-*"))
    assert globbed.count() == 50
    listed = spark.read.format("rocketstore").options(**small_options()).load([str(a), str(b)])
    assert sorted(r.broker for r in listed.select("broker").distinct().collect()) == [str(a), str(b)]
    bodies = {r.body for r in df.where(f"broker = '{b}'").select("body").collect()}
    assert bodies == {m.body for m in sample_messages(20, topics=("TopicB", "TopicC"), start=1000)}


def test_spark_sql_over_a_registered_view(spark, golden_store, golden_options):
    register(spark)  # explicit registration works next to the automatic lookup
    spark.read.format("rocketstore").options(**golden_options).load(str(golden_store)).createOrReplaceTempView("m")
    rows = spark.sql(
        "SELECT topic, count(*) AS n, sum(size(keys)) AS k FROM m WHERE tags = 'TagA' GROUP BY topic ORDER BY topic"
    ).collect()
    assert [r.topic for r in rows] == ["TopicA", "TopicB", "TopicC"]
    assert all(r.n > 0 and r.k >= r.n for r in rows)


def test_queue_ranges_split_by_messages_per_partition(spark, golden_store, golden_options):
    df = (spark.read.format("rocketstore").options(**golden_options, scan="queues", messagesPerPartition="50")
          .load(str(golden_store)))
    # TopicA/0 holds 160 messages -> 4 ranges (50, 50, 50, 10); the 11 other queues hold < 50 each. A task
    # reads consecutive ranges while they add up to at most 50 messages: the last range of TopicA/0 goes
    # with the queue after it.
    from rocketstore.scan.options import ReadOptions
    from rocketstore.scan.plan import plan_partitions, tasks

    opts = ReadOptions.parse({**golden_options, "path": str(golden_store), "scan": "queues",
                              "messagesPerPartition": "50"})
    ranges = plan_partitions(opts)
    assert [r.end - r.start for r in ranges[:4]] == [50, 50, 50, 10] and len(ranges) == 4 + 11
    packed = tasks(ranges, 50, opts.bytes_per_partition)
    assert len(packed) < len(ranges)
    assert all(sum(r.end - r.start for r in task) <= 50 for task in packed)
    assert df.rdd.getNumPartitions() == len(packed)
    assert df.count() == 520


def test_bad_option_fails_with_its_name(spark, golden_store):
    with pytest.raises(Exception, match="scan"):
        spark.read.format("rocketstore").option("scan", "sideways").load(str(golden_store)).collect()


def test_missing_store_directory_fails(spark, tmp_path: Path):
    with pytest.raises(Exception, match="path"):
        spark.read.format("rocketstore").load(str(tmp_path / "absent")).collect()


def test_geometry_comes_from_the_store_when_not_given(spark, make_store):
    root = make_store("s", sample_messages(45))  # written with small files, recorded in config/rocketstore.json
    for scan in ("queues", "commitlog"):
        df = spark.read.format("rocketstore").option("scan", scan).load(str(root))
        assert sorted(int(r.properties["n"]) for r in df.select("properties").collect()) == list(range(45)), scan


def test_reads_run_beside_a_live_writer(spark, make_store):
    """Reads take no lock beside a writer. Its newest puts are in the log at once; their queue entries
    follow within one queue-flush interval (the dispatch behind the log), or at once after flush()."""
    root = make_store("s", sample_messages(20))

    def read(scan: str) -> list[int]:
        df = spark.read.format("rocketstore").option("scan", scan).load(str(root))
        return sorted(int(r.properties["n"]) for r in df.select("properties").collect())

    with MessageStore.open(root, small_config()) as writer:  # holds the store's lock
        for m in sample_messages(10, start=20):
            writer.put(m)
        assert read("commitlog") == list(range(30))
        seen = read("queues")
        assert seen[:20] == list(range(20)) and set(seen) <= set(range(30))
        writer.flush()
        assert read("queues") == list(range(30))
