"""Batch reader: plans partitions over one or more stores and reads them as Arrow record batches.

Three ways to read, chosen by options:

* `scan=queues` (default): through the consume queues, one partition per queue range of at most
  `messagesPerPartition` messages; bounded by `startingOffsets` / `endingOffsets`.
* `scan=commitlog`: every record of the commitlog in log order, dispatched or not; one partition per
  range of about `bytesPerPartition` bytes, split at record starts.
* `key=...`: the messages the store's index finds for a key, one partition per store and topic.

`startingTimestamp` / `endingTimestamp` bound every mode by store time, `[start, end)`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from rocketstore.config import StoreConfig
from rocketstore.format.message import StoredMessage
from rocketstore.spark._stores import LogReader, commitlog_extent, open_read_only, record_starts, store_config
from rocketstore.spark.columnar import batches, run_batches
from rocketstore.spark.options import EARLIEST, LATEST, ReadOptions

__all__ = [
    "CommitLogRange",
    "KeyLookup",
    "QueueRange",
    "RocketStoreBatchReader",
    "plan_partitions",
]

_UNLIMITED_RESULTS = 2**31 - 1


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """Queue offsets `[start, end)` of one queue of one store (with the store's resolved config)."""

    root: str
    topic: str
    queue_id: int
    start: int
    end: int
    config: StoreConfig


@dataclass(frozen=True)
class CommitLogRange(InputPartition):
    """Records starting in physical offsets `[start, end)` of one store; `start` is a record start."""

    root: str
    start: int
    end: int
    config: StoreConfig


@dataclass(frozen=True)
class KeyLookup(InputPartition):
    """The messages of one topic of one store that carry `key`."""

    root: str
    topic: str
    key: str


def _queue_bounds(opts: ReadOptions, store: object, topic: str, queue_id: int) -> tuple[int, int]:
    low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)  # type: ignore[attr-defined]
    start = opts.starting.for_queue(topic, queue_id)
    end = opts.ending.for_queue(topic, queue_id)
    start = low if start == EARLIEST else high if start == LATEST else min(max(start, low), high)
    end = high if end == LATEST else low if end == EARLIEST else min(max(end, low), high)
    return start, end


def _time_bounds(opts: ReadOptions, store: object, topic: str, queue_id: int, start: int,
                 end: int) -> tuple[int, int]:
    """Narrow a queue range to the store-time bounds (rows are still filtered exactly in read())."""
    by_time = store.offset_by_time  # type: ignore[attr-defined]
    if opts.starting_timestamp_ms is not None and start < end:
        start = max(start, by_time(topic, queue_id, opts.starting_timestamp_ms))
    if opts.ending_timestamp_ms is not None and start < end:
        end = min(end, by_time(topic, queue_id, opts.ending_timestamp_ms))
    return start, end


def _plan_queues(opts: ReadOptions, root: str) -> list[InputPartition]:
    step = opts.messages_per_partition
    parts: list[InputPartition] = []
    with open_read_only(root, opts.geometry) as store:
        for topic, queue_ids in sorted(store.queues().items()):
            if opts.topics and topic not in opts.topics:
                continue
            for queue_id in sorted(queue_ids):
                start, end = _queue_bounds(opts, store, topic, queue_id)
                start, end = _time_bounds(opts, store, topic, queue_id, start, end)
                parts.extend(
                    QueueRange(root, topic, queue_id, lo, min(lo + step, end), store.config)
                    for lo in range(start, end, step)
                )
    return parts


def _plan_commitlog(opts: ReadOptions, root: str) -> list[InputPartition]:
    config = store_config(root, opts.geometry)
    lo, hi = commitlog_extent(root, config)
    if hi <= lo:
        return []
    starts = record_starts(root, config.commitlog_file_size, lo, hi, opts.bytes_per_partition)
    ends = [*starts[1:], hi]
    return [CommitLogRange(root, a, b, config) for a, b in zip(starts, ends, strict=True)]


def _plan_key(opts: ReadOptions, root: str) -> list[InputPartition]:
    assert opts.key is not None
    if opts.topics:
        topics: Sequence[str] = opts.topics
    else:
        with open_read_only(root, opts.geometry) as store:
            topics = sorted(store.queues())
    return [KeyLookup(root, topic, opts.key) for topic in topics]


def plan_partitions(opts: ReadOptions) -> list[InputPartition]:
    """The partitions of a batch read of every store in `opts.paths`.

    Raises:
        rocketstore.errors.StoreError: a path is not a store or does not fit the geometry.
    """
    if opts.key is not None:
        planner = _plan_key
    elif opts.scan == "commitlog":
        planner = _plan_commitlog
    else:
        planner = _plan_queues
    return [part for root in opts.paths for part in planner(opts, root)]


class RocketStoreBatchReader(DataSourceReader):
    """Reads the partitions `plan_partitions` gives; holds only the picklable options."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        """Queue ranges, commitlog ranges or key lookups (see module docstring)."""
        return plan_partitions(self.options)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow record batches of the partition's messages that pass the topic and time bounds."""
        return read_partition(self.options, partition)


def read_partition(opts: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """Read one partition's messages (topic and time bounds applied) as record batches."""
    if isinstance(partition, KeyLookup):
        with open_read_only(partition.root, opts.geometry, max_query_results=_UNLIMITED_RESULTS) as store:
            found = store.query(partition.topic, partition.key, max_count=_UNLIMITED_RESULTS)
        yield from batches(_bounded(opts, found, filter_topics=False), partition.root)
    elif isinstance(partition, QueueRange):
        with LogReader(partition.root, partition.config) as log:
            runs = log.queue_runs(partition.topic, partition.queue_id, partition.start, partition.end)
            yield from run_batches(_bounded_runs(opts, runs, filter_topics=False), partition.root)
    elif isinstance(partition, CommitLogRange):
        with LogReader(partition.root, partition.config) as log:
            runs = log.scan_runs(partition.start, partition.end)
            yield from run_batches(_bounded_runs(opts, runs, filter_topics=True), partition.root)
    # else: Spark reads one placeholder partition when planning found none; it has no rows.


def _bounded(opts: ReadOptions, messages: Iterable[StoredMessage], *, filter_topics: bool) -> Iterator[StoredMessage]:
    """The messages inside the topic and store-time bounds."""
    for run in _bounded_runs(opts, [list(messages)], filter_topics=filter_topics):
        yield from run


def _bounded_runs(opts: ReadOptions, runs: Iterable[list[StoredMessage]], *,
                  filter_topics: bool) -> Iterable[list[StoredMessage]]:
    """The runs of messages with only the messages inside the topic and store-time bounds."""
    topics = set(opts.topics) if opts.topics and filter_topics else None
    timed = opts.starting_timestamp_ms is not None or opts.ending_timestamp_ms is not None
    if topics is None and not timed:
        return runs

    def kept(m: StoredMessage) -> bool:
        return (topics is None or m.topic in topics) and (not timed or opts.keeps_time(m.store_timestamp))

    return (list(filter(kept, run)) for run in runs)
