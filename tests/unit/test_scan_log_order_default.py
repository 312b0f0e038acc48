"""A read that nothing narrows but by topic or queue reads the queues' records in log order: the rows of
`scan=queues` (every column equal), none of the records only the commitlog holds (PREPARED and ROLLBACK
transaction records, records of a queue that is gone), in commitlog order; any other bound reads through
the queues, and `scan=queues` / `scan=commitlog` still read as they say."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import rocketstore.arrow
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.sysflag import SysFlag
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.plan import CommitLogRange, QueueRange, plan_partitions

GEOMETRY = {"commitlogFileSize": 16 * 1024, "consumeQueueFileEntries": 10}
SMALL = {**GEOMETRY, "bytesPerPartition": 4096, "messagesPerPartition": 7}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Two topics x three queues over several commitlog files, with PREPARED and ROLLBACK records
    between them, and the queue (TopicB, 2) removed after its records were written."""
    root = tmp_path / "store"
    config = StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=10)
    with MessageStore.open(root, config) as s:
        for i in range(240):
            s.put(Message(("TopicA", "TopicB")[i % 2], f"body-{i}".encode() * (1 + i % 5), queue_id=i % 3,
                          tags=f"T{i % 4}", keys=(f"k{i}",)))
            if i % 40 == 7:
                s.put(Message("TopicA", b"half", queue_id=0, sys_flag=int(SysFlag.TRANSACTION_PREPARED)))
            if i % 60 == 11:
                s.put(Message("TopicB", b"undone", queue_id=1, sys_flag=int(SysFlag.TRANSACTION_ROLLBACK)))
        s.flush()
    shutil.rmtree(root / "consumequeue" / "TopicB" / "2")
    return root


def _read(root: Path, **options: Any) -> pa.Table:
    return rocketstore.arrow.read(str(root), {**SMALL, **options}).read_all()


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: r["commitLogOffset"])


def test_the_default_reads_the_queues_rows_in_log_order(store: Path) -> None:
    default, queues, log = _read(store), _read(store, scan="queues"), _read(store, scan="commitlog")
    assert default.num_rows == queues.num_rows == 240 - 40  # (TopicB, 2): 40 records, its queue gone
    assert _rows(default) == _rows(queues)
    offsets = default.column("commitLogOffset").to_pylist()
    assert offsets == sorted(offsets)
    # the commitlog holds what the queues do not: the transaction halves, the gone queue's records
    assert log.num_rows == 240 + 6 + 4
    assert {r["sysFlag"] for r in log.to_pylist()} - {r["sysFlag"] for r in default.to_pylist()} == {
        int(SysFlag.TRANSACTION_PREPARED), int(SysFlag.TRANSACTION_ROLLBACK)}


def test_the_default_plans_commitlog_ranges_unless_an_option_bounds_more_than_topics(store: Path) -> None:
    def kinds(**options: str) -> set[type]:
        opts = ReadOptions.parse({**{k: str(v) for k, v in SMALL.items()}, "path": str(store), **options})
        return {type(p) for p in plan_partitions(opts)}

    assert kinds() == {CommitLogRange}
    assert all(p.queues for p in plan_partitions(ReadOptions.parse({**{k: str(v) for k, v in SMALL.items()},
                                                                    "path": str(store)})))
    assert kinds(scan="queues") == {QueueRange}
    assert kinds(topics="TopicA") == {CommitLogRange}
    assert kinds(startingOffsets='{"TopicA": {"0": 3}}') == {QueueRange}
    assert kinds(endingTimestamp="9999999999999") == {QueueRange}
    assert kinds(scan="commitlog") == {CommitLogRange}
    commitlog = ReadOptions.parse({**{k: str(v) for k, v in SMALL.items()}, "path": str(store), "scan": "commitlog"})
    assert all(p.queues is None for p in plan_partitions(commitlog))


def test_a_filter_on_a_queue_reads_in_log_order_with_the_same_rows(store: Path) -> None:
    preds = [("queueId", "=", 1)]
    opts = ReadOptions.parse({**{k: str(v) for k, v in SMALL.items()}, "path": str(store)})
    from rocketstore.scan.filters import Prune, predicates

    assert {type(p) for p in plan_partitions(opts, Prune.of(predicates(preds)))} == {CommitLogRange}
    got = rocketstore.arrow.read(str(store), SMALL, filters=preds).read_all()
    assert _rows(got) == [r for r in _rows(_read(store)) if r["queueId"] == 1]


def test_records_written_after_the_plan_are_not_read(store: Path) -> None:
    reader = rocketstore.arrow.read(str(store), SMALL)  # planned here
    config = StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=10)
    with MessageStore.open(store, config) as s:
        s.put(Message("TopicA", b"later", queue_id=0))
    assert reader.read_all().num_rows == 200
    # the writer's open dispatched the gone queue again (40 records), and the new record
    assert _read(store).num_rows == 241
    assert _rows(_read(store)) == _rows(_read(store, scan="queues"))
