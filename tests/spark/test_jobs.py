"""Spark jobs: rebuild consume queues and index from the commitlog; export to files."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message, MessageStore
from rocketstore.spark.jobs import rebuild
from tests.spark.spark_helpers import sample_messages, small_config, small_options

pytestmark = pytest.mark.spark


def _files(root: Path, sub: str) -> dict[str, bytes]:
    base = root / sub
    return {str(p.relative_to(base)): p.read_bytes() for p in sorted(base.rglob("*")) if p.is_file()}


def _index_contents(root: Path) -> list[bytes]:
    """Index files' bytes in name order (names are creation times, so only the order is compared)."""
    return [p.read_bytes() for p in sorted((root / "index").iterdir())]


def _rebuild_and_compare(spark: Any, root: Path, config: Any, **kwargs: Any) -> Any:
    queues_before, index_before = _files(root, "consumequeue"), _index_contents(root)
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    report = rebuild(spark, root, config, **kwargs)
    assert _files(root, "consumequeue") == queues_before
    assert _index_contents(root) == index_before
    return report


def test_rebuild_reproduces_the_golden_rocketmq_files(spark, golden_store, golden_config):
    report = _rebuild_and_compare(spark, golden_store, golden_config, range_bytes=30_000)
    assert report.ranges >= 8  # 4 commitlog files, two or more ranges each
    assert (report.queues, report.queue_entries, report.index_files) == (12, 520, 5)


def test_rebuild_reproduces_what_the_store_wrote(spark, make_store):
    messages = sample_messages(150, topics=("TopicA", "TopicB", "TopicC"), queues=3)
    messages += [
        Message("Delayed", b"later", properties={"DELAY": "3"}, keys=("d1",)),
        Message("TopicA", b"no-keys-after-full-file"),
    ]
    root = make_store("s", messages)
    report = _rebuild_and_compare(spark, root, small_config(), range_bytes=4096)
    assert report.index_files > 10 and report.queues == 10  # 3 topics x 3 queues + SCHEDULE_TOPIC_XXXX


@pytest.mark.parametrize("keys_in_last_file", [8, 0])
def test_rebuild_opens_the_empty_index_file_the_store_opens(spark, make_store, keys_in_last_file):
    # 8 keys fill an index file of 9 entries; a later record without keys makes the store open the next
    # file, which stays empty. Without it, no such file exists.
    messages = [Message("T", b"x", keys=(f"k{i}",)) for i in range(8)]
    messages += [Message("T", b"plain")] if keys_in_last_file == 8 else []
    root = make_store("s", messages)
    expected = 2 if keys_in_last_file == 8 else 1
    assert len(list((root / "index").iterdir())) == expected
    _rebuild_and_compare(spark, root, small_config())


def test_rebuilt_store_opens_and_answers_queries(spark, make_store):
    root = make_store("s", sample_messages(60))
    shutil.rmtree(root / "consumequeue")
    shutil.rmtree(root / "index")
    rebuild(spark, root)  # geometry read from the store's config/rocketstore.json
    with MessageStore.open(root) as store:
        assert store.max_offset("TopicA", 0) == 15
        assert [int(m.properties["n"]) for m in store.query("TopicB", "k13")] == [13]
        assert store.put(Message("TopicA", b"after", queue_id=0)).queue_offset == 15


def test_rebuild_refuses_a_store_with_a_live_writer(spark, make_store):
    root = make_store("s", sample_messages(3))
    with MessageStore.open(root, small_config()), pytest.raises(Exception, match="[Ll]ock"):
        rebuild(spark, root, small_config())
    assert (root / "consumequeue").is_dir() and not any(p.name.startswith("rebuild-") for p in root.iterdir())


def test_export_writes_partitioned_parquet(spark, make_store, tmp_path):
    from rocketstore.spark.jobs import export

    root = make_store("s", sample_messages(40))
    export(spark, root, tmp_path / "out", options=small_options())
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.is_dir()) == ["topic=TopicA", "topic=TopicB"]
    df = spark.read.parquet(str(tmp_path / "out"))
    assert df.count() == 40
    assert sorted(int(r.properties["n"]) for r in df.select("properties").collect()) == list(range(40))


def test_command_line_rebuild_with_geometry_flags(golden_store, golden_config):
    before = _files(golden_store, "consumequeue")
    shutil.rmtree(golden_store / "consumequeue")
    geometry = [
        "--commitlog-file-size", str(golden_config.commitlog_file_size),
        "--consume-queue-file-entries", str(golden_config.consume_queue_file_entries),
        "--index-hash-slots", str(golden_config.index_hash_slots),
        "--index-max-entries", str(golden_config.index_max_entries),
    ]
    args = [sys.executable, "-m", "rocketstore.spark.jobs", "--master", "local[2]", "rebuild", str(golden_store),
            *geometry]
    done = subprocess.run(args, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "ROCKETSTORE_PROGRESS": ""})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr == ""  # stderr is not a terminal: no progress line, and the JVM's start is quiet
    first, *rest = done.stdout.splitlines()  # a summary for a reader, not a dataclass repr
    assert re.fullmatch(rf"rebuilt {re.escape(str(golden_store))} from its commitlog \([0-9.]+ KiB read as 1 "
                        r"range\) in ([0-9.]+ s|\d+ min \d\d s):", first), first
    assert rest == [
        f"  consume queues: 12 queues, 520 entries in 13 files (25.4 KiB) under {golden_store / 'consumequeue'}",
        f"  index: 1626 keys in 5 files (41.2 KiB) under {golden_store / 'index'}",
    ]
    assert _files(golden_store, "consumequeue") == before


def test_summary_per_topic_and_queue(spark, make_store):
    from rocketstore.spark.jobs import summary

    root = make_store("s", sample_messages(40))
    rows = {(r.topic, r.queueId): r for r in summary(spark, root, options=small_options()).collect()}
    assert sorted(rows) == [("TopicA", 0), ("TopicA", 1), ("TopicB", 0), ("TopicB", 1)]
    with MessageStore.open(root, small_config(), read_only=True) as store:
        for (topic, queue_id), row in rows.items():
            stored = list(store.iter_queue(topic, queue_id))
            assert (row.messages, row.minQueueOffset, row.maxQueueOffset) == (len(stored), 0, len(stored))
            assert row.storeBytes == sum(m.size for m in stored)
            assert row.bodyBytes == sum(len(m.body) for m in stored)
            assert row.lastStoreTimestamp == max(m.store_timestamp for m in stored)
