"""`rocketstore sql`: the real command in a subprocess over the golden RocketMQ store and written stores."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from tests.cli.cliharness import assert_one_line_error, run_cli
from tests.conftest import GOLDEN_DIR, copy_golden_store

GOLDEN_FLAGS = ["--commitlog-file-size", "65536", "--consume-queue-file-entries", "100", "--index-hash-slots", "100",
                "--index-max-entries", "400"]


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_golden_store(tmp_path_factory.mktemp("golden") / "store")


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """brokers/a/store and brokers/b/store: 30 and 20 messages of topic Orders, a tab in one body."""
    base = tmp_path_factory.mktemp("brokers")
    for name, count in (("a", 30), ("b", 20)):
        with MessageStore.open(base / name / "store", StoreConfig(commitlog_file_size=64 * 1024)) as store:
            for i in range(count):
                assert store.put(Message("Orders", f"{name}\t{i}".encode(), queue_id=i % 2, tags="new")).ok
    return base


def test_count_by_topic_on_the_golden_store_equals_expected_json(golden):
    expected = json.loads((GOLDEN_DIR / "expected.json").read_text(encoding="utf-8"))
    result = run_cli("sql", golden, "SELECT topic, count(*) AS n FROM messages GROUP BY topic ORDER BY topic",
                     *GOLDEN_FLAGS)
    counts: dict[str, int] = {}
    for message in expected["messages_in_commitlog_order"]:
        counts[message["topic"]] = counts.get(message["topic"], 0) + 1
    assert result.tsv() == [{"topic": t, "n": str(n)} for t, n in sorted(counts.items())]
    assert result.err.strip() == f"{len(counts)} row(s)"


def test_json_lines_and_a_glob_of_stores(stores):
    result = run_cli("--json", "sql", str(stores / "*" / "store"),
                     "SELECT broker, count(*) AS n, min(body) AS first FROM messages GROUP BY broker ORDER BY broker")
    rows = result.json_lines()
    assert [(Path(r["broker"]).parent.name, r["n"]) for r in rows] == [("a", 30), ("b", 20)]
    assert rows[0]["first"] == "a\t0"  # a body of UTF-8 text reads as text


def test_tsv_cells_stay_on_one_line_and_options_reach_the_reader(stores):
    result = run_cli("sql", stores / "a" / "store",
                     "SELECT body, tags FROM messages WHERE queueId = 1 ORDER BY queueOffset",
                     "-o", "endingOffsets={\"Orders\": {\"1\": 3}}", "--explain")
    assert result.tsv() == [{"body": f"a\\t{i}", "tags": "new"} for i in (1, 3, 5)]
    assert "pushed into the read: queueId = 1" in result.err


def test_bad_sql_a_bad_option_and_a_missing_store_are_one_line(stores, tmp_path):
    store = stores / "a" / "store"
    assert "SQL: Parser Error" in assert_one_line_error(run_cli("sql", store, "SELEC 1"))
    assert "SQL: Binder Error" in assert_one_line_error(run_cli("sql", store, "SELECT nope FROM messages"))
    assert "Option 'scan'" in assert_one_line_error(run_cli("sql", store, "SELECT 1", "-o", "scan=sideways"))
    assert "NAME=VALUE" in assert_one_line_error(run_cli("sql", store, "SELECT 1", "-o", "scan"))
    assert "no store directory" in assert_one_line_error(run_cli("sql", tmp_path / "none", "SELECT 1"))


def test_a_query_that_stops_early_ends_cleanly(golden):
    result = run_cli("sql", golden, "SELECT queueOffset FROM messages LIMIT 2", *GOLDEN_FLAGS)
    assert len(result.tsv()) == 2
    assert result.err.strip() == "2 row(s)"
