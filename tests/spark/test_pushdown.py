"""Filter pushdown (option filterPushdown): the same answers as without it, on the golden RocketMQ store and
a written one, in both scan modes, for every filter kind the source prunes by, their negations, OR and
nulls; the pruning seen in the partitions Spark plans; `rocketstore.arrow` giving Spark's rows. And
Spark 4.3's own behaviour with a toy Python data source: the read that one scan's pushdown planned is
kept on the relation and serves later scans of it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

import rocketstore.arrow
from rocketstore import MessageStore
from tests.conftest import GOLDEN_GEOMETRY, copy_golden_store
from tests.spark.spark_helpers import geometry_options, sample_messages, small_config

pytestmark = pytest.mark.spark

CONF = "spark.sql.python.filterPushdown.enabled"
KEY = ("broker", "commitLogOffset", "topic", "queueId", "queueOffset", "msgId", "tags", "storeTimestamp")


@contextmanager
def pushdown_conf(spark: Any, enabled: bool) -> Iterator[None]:
    """Spark's pushdown switch for the queries inside the block."""
    before = spark.conf.get(CONF)
    spark.conf.set(CONF, str(enabled).lower())
    try:
        yield
    finally:
        spark.conf.set(CONF, before)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, str]]]:
    """name -> (root, geometry options): the golden RocketMQ store and one written here (three topics of
    three queues over many small files, a third untagged)."""
    from rocketstore import StoreConfig

    golden = copy_golden_store(tmp_path_factory.mktemp("golden") / "store")
    golden_geometry = StoreConfig(**{k: v for k, v in GOLDEN_GEOMETRY.items() if k != "store_host"})
    written = tmp_path_factory.mktemp("written") / "store"
    with MessageStore.open(written, small_config()) as store:
        for message in sample_messages(300, topics=("TopicA", "TopicB", "TopicC"), queues=3):
            assert store.put(message).ok
    return {"golden": (golden, geometry_options(golden_geometry)),
            "written": (written, geometry_options(small_config()))}


def _load(spark: Any, root: Path, options: dict[str, str], pushdown: bool) -> Any:
    reader = spark.read.format("rocketstore").options(**options)
    if pushdown:
        reader = reader.option("filterPushdown", "true")
    return reader.load(str(root))


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted(tuple(r[c] for c in KEY) for r in df.select(*KEY).collect())


