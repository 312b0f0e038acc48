"""`rocketstore.arrow.read` with option readThreads: partitions read by a pool of threads give the batches
of a one-thread read (same rows, same batches, same order), compiled and pure; an error of a partition
is raised at its place; a reader dropped early leaves no thread running. `scan.readahead.read_in_order`
keeps the batches it holds ahead within its budget."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import rocketstore.arrow
from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import InvalidArgumentError, RocketStoreError
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.readahead import read_in_order

GEOMETRY = {"commitlogFileSize": "16384", "consumeQueueFileEntries": "10"}
MODES = [
    {"bytesPerPartition": "4096"},  # log order: commitlog ranges keeping the queues' records
    {"scan": "commitlog", "bytesPerPartition": "4096"},
    {"scan": "queues", "messagesPerPartition": "40"},
    {"topics": "B", "bytesPerPartition": "4096"},  # log order, passing over the other topics' records
    {"topics": "B", "scan": "queues", "messagesPerPartition": "25"},
]


def _workers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("rocketstore-read-")]


def _store(root: Path, count: int = 600) -> Path:
    """A store of several commitlog files, two topics, three queues, bodies of many sizes."""
    config = StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=10)
    with MessageStore.open(root, config) as store:
        for i in range(count):
            message = Message(("A", "B")[i % 2], b"m" * (10 + i % 40), queue_id=i % 3, tags=f"t{i % 4}",
                              keys=(f"k{i}",))
            assert store.put(message).ok
    assert len(list((root / "commitlog").iterdir())) > 3
    return root


def _batches(root: Path, options: dict[str, str], threads: int) -> list[pa.RecordBatch]:
    return list(rocketstore.arrow.read(str(root), {**GEOMETRY, **options, "readThreads": str(threads)}))


@pytest.mark.parametrize("options", MODES)
@pytest.mark.parametrize("threads", [2, 3, 8])
def test_a_pool_gives_the_batches_of_one_thread(tmp_path: Path, options: dict[str, str], threads: int):
    root = _store(tmp_path / "store")
    one = _batches(root, options, 1)
    pooled = _batches(root, options, threads)
    assert len(one) > 3, "the read should span several partitions"
    assert [b.num_rows for b in pooled] == [b.num_rows for b in one]
    assert all(p.equals(o) for p, o in zip(pooled, one, strict=True))
    assert not _workers()


def test_the_pure_twins_give_the_batches_of_one_thread(tmp_path: Path):
    root = _store(tmp_path / "store")
    script = (
        "import sys, rocketstore.arrow\n"
        "from rocketstore.native import speedups\n"
        "assert speedups is None\n"
        f"base = {GEOMETRY!r}\n"
        f"for options in {MODES!r}:\n"
        "    one = list(rocketstore.arrow.read(sys.argv[1], {**base, **options, 'readThreads': '1'}))\n"
        "    two = list(rocketstore.arrow.read(sys.argv[1], {**base, **options, 'readThreads': '2'}))\n"
        "    assert len(one) > 3 and len(one) == len(two), (options, len(one), len(two))\n"
        "    assert all(a.equals(b) for a, b in zip(one, two)), options\n"
        "print('equal')\n"
    )
    env = {**os.environ, "ROCKETSTORE_PURE_PYTHON": "1"}
    done = subprocess.run([sys.executable, "-c", script, str(root)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "equal"


def test_the_option_defaults_to_one_thread_and_is_checked(tmp_path: Path):
    assert ReadOptions.parse({"path": str(tmp_path)}).read_threads == 1
    assert ReadOptions.parse({"path": str(tmp_path), "readthreads": "4"}).read_threads == 4
    for bad in ("0", "two"):
        with pytest.raises(ValueError, match="readThreads"):
            ReadOptions.parse({"path": str(tmp_path), "readThreads": bad})
    with pytest.raises(InvalidArgumentError, match="readThreads"):
        rocketstore.arrow.check(str(tmp_path), {"readThreads": "-3"})


def test_a_file_gone_under_a_partition_is_raised_at_its_place(tmp_path: Path):
    first, second = _store(tmp_path / "a"), _store(tmp_path / "b")
    options = {**GEOMETRY, "scan": "commitlog", "bytesPerPartition": "4096", "readThreads": "2"}
    rows_of_first = sum(b.num_rows for b in rocketstore.arrow.read(str(first), options))
    reader = rocketstore.arrow.read([str(first), str(second)], options)  # planned with every file there
    gone = sorted((second / "commitlog").iterdir())[1]
    gone.unlink()
    rows = 0
    with pytest.raises(RocketStoreError, match="does not follow"):
        for batch in reader:
            rows += batch.num_rows
    assert rows == rows_of_first, "every batch of the partitions before the failing one, none after"
    del reader
    assert not _workers()


def test_dropping_the_reader_early_stops_the_threads(tmp_path: Path):
    root = _store(tmp_path / "store")
    reader = rocketstore.arrow.read(str(root), {**GEOMETRY, "bytesPerPartition": "4096", "readThreads": "2"})
    first = reader.read_next_batch()
    assert first.num_rows > 0
    assert len(_workers()) == 2
    reader.close()
    del reader  # pyarrow's close() keeps the batches' iterator: releasing the reader closes it
    assert not _workers()


def _numbered(partition: int, count: int, fail_at: int | None = None) -> Callable[[], Iterator[pa.RecordBatch]]:
    def make() -> Iterator[pa.RecordBatch]:
        for i in range(count):
            if i == fail_at:
                raise OSError(f"disk error in partition {partition} at batch {i}")
            yield pa.record_batch([pa.array([partition * 1000 + i] * 100, type=pa.int64())], names=["n"])
    return make


def test_read_in_order_raises_an_error_after_the_batches_before_it():
    parts = [_numbered(p, 20, fail_at=5 if p == 2 else None) for p in range(6)]
    got = []
    with pytest.raises(OSError, match="partition 2 at batch 5"):
        for batch in read_in_order(parts, 3):
            got.append(batch.column(0)[0].as_py())
    assert got == [p * 1000 + i for p in range(2) for i in range(20)] + [2000 + i for i in range(5)]
    assert not _workers()


def test_read_in_order_holds_at_most_its_budget_ahead():
    size = pa.record_batch([pa.array([0] * 100, type=pa.int64())], names=["n"]).get_total_buffer_size()
    made: list[int] = []

    def counting(partition: int) -> Callable[[], Iterator[pa.RecordBatch]]:
        def make() -> Iterator[pa.RecordBatch]:
            for batch in _numbered(partition, 50)():
                made.append(partition)
                yield batch
        return make

    reader = read_in_order([counting(p) for p in range(8)], 4, ahead_bytes=10 * size)
    assert next(reader).column(0)[0].as_py() == 0
    time.sleep(0.3)  # the workers fill what the budget allows, then wait
    # the consumer's partition may hold 4 batches beyond the budget, each worker makes one more
    assert len(made) <= 1 + 10 + 4 + 4
    assert [b.column(0)[0].as_py() for b in reader] == [p * 1000 + i for p in range(8) for i in range(50)][1:]
    assert not _workers()


def test_read_in_order_closed_early_ends_its_workers():
    reader = read_in_order([_numbered(p, 10_000) for p in range(4)], 2)
    next(reader)
    assert len(_workers()) == 2
    reader.close()
    assert not _workers()
