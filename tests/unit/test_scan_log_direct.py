"""A commitlog range read straight from the mapped files (`scan.direct.log_batches`) holds the rows the
message path (`CommitLog.scan` record by record) gives: on a store over several files with blanks at the
files' ends, with topic and store-time bounds, in the default read (the queues' records in log order),
and on a log damaged in its middle, where the message path decides what is read from the damage on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.sysflag import SysFlag
from rocketstore.scan import direct
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.plan import plan_partitions, read_partition
from rocketstore.scan.records import ARROW_SCHEMA
from rocketstore.scan.stores import LogReader, commitlog_extent, cut_points, record_starts

pytestmark = pytest.mark.skipif(not direct.AVAILABLE, reason="needs the compiled record_columns")

CONFIG = StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=10)
GEOMETRY = {"commitlogFileSize": str(16 * 1024), "consumeQueueFileEntries": "10", "bytesPerPartition": "6000"}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as s:
        for i in range(300):
            s.put(Message(("TopicA", "TopicB")[i % 2], f"m{i}".encode() * (1 + i % 17), queue_id=i % 3,
                          tags=("x", None)[i % 2], keys=(f"k{i}",), properties={"n": str(i)}))
            if i % 50 == 9:
                s.put(Message("TopicA", b"half", queue_id=0, sys_flag=int(SysFlag.TRANSACTION_PREPARED)))
        s.flush()
    return root


def _table(root: Path, monkeypatch: pytest.MonkeyPatch, direct_path: bool, **options: str) -> pa.Table:
    monkeypatch.setattr(direct, "AVAILABLE", direct_path)
    opts = ReadOptions.parse({**GEOMETRY, "path": str(root), **options})
    batches = [b for part in plan_partitions(opts) for b in read_partition(opts, part)]
    return pa.Table.from_batches(batches, schema=ARROW_SCHEMA)


def _same(root: Path, monkeypatch: pytest.MonkeyPatch, **options: str) -> int:
    want = _table(root, monkeypatch, False, **options)
    got = _table(root, monkeypatch, True, **options)
    assert got.equals(want), options
    return want.num_rows


def test_the_direct_walk_reads_what_the_message_path_reads(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _same(store, monkeypatch, scan="commitlog") == 306
    assert _same(store, monkeypatch) == 300  # the default: the queues' records in log order
    assert _same(store, monkeypatch, scan="commitlog", topics="TopicB") == 150
    times = sorted(_table(store, monkeypatch, False, scan="commitlog").column("storeTimestamp").to_pylist())
    assert 0 < _same(store, monkeypatch, scan="commitlog", startingTimestamp=str(times[50]),
                     endingTimestamp=str(times[200] + 1)) <= 306


def test_the_direct_walk_takes_no_message_object_on_a_whole_log(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("the direct walk handed a range to the message path")

    monkeypatch.setattr(LogReader, "scan_runs", refuse)
    lo, hi = commitlog_extent(str(store), CONFIG)  # the end of the whole records, as a plan takes it
    with LogReader(str(store), CONFIG) as log:
        rows = sum(b.num_rows for b in direct.log_batches(log, lo, hi, str(store)))
    assert rows == 306


@pytest.mark.parametrize("damage", [b"\x00" * 8, b"\xff" * 8, b"\x00\x00\x00\x10\xda\xa3\x20\xa7"])
def test_a_damaged_log_reads_the_same_either_way(store: Path, monkeypatch: pytest.MonkeyPatch,
                                                 damage: bytes) -> None:
    with LogReader(str(store), CONFIG) as log:
        records = [b for b in direct.log_batches(log, 16 * 1024, 32 * 1024, str(store))]
        middle = pa.Table.from_batches(records).column("commitLogOffset").to_pylist()[5]
    path = store / "commitlog" / f"{16 * 1024:020d}"
    with open(path, "r+b") as fh:  # the prefix (size, magic) of a record in the second file
        fh.seek(middle - 16 * 1024)
        fh.write(damage)
    rows = _same(store, monkeypatch, scan="commitlog")
    assert rows < 306


@pytest.mark.parametrize("step", [1, 700, 4096, 6000, 20000, 40000])
def test_cut_points_found_by_search_are_the_walks_record_starts(store: Path, step: int) -> None:
    lo, hi = commitlog_extent(str(store), CONFIG)
    walked = record_starts(str(store), CONFIG.commitlog_file_size, lo, hi, step)
    assert cut_points(str(store), CONFIG.commitlog_file_size, lo, hi, step) == walked
    assert len(walked) > 1