def _facts(root: Path, options: dict[str, str]) -> dict[str, Any]:
    rows = rocketstore.arrow.read(str(root), options).read_all().to_pylist()
    times = sorted(r["storeTimestamp"] for r in rows)
    offsets = sorted(r["commitLogOffset"] for r in rows)
    return {"mid": times[len(times) // 2], "quarter": times[len(times) // 4], "id": rows[len(rows) // 3]["msgId"],
            "lo": offsets[len(offsets) // 3], "hi": offsets[2 * len(offsets) // 3], "count": len(rows)}


# (SQL condition, the same as rocketstore.arrow filters or None)
CASES: list[tuple[str, Any]] = [
    ("topic = 'TopicA'", [("topic", "=", "TopicA")]),
    ("topic IN ('TopicA', 'TopicC')", [("topic", "in", ["TopicA", "TopicC"])]),
    ("topic <> 'TopicA'", [("topic", "!=", "TopicA")]),
    ("NOT (topic IN ('TopicA', 'TopicB'))", [("topic", "not in", ["TopicA", "TopicB"])]),
    ("topic IS NULL", [("topic", "is null")]),
    ("queueId = 1", [("queueId", "=", 1)]),
    ("queueId IN (0, 2) AND topic = 'TopicC'", [("queueId", "in", [0, 2]), ("topic", "=", "TopicC")]),
    ("queueId > 1 AND queueOffset BETWEEN 3 AND 9",
     [("queueId", ">", 1), ("queueOffset", ">=", 3), ("queueOffset", "<=", 9)]),
    ("NOT (queueOffset < 5)", [("queueOffset", ">=", 5)]),
    ("commitLogOffset >= {lo} AND commitLogOffset < {hi}",
     [("commitLogOffset", ">=", "{lo}"), ("commitLogOffset", "<", "{hi}")]),
    ("storeTimestamp >= {mid}", [("storeTimestamp", ">=", "{mid}")]),
    ("NOT (storeTimestamp >= {mid}) AND storeTimestamp > {quarter}",
     [("storeTimestamp", "<", "{mid}"), ("storeTimestamp", ">", "{quarter}")]),
    ("msgId = '{id}'", [("msgId", "=", "{id}")]),
    ("msgId <> '{id}' AND queueId = 0", [("msgId", "!=", "{id}"), ("queueId", "=", 0)]),
    ("tags = 'TagA'", [("tags", "=", "TagA")]),
    ("tags <> 'TagA'", [("tags", "!=", "TagA")]),
    ("tags IS NULL", [("tags", "is null")]),
    ("tags IS NOT NULL AND topic = 'TopicB'", [("tags", "is not null"), ("topic", "=", "TopicB")]),
    ("topic = 'TopicA' OR queueId = 1", None),
    ("topic = 'TopicA' OR tags IS NULL", None),
    ("(topic = 'TopicC' AND queueId = 0) OR msgId = '{id}'", None),
    ("size(keys) > 1 AND topic = 'TopicC'", None),
    ("properties['n'] IS NOT NULL AND queueOffset < 5", None),
]


def _fill(filters: Any, facts: dict[str, Any]) -> Any:
    if filters is None:
        return None
    filled = []
    for column, op, *rest in filters:
        value = rest[0] if rest else None
        if isinstance(value, str) and value.startswith("{"):
            value = facts[value[1:-1]]
            value = value if column == "msgId" else int(value)
        filled.append((column, op, value))
    return filled


@pytest.mark.parametrize("scan", ["queues", "commitlog"])
@pytest.mark.parametrize("name", ["golden", "written"])
def test_pushed_filters_give_the_answers_of_the_read_without_them(spark, stores, name, scan):
    root, geometry = stores[name]
    options = {**geometry, "scan": scan}
    facts = _facts(root, options)
    cases = CASES if (name, scan) == ("golden", "queues") else CASES[::3]
    nonempty = 0
    for sql, filters in cases:
        condition = sql.format(**facts)
        with pushdown_conf(spark, True):
            pushed = _rows(_load(spark, root, options, True).where(condition))
        with pushdown_conf(spark, False):
            plain = _rows(_load(spark, root, options, False).where(condition))
        assert pushed == plain, condition
        nonempty += bool(plain) and len(plain) < facts["count"]
        arrow_filters = _fill(filters, facts)
        if arrow_filters is not None:
            table = rocketstore.arrow.read(str(root), options, filters=arrow_filters).read_all()
            assert sorted(tuple(r[c] for c in KEY) for r in table.to_pylist()) == plain, condition
    assert nonempty >= len(cases) // 2  # the cases select something, not everything


def test_a_reused_dataframe_answers_each_of_its_filtered_queries(spark, stores):
    """Every query below pushes a filter, so each plans its own read (see the toy test for what Spark 4.3
    does with a query that pushes none)."""
    root, geometry = stores["golden"]
    facts = _facts(root, geometry)
    with pushdown_conf(spark, True):
        df = _load(spark, root, geometry, True)
        for condition in ["topic = 'TopicA'", "topic = 'TopicC' AND queueId = 2", f"msgId = '{facts['id']}'",
                          f"storeTimestamp < {facts['quarter']}", "topic = 'TopicA'", "tags IS NULL"]:
            with pushdown_conf(spark, False):
                plain = _rows(_load(spark, root, geometry, False).where(condition))
            assert _rows(df.where(condition)) == plain, condition
            assert plain


def test_pruning_shows_in_the_partitions_spark_plans(spark, stores):
    root, geometry = stores["golden"]
    facts = _facts(root, geometry)
    options = {**geometry, "messagesPerPartition": "10", "scan": "queues"}

    def partitions(condition: str, pushdown: bool) -> int:
        with pushdown_conf(spark, pushdown):
            return int(_load(spark, root, options, pushdown).where(condition).rdd.getNumPartitions())

    everything = partitions("queueOffset >= 0", False)
    assert everything > 20
    assert partitions("queueOffset >= 0", True) == everything
    assert partitions("topic = 'TopicA'", True) < everything
    assert partitions("topic = 'TopicA' AND queueId = 0 AND queueOffset >= 40 AND queueOffset < 60", True) == 2
    assert partitions(f"msgId = '{facts['id']}'", True) == 1
    assert partitions(f"storeTimestamp >= {facts['mid']}", True) < everything
    assert partitions("tags = 'TagA'", True) == everything  # the same ranges, read by their entries' tags codes
    commitlog = {**geometry, "scan": "commitlog", "bytesPerPartition": "16384"}
    with pushdown_conf(spark, True):  # one load each: see the toy test
        ranges = _load(spark, root, commitlog, True).rdd.getNumPartitions()
        cut = _load(spark, root, commitlog, True).where(f"commitLogOffset >= {facts['lo']} AND "
                                                        f"commitLogOffset < {facts['hi']}").rdd.getNumPartitions()
        assert 0 < cut < ranges


def test_the_option_needs_sparks_pushdown_switch(spark, stores):
    root, geometry = stores["written"]
    with pushdown_conf(spark, False):
        assert _load(spark, root, geometry, False).where("topic = 'TopicA'").count() == 100
        with pytest.raises(Exception, match="filterPushdown"):
            _load(spark, root, geometry, True).where("topic = 'TopicA'").count()


def _toy_source() -> Any:
    """A Python data source of rows x = 0..9, one partition each, whose pushFilters keeps the partition of
    `x = v` and hands every filter back. Defined in a function so that its classes travel by value."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, EqualTo, InputPartition

    class ToyReader(DataSourceReader):
        def __init__(self) -> None:
            self.wanted = None  # a fresh reader for each planning: nothing carried over

        def pushFilters(self, filters: list[Any]) -> Iterator[Any]:
            for f in filters:
                if isinstance(f, EqualTo) and f.attribute == ("x",):
                    self.wanted = f.value
                yield f

        def partitions(self) -> list[Any]:
            return [InputPartition(x) for x in range(10) if self.wanted in (None, x)]

        def read(self, partition: Any) -> Iterator[tuple[int]]:
            yield (partition.value,)

    class Toy(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketstore_toy_pushdown"

        def schema(self) -> str:
            return "x int"

        def reader(self, schema: Any) -> DataSourceReader:
            return ToyReader()

    return Toy


def test_spark_keeps_the_read_a_pushdown_planned_for_later_scans_of_the_relation(spark):
    """Spark 4.3 stores the read info (partitions and reader) a pushFilters call plans on the relation's
    provider, which every scan of that DataFrame shares, and reuses it for a scan that pushes no filter
    (or runs with the switch off); two scans of one DataFrame in one query both get the last one's.
    docs/spark.md ("Filter pushdown") and the option filterPushdown rest on this: when this test fails,
    Spark plans each scan apart and the advice there is to be revisited."""
    import pyspark

    spark.dataSource.register(_toy_source())
    with pushdown_conf(spark, True):
        df = spark.read.format("rocketstore_toy_pushdown").load()
        assert df.where("x = 3").count() == 1
        stale = df.count()
        union = spark.read.format("rocketstore_toy_pushdown").load()
        both = union.where("x = 1").union(union.where("x = 2")).count()
        fresh = spark.read.format("rocketstore_toy_pushdown").load()
        assert fresh.where("x = 3").count() == 1
    with pushdown_conf(spark, False):
        switched_off = fresh.count()  # served from the relation: no planning, so no refusal either
        with pytest.raises(Exception, match="DATA_SOURCE_PUSHDOWN_DISABLED"):
            spark.read.format("rocketstore_toy_pushdown").load().count()
    assert (stale, both, switched_off) == (1, 1, 1), f"pyspark {pyspark.__version__}"


def test_spark_filters_become_predicates_of_the_same_meaning():
    from pyspark.sql.datasource import (
        EqualNullSafe,
        EqualTo,
        GreaterThan,
        GreaterThanOrEqual,
        In,
        IsNotNull,
        IsNull,
        LessThan,
        LessThanOrEqual,
        Not,
        StringStartsWith,
    )

    from rocketstore.spark.batch import to_predicate

    q, t = ("queueOffset",), ("topic",)
    expected = [
        (EqualTo(t, "A"), ("topic", "=", "A")),
        (Not(EqualTo(t, "A")), ("topic", "!=", "A")),
        (In(t, ("A", "B")), ("topic", "in", ("A", "B"))),
        (Not(In(t, ("A", None))), ("topic", "not in", ("A", None))),
        (GreaterThan(q, 5), ("queueOffset", ">", 5)),
        (Not(GreaterThan(q, 5)), ("queueOffset", "<=", 5)),
        (GreaterThanOrEqual(q, 5), ("queueOffset", ">=", 5)),
        (Not(GreaterThanOrEqual(q, 5)), ("queueOffset", "<", 5)),
        (LessThan(q, 5), ("queueOffset", "<", 5)),
        (Not(LessThan(q, 5)), ("queueOffset", ">=", 5)),
        (LessThanOrEqual(q, 5), ("queueOffset", "<=", 5)),
        (Not(LessThanOrEqual(q, 5)), ("queueOffset", ">", 5)),
        (IsNull(("tags",)), ("tags", "is null", None)),
        (Not(IsNull(("tags",))), ("tags", "is not null", None)),
        (IsNotNull(("tags",)), ("tags", "is not null", None)),
        (Not(IsNotNull(("tags",))), ("tags", "is null", None)),
        (EqualNullSafe(t, "A"), ("topic", "=", "A")),
        (Not(EqualNullSafe(t, "A")), None),  # keeps a null
        (EqualNullSafe(t, None), None),
        (StringStartsWith(t, "A"), None),
        (EqualTo(("properties", "n"), "1"), None),
        (EqualTo(("keys",), ["a"]), None),
        (EqualTo(q, "5"), None),
        (EqualTo(("nope",), 1), None),
    ]
    for spark_filter, predicate in expected:
        assert to_predicate(spark_filter) == predicate, spark_filter


def test_push_filters_takes_only_the_filters_of_its_call_and_hands_back_each_one(stores):
    from pyspark.sql.datasource import EqualTo, GreaterThan, StringEndsWith

    from rocketstore.scan.options import ReadOptions
    from rocketstore.spark.batch import RocketStorePushdownReader

    root, geometry = stores["written"]
    reader = RocketStorePushdownReader(ReadOptions.parse({**geometry, "path": str(root), "filterPushdown": "true",
                                                          "scan": "queues"}))
    first = [EqualTo(("topic",), "TopicA"), StringEndsWith(("tags",), "A")]
    returned = list(reader.pushFilters(first))
    assert [id(f) for f in returned] == [id(f) for f in first]  # Spark matches them by reference
    assert reader.predicates == (("topic", "=", "TopicA"),)
    assert {p.topic for task in reader.partitions() for p in task.value} == {"TopicA"}
    second = [GreaterThan(("queueId",), 1)]
    assert list(reader.pushFilters(second)) == second
    assert reader.predicates == (("queueId", ">", 1),)
    assert {(p.topic, p.queue_id) for task in reader.partitions() for p in task.value} == {
        ("TopicA", 2), ("TopicB", 2), ("TopicC", 2)}
    assert list(reader.pushFilters([])) == [] and reader.predicates == ()
    assert sum(len(task.value) for task in reader.partitions()) > 3
