"""A queue partition read straight from the mapped commitlog (`scan.direct`) gives the rows of the
message path (`decode_run`, `StoredMessage`s joined into batches): on the golden RocketMQ store, on a
written store whose queues cross commitlog files, with time bounds, and with damaged consume-queue
entries, where a chunk falls back to the message path."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from rocketstore import Message, MessageStore
from rocketstore.scan import direct
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.plan import plan_partitions, read_partition
from tests.conftest import copy_golden_store
from tests.spark.spark_helpers import geometry_options, small_config

pytestmark = pytest.mark.skipif(not direct.AVAILABLE, reason="needs the compiled record_columns")

GOLDEN = {"commitlogFileSize": "65536", "consumeQueueFileEntries": "100", "indexHashSlots": "100",
          "indexMaxEntries": "400", "scan": "queues"}


def _read(options: dict[str, str], monkeypatch: pytest.MonkeyPatch, direct_path: bool) -> pa.Table:
    monkeypatch.setattr(direct, "AVAILABLE", direct_path)
    opts = ReadOptions.parse(options)
    batches = [b for part in plan_partitions(opts) for b in read_partition(opts, part)]
    return pa.Table.from_batches(batches, schema=batches[0].schema)


def _written(root: Path) -> Path:
    with MessageStore.open(root, small_config()) as store:
        for i in range(400):
            assert store.put(Message(("TopicA", "TopicB")[i % 2], f"m{i}".encode() * (1 + i % 13), queue_id=i % 3,
                                     tags=("x", None)[i % 2], keys=[f"k{i}"], properties={"n": str(i)})).ok
    return root


@pytest.mark.parametrize("extra", [{}, {"messagesPerPartition": "7"}])
def test_the_golden_store_reads_the_same_either_way(tmp_path, monkeypatch, extra):
    root = copy_golden_store(tmp_path / "golden")
    options = {**GOLDEN, **extra, "path": str(root)}
    want = _read(options, monkeypatch, False)
    assert len(want) > 500
    assert _read(options, monkeypatch, True).equals(want)


def test_a_written_store_with_time_bounds_reads_the_same_either_way(tmp_path, monkeypatch):
    root = _written(tmp_path / "store")
    options = {**geometry_options(small_config()), "path": str(root), "scan": "queues"}
    times = sorted(_read(options, monkeypatch, False).column("storeTimestamp").to_pylist())
    options.update(startingTimestamp=str(times[100]), endingTimestamp=str(times[300]))
    want = _read(options, monkeypatch, False)
    assert 0 < len(want) < 400
    assert _read(options, monkeypatch, True).equals(want)


def _entry_path(root: Path, topic: str, queue_id: int) -> Path:
    return root / "consumequeue" / topic / str(queue_id) / f"{0:020d}"


def test_damaged_entries_give_what_the_message_path_gives(tmp_path, monkeypatch):
    root = _written(tmp_path / "store")
    entry = struct.Struct(">qiq")
    path = _entry_path(root, "TopicA", 1)
    data = bytearray(path.read_bytes())
    other = entry.unpack_from(_entry_path(root, "TopicB", 0).read_bytes(), 0)
    entry.pack_into(data, 2 * entry.size, *other)  # a valid record of another queue
    phy, size, tags = entry.unpack_from(data, 4 * entry.size)
    entry.pack_into(data, 4 * entry.size, phy + 1, size, tags)  # not a record start
    entry.pack_into(data, 5 * entry.size, 0, 0x7FFFFFFF, 0)  # a filler
    path.write_bytes(bytes(data))
    options: dict[str, Any] = {**geometry_options(small_config()), "path": str(root), "topics": "TopicA",
                               "scan": "queues"}  # the queue path: what the damaged entries point to
    want = _read(options, monkeypatch, False)
    got = _read(options, monkeypatch, True)
    assert got.equals(want)
    offsets = set(got.filter(pa.compute.equal(got.column("queueId"), 1)).column("queueOffset").to_pylist())
    assert {2, 4, 5}.isdisjoint(offsets) and {0, 1, 3, 6} <= offsets
