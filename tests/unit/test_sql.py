"""SQL over stores with DuckDB (`rocketstore.sql`): the rows of a query equal those of the same query over
the Arrow reader's full read, what DuckDB hands the scan becomes the reader's predicates, and what it
cannot hand on is still applied."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

import rocketstore.arrow
import rocketstore.sql
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import InvalidArgumentError
from rocketstore.sql import MessagesDataset, SqlUnavailableError, pushable
from tests.conftest import copy_golden_store

GOLDEN_OPTIONS = {"commitlogFileSize": 65536, "consumeQueueFileEntries": 100, "indexHashSlots": 100,
                  "indexMaxEntries": 400}


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_golden_store(tmp_path_factory.mktemp("golden") / "store")


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three topics x three queues over several small commitlog files; tags, keys and a quote in a tag."""
    root = tmp_path_factory.mktemp("written") / "store"
    config = StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=10, index_hash_slots=16,
                         index_max_entries=9)
    with MessageStore.open(root, config) as store:
        for i in range(240):
            tags = ("TagA", "TagB", None, 'Tag"Q\\uote')[i % 4]
            assert store.put(Message(("T1", "T2", "T3")[i % 3], f"body {i}".encode() * (1 + i % 9),
                                     queue_id=(i // 3) % 3, tags=tags, keys=[f"k{i}"])).ok
    return root


def _options(root: Path) -> dict[str, Any]:
    return GOLDEN_OPTIONS if root.parent.name.startswith("golden") else {}


def _queries(full: pa.Table) -> list[str]:
    times = sorted(full.column("storeTimestamp").to_pylist())
    offsets = sorted(full.column("commitLogOffset").to_pylist())
    first = full.slice(len(full) // 3, 1).to_pylist()[0]
    topics = sorted(set(full.column("topic").to_pylist()))
    return [
        "SELECT topic, count(*) AS n, sum(storeSize) AS bytes FROM messages GROUP BY topic",
        f"SELECT queueId, queueOffset, msgId FROM messages WHERE topic = '{topics[0]}'",
        f"SELECT topic, queueId, queueOffset FROM messages WHERE topic IN ('{topics[0]}', '{topics[-1]}') "
        f"AND queueId IN (0, 2)",
        f"SELECT topic, queueOffset FROM messages WHERE topic NOT IN ('{topics[0]}') AND tags IS NOT NULL",
        f"SELECT msgId, body FROM messages WHERE storeTimestamp >= {times[len(times) // 2]} "
        f"AND storeTimestamp < {times[3 * len(times) // 4]}",
        f"SELECT topic, queueId, queueOffset FROM messages WHERE storeTimestamp BETWEEN {times[10]} AND {times[40]}",
        f"SELECT * FROM messages WHERE msgId = '{first['msgId']}'",
        f"SELECT commitLogOffset FROM messages WHERE commitLogOffset > {offsets[len(offsets) // 2]} "
        "AND queueOffset < 5",
        "SELECT topic, tags, count(*) AS n FROM messages WHERE tags = 'TagA' OR tags IS NULL GROUP BY ALL",
        "SELECT topic, keys, properties FROM messages WHERE tags != 'TagB' AND topic LIKE 'T%'",
        "SELECT count(*) AS n FROM messages WHERE queueId = 1 AND queueOffset BETWEEN 2 AND 6",
        "SELECT count(*) AS n FROM messages WHERE NOT (queueId = 1) AND bornHost IS NOT NULL",
        "SELECT max(storeTimestamp) - min(storeTimestamp) AS span FROM messages WHERE reconsumeTimes = 0",
        "SELECT topic, queueOffset FROM messages WHERE tags = 'Tag\"Q\\uote'",
        "SELECT count(*) AS n FROM messages WHERE topic = 'NoSuchTopic'",
    ]


def _sorted(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(tuple(repr(v) for v in row.values()) for row in table.to_pylist())


@pytest.mark.parametrize("scan", ["queues", "commitlog"])
@pytest.mark.parametrize("which", ["golden", "written"])
def test_a_query_gives_the_rows_it_gives_over_the_arrow_readers_full_read(request, which, scan):
    root = request.getfixturevalue(which)
    options = {**_options(root), "scan": scan}
    full = rocketstore.arrow.read(str(root), options).read_all()
    assert len(full) >= 240
    plain = duckdb.connect()
    plain.register("messages", full)  # an Arrow table: DuckDB filters it itself
    con = rocketstore.sql.connect(str(root), options)
    for sql in _queries(full):
        want = plain.sql(sql).to_arrow_table()
        got = con.sql(sql).to_arrow_table()
        assert got.schema == want.schema, sql
        assert _sorted(got) == _sorted(want), sql


def test_the_readers_predicates_are_what_duckdb_hands_the_scan(written):
    dataset = MessagesDataset(str(written))
    con = duckdb.connect()
    con.register("messages", dataset)

    def pushed(sql: str) -> tuple[Any, ...]:
        dataset.scans.clear()
        con.sql(sql).fetchall()
        assert len(dataset.scans) == 1, sql
        return dataset.scans[0].pushed

    assert pushed("SELECT count(*) FROM messages WHERE topic = 'T1'") == (("topic", "=", "T1"),)
    assert set(pushed("SELECT msgId FROM messages WHERE storeTimestamp >= 5 AND storeTimestamp < 9000000000000 "
                      "AND queueId IN (0, 1)")) == {
        ("storeTimestamp", ">=", 5), ("storeTimestamp", "<", 9000000000000), ("queueId", "in", (0, 1))}
    assert pushed("SELECT 1 FROM messages WHERE topic NOT IN ('T1', 'T2') AND tags IS NULL") == (
        ("topic", "not in", ("T1", "T2")), ("tags", "is null", None))
    assert pushed("SELECT 1 FROM messages WHERE tags = 'Tag\"Q\\uote'") == (("tags", "=", 'Tag"Q\\uote'),)
    assert pushed("SELECT 1 FROM messages WHERE topic LIKE 'T%'") == ()  # DuckDB filters it itself
    assert pushed("SELECT 1 FROM messages WHERE topic = 'T1' OR queueId = 2") == ()  # an OR across columns
    assert dataset.scans[0].columns is not None and "body" not in dataset.scans[0].columns


def test_a_pushed_topic_time_and_offset_window_read_only_their_queue_ranges(written, monkeypatch):
    """The plan DuckDB's filter makes holds only the asked topic's queue ranges, cut to the window."""
    import rocketstore.arrow as arrow_module

    full = rocketstore.arrow.read(str(written)).read_all().filter(pc.equal(pc.field("topic"), "T2"))
    times = sorted(full.column("storeTimestamp").to_pylist())
    lo, hi = times[len(times) // 2], times[-1] + 1
    planned: list[Any] = []
    real = arrow_module.plan_partitions

    def spy(opts: Any, prune: Any) -> Any:
        parts = real(opts, prune)
        planned.extend(parts)
        return parts

    monkeypatch.setattr(arrow_module, "plan_partitions", spy)
    got = rocketstore.sql.query(str(written), f"SELECT count(*) AS n FROM messages WHERE topic = 'T2' "
                                              f"AND storeTimestamp >= {lo} AND storeTimestamp < {hi} "
                                              f"AND queueOffset >= 15 AND queueOffset < 25")
    want = [r for r in full.to_pylist() if lo <= r["storeTimestamp"] < hi and 15 <= r["queueOffset"] < 25]
    assert got.column("n").to_pylist() == [len(want)] and want
    assert planned and {p.topic for p in planned} == {"T2"}
    assert sum(p.end - p.start for p in planned) < len(full)


def test_pushable_takes_only_terms_it_reads_back_exactly():
    field = ds.field
    assert pushable(None) == ()
    assert pushable((field("topic") == "A") & (field("queueOffset") >= 3)) == (
        ("topic", "=", "A"), ("queueOffset", ">=", 3))
    assert pushable(field("topic") == 'a"b\\c') == (("topic", "=", 'a"b\\c'),)
    assert pushable(field("topic") == "é ünïcode") == (("topic", "=", "é ünïcode"),)
    assert pushable(field("body") == b"x") == ()  # bodies are not a predicate column
    assert pushable(field("storeTimestamp") > 1.5) == ()  # a float: not the column's type
    assert pushable((field("topic") == "A") | (field("queueId") == 1)) == ()
    assert pushable(~(field("queueId") == 1)) == ()  # DuckDB writes NOT (x = 1) as x != 1; this form is left


def test_bad_options_and_paths_are_named(tmp_path, written):
    with pytest.raises(InvalidArgumentError, match="scan"):
        rocketstore.sql.connect(str(written), {"scan": "sideways"})
    with pytest.raises(InvalidArgumentError, match="no store directory"):
        rocketstore.sql.connect(str(tmp_path / "missing"))


def test_without_duckdb_the_error_names_the_extra(monkeypatch, written):
    monkeypatch.setitem(sys.modules, "duckdb", None)  # import duckdb now raises ImportError
    with pytest.raises(SqlUnavailableError, match=r"pip install 'rocketstore\[sql\]'"):
        rocketstore.sql.connect(str(written))
