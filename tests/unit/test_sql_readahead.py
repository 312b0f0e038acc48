"""`scan.readahead.read_ahead`: the batches in order, an error where it happened, a thread that stops
when the consumer does; and a read with option readAhead gives the rows of one without."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import rocketstore.arrow
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.plan import plan_partitions, read_partition
from rocketstore.scan.readahead import read_ahead


def _batches(count: int, fail_at: int | None = None) -> Iterator[pa.RecordBatch]:
    for i in range(count):
        if i == fail_at:
            raise OSError(f"disk error at batch {i}")
        yield pa.record_batch([pa.array([i])], names=["n"])


def _threads() -> int:
    return sum(t.name == "rocketstore-read-ahead" for t in threading.enumerate())


@pytest.mark.parametrize("depth", [0, 1, 3])
def test_the_batches_come_in_order(depth):
    assert [b.column(0)[0].as_py() for b in read_ahead(_batches(50), depth)] == list(range(50))


def test_an_error_is_raised_at_its_batch():
    got = []
    with pytest.raises(OSError, match="disk error at batch 7"):
        for batch in read_ahead(_batches(20, fail_at=7), 2):
            got.append(batch.column(0)[0].as_py())
    assert got == list(range(7))


def test_closing_early_stops_the_thread():
    before = _threads()
    reader = read_ahead(_batches(10_000), 2)
    assert next(reader).column(0)[0].as_py() == 0
    assert _threads() == before + 1
    reader.close()
    deadline = time.monotonic() + 5
    while _threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _threads() == before


def test_a_read_with_read_ahead_holds_the_rows_of_one_without(tmp_path: Path):
    root = tmp_path / "store"
    with MessageStore.open(root, StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=10)) as store:
        for i in range(300):
            assert store.put(Message(("A", "B")[i % 2], b"m" * (10 + i % 40), queue_id=i % 3, tags="t")).ok
    opts = ReadOptions.parse({"path": str(root), "readAhead": "2", "messagesPerPartition": "40"})
    assert opts.read_ahead == 2
    ahead = [b for part in plan_partitions(opts) for b in read_ahead(read_partition(opts, part), opts.read_ahead)]
    plain = rocketstore.arrow.read(str(root), {"messagesPerPartition": "40"}).read_all()
    assert pa.Table.from_batches(ahead).equals(plain)
    with pytest.raises(ValueError, match="readAhead"):
        ReadOptions.parse({"path": str(root), "readAhead": "-1"})
