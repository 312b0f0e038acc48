"""The read core: a read's partitions over one or more stores, and one partition's rows as Arrow record
batches. Spark's source (`rocketstore.spark.batch`) and `rocketstore.arrow` are thin adapters over it.

Three ways to read, chosen by options (`options.ReadOptions`):

* `scan=queues`: through the consume queues, one partition per queue range of at most
  `messagesPerPartition` messages; bounded by `startingOffsets` / `endingOffsets`.
* `scan=commitlog`: every record of the commitlog in log order, dispatched or not; one partition per
  range of about `bytesPerPartition` bytes, split at record starts.
* `key=...`: the messages the store's index finds for a key, one partition per store and topic.

Without option `scan`, a read that nothing narrows but by topic and queue (option `topics`, a prune of
topics and queue ids; no offsets, store times, key, tags codes nor physical offsets) reads the queues'
records in log order: the commitlog ranges of `scan=commitlog`, each keeping only the records a queue
it reads holds (a NOT or COMMIT record whose queue offset lies inside its queue's `[min, max)` at
planning), so the rows are those of `scan=queues` without a page touched per record. A record of a
topic the read leaves out is passed over on its bytes, before any column of it is built
(`direct.topic_rows`). Any other bound reads through the queues.

`startingTimestamp` / `endingTimestamp` bound every mode by store time, `[start, end)`.

A `filters.Prune` narrows the plan further: topics and queues left out, each queue range cut to the
queue offsets, the store times (through `offset_by_time`, as `startingTimestamp` does) and the physical
offsets it allows (found in the queue's entries), queue entries of other tags codes passed over before
their records are read, commitlog ranges that hold no allowed physical offset dropped. A prune never
leaves out a row its predicates keep; `read_partition` with predicates then keeps exactly the rows they
hold true for.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from rocketstore.config import StoreConfig
from rocketstore.format.layout import JAVA_INT_MAX
from rocketstore.format.message import StoredMessage
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.scan import direct
from rocketstore.scan.columnar import batches, run_batches
from rocketstore.scan.filters import EVERYTHING, Predicate, Prune, mask
from rocketstore.scan.options import EARLIEST, LATEST, ReadOptions
from rocketstore.scan.queued import QueueBounds, queued
from rocketstore.scan.stores import (
    LogReader,
    commitlog_extent,
    cut_points,
    open_read_only,
    record_starts,
    store_config,
)

__all__ = ["CommitLogRange", "KeyLookup", "Partition", "QueueRange", "plan_partitions", "read_partition", "tasks"]

_UNLIMITED_RESULTS = JAVA_INT_MAX
_ENTRY = np.dtype([("phy", ">i8"), ("size", ">i4"), ("tags", ">i8")])  # a consume-queue entry, 20 bytes


@dataclass(frozen=True)
class QueueRange:
    """Queue offsets `[start, end)` of one queue of one store (with the store's resolved config); with
    `tags_codes`, only the entries of those tags codes are read."""

    root: str
    topic: str
    queue_id: int
    start: int
    end: int
    config: StoreConfig
    tags_codes: frozenset[int] | None = None


@dataclass(frozen=True)
class CommitLogRange:
    """Records starting in physical offsets `[start, end)` of one store; `start` is a record start. With
    `queues`, only the records those queues hold (NOT or COMMIT records inside their queue's bounds);
    with `topics`, only records of those topics."""

    root: str
    start: int
    end: int
    config: StoreConfig
    queues: QueueBounds | None = None
    topics: frozenset[str] | None = None


@dataclass(frozen=True)
class KeyLookup:
    """The messages of one topic of one store that carry `key`."""

    root: str
    topic: str
    key: str


Partition = QueueRange | CommitLogRange | KeyLookup


def _queue_bounds(opts: ReadOptions, store: Any, topic: str, queue_id: int) -> tuple[int, int]:
    low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
    start = opts.starting.for_queue(topic, queue_id)
    end = opts.ending.for_queue(topic, queue_id)
    start = low if start == EARLIEST else high if start == LATEST else min(max(start, low), high)
    end = high if end == LATEST else low if end == EARLIEST else min(max(end, low), high)
    return start, end


def _time_bounds(opts: ReadOptions, prune: Prune, store: Any, topic: str, queue_id: int, start: int,
                 end: int) -> tuple[int, int]:
    """Narrow a queue range to the store-time bounds of the options and the prune."""
    lo_ms, hi_ms = prune.time_bounds(opts.starting_timestamp_ms, opts.ending_timestamp_ms)
    if lo_ms is not None and start < end:
        start = max(start, store.offset_by_time(topic, queue_id, lo_ms))
    if hi_ms is not None and start < end:
        end = min(end, store.offset_by_time(topic, queue_id, hi_ms))
    return start, end


def _phy_bounds(root: str, config: StoreConfig, prune: Prune, topic: str, queue_id: int, start: int,
                end: int) -> tuple[int, int]:
    """Narrow a queue range to the entries whose physical offset the prune allows: from the first such
    entry to the last (an entry between them stays whatever its offset)."""
    if not prune.phy_offset.bounded or start >= end:
        return start, end
    from rocketstore.store.files import ConsumeQueue

    cq = ConsumeQueue(Path(root), topic, queue_id, config.consume_queue_file_entries, read_only=True)
    cq.load()
    try:
        entries = np.frombuffer(cq.entry_bytes(start, end), dtype=_ENTRY)
        first = max(start, cq.min_offset)
    finally:
        cq.close()
    phy = entries["phy"]
    inside = np.ones(len(phy), dtype=bool)
    if prune.phy_offset.lo is not None:
        inside &= phy >= prune.phy_offset.lo
    if prune.phy_offset.hi is not None:
        inside &= phy < prune.phy_offset.hi
    hits = np.flatnonzero(inside)
    if len(hits) == 0:
        return start, start
    return first + int(hits[0]), first + int(hits[-1]) + 1


def _plan_queues(opts: ReadOptions, prune: Prune, root: str) -> list[Partition]:
    step = opts.messages_per_partition
    parts: list[Partition] = []
    with open_read_only(root, opts.geometry) as store:
        for topic, queue_ids in sorted(store.queues().items()):
            if (opts.topics and topic not in opts.topics) or not prune.keeps_topic(topic):
                continue
            for queue_id in sorted(queue_ids):
                if not prune.keeps_queue(topic, queue_id):
                    continue
                start, end = _queue_bounds(opts, store, topic, queue_id)
                start, end = prune.queue_offset.clip(start, end)
                start, end = _time_bounds(opts, prune, store, topic, queue_id, start, end)
                start, end = _phy_bounds(root, store.config, prune, topic, queue_id, start, end)
                codes = None if topic == SCHEDULE_TOPIC else prune.tags_codes  # its codes are delivery times
                parts.extend(
                    QueueRange(root, topic, queue_id, lo, min(lo + step, end), store.config, codes)
                    for lo in range(start, end, step)
                )
    return parts


def _plan_commitlog(opts: ReadOptions, prune: Prune, root: str) -> list[Partition]:
    config = store_config(root, opts.geometry)
    lo, hi = commitlog_extent(root, config)
    topics = frozenset(opts.topics) if opts.topics else None
    if prune.topics is not None:
        topics = prune.topics if topics is None else topics & prune.topics
    return [replace(part, topics=topics) for part in _commitlog_ranges(opts, prune, root, config, lo, hi,
                                                                        record_starts)]


def _commitlog_ranges(opts: ReadOptions, prune: Prune, root: str, config: StoreConfig, lo: int, hi: int,
                      cuts: Callable[[str, int, int, int, int], list[int]]) -> list[CommitLogRange]:
    """The ranges of the records in `[lo, hi)`, cut where `cuts` says: as many as `bytesPerPartition`
    bytes make, each of about the same length (a last range of a few bytes would be a task of its own)."""
    if hi <= lo or prune.nothing or not prune.phy_offset.overlaps(lo, hi):
        return []
    count = -(-(hi - lo) // opts.bytes_per_partition)
    starts = cuts(root, config.commitlog_file_size, lo, hi, -(-(hi - lo) // count))
    ends = [*starts[1:], hi]
    return [CommitLogRange(root, a, b, config) for a, b in zip(starts, ends, strict=True)
            if prune.phy_offset.overlaps(a, b)]


def _plan_log_order(opts: ReadOptions, prune: Prune, root: str) -> list[Partition]:
    """`_plan_commitlog`'s ranges, each keeping only the records the queues it reads hold (those of
    option `topics` and of the prune's topics and queue ids); one read-only open gives the queues'
    bounds and the log's extent. A read of some queues takes ranges as much longer as its queues hold
    fewer of the messages (at most `MAX_RANGE_SCALE` times), so that each range still gives about
    `bytesPerPartition` bytes of records."""
    with open_read_only(root, opts.geometry) as store:
        every = tuple((topic, queue_id, store.min_offset(topic, queue_id), store.max_offset(topic, queue_id))
                      for topic, queue_ids in sorted(store.queues().items()) for queue_id in sorted(queue_ids))
        config, lo, hi = store.config, store.commitlog.min_offset, store.recovery.end_offset
    every = tuple(q for q in every if q[2] < q[3])
    queues = tuple(q for q in every if (not opts.topics or q[0] in opts.topics) and prune.keeps_queue(q[0], q[1]))
    if not queues:
        return []
    topics = None
    if len(queues) < len(every):
        topics = frozenset(q[0] for q in queues)
        share = sum(q[3] - q[2] for q in queues) / sum(q[3] - q[2] for q in every)
        scale = min(MAX_RANGE_SCALE, max(1, int(1 / share)))
        opts = replace(opts, bytes_per_partition=opts.bytes_per_partition * scale)
    return [replace(part, queues=queues, topics=topics)
            for part in _commitlog_ranges(opts, prune, root, config, lo, hi, cut_points)]


MAX_RANGE_SCALE = 16
"""How many times `bytesPerPartition` a range of a log-order read of some queues spans at most."""


def _plan_key(opts: ReadOptions, prune: Prune, root: str) -> list[Partition]:
    assert opts.key is not None
    if opts.topics:
        topics: Sequence[str] = opts.topics
    else:
        with open_read_only(root, opts.geometry) as store:
            topics = sorted(store.queues())
    return [KeyLookup(root, topic, opts.key) for topic in topics if prune.keeps_topic(topic)]


def plan_partitions(opts: ReadOptions, prune: Prune = EVERYTHING) -> list[Partition]:
    """The partitions of a read of every store in `opts.paths`, narrowed by `prune`.

    Raises:
        rocketstore.errors.StoreError: a path is not a store or does not fit the geometry.
    """
    if opts.key is not None:
        planner = _plan_key
    elif opts.scan == "commitlog":
        planner = _plan_commitlog
    elif opts.scan is None and not opts.narrows_beyond_topics and prune.only_topics_and_queues:
        planner = _plan_log_order
    else:
        planner = _plan_queues
    return [part for root in opts.paths for part in planner(opts, prune, root)]


def tasks(parts: Sequence[Partition], messages_per_task: int, bytes_per_task: int) -> list[tuple[Partition, ...]]:
    """The partitions packed into tasks, for an engine that pays a fixed cost for each task it runs (a
    Spark task of a Python data source costs about as much as decoding 64 MiB of records): consecutive
    partitions, in plan order, while their work adds up to at most one task's, which is
    `messages_per_task` messages of queue ranges or `bytes_per_task` bytes of commitlog ranges. A key
    lookup, and a partition as large as a task, is a task of its own. So the 32 small queue ranges of a
    short store-time window are one task, not 32."""
    packed: list[list[Partition]] = []
    load = 0.0  # the work of the last task
    for part in parts:
        work = _work(part, messages_per_task, bytes_per_task)
        if packed and load + work <= 1.0:
            packed[-1].append(part)
            load += work
        else:
            packed.append([part])
            load = work
    return [tuple(task) for task in packed]


def _work(part: Partition, messages_per_task: int, bytes_per_task: int) -> float:
    """A partition's work as a share of a task's (a key lookup's: more than any task takes beside it)."""
    if isinstance(part, QueueRange):
        return (part.end - part.start) / messages_per_task
    if isinstance(part, CommitLogRange):
        return (part.end - part.start) / bytes_per_task
    return math.inf


def read_partition(opts: ReadOptions, partition: Partition,
                   preds: Sequence[Predicate] = ()) -> Iterator[pa.RecordBatch]:
    """One partition's messages inside the topic and time bounds of the options, as record batches; with
    `preds`, only the rows every predicate holds true for (batches left empty are not yielded)."""
    for batch in _read(opts, partition):
        keep = mask(batch, preds)
        if keep is not None:
            batch = batch.filter(keep)
        if batch.num_rows:
            yield batch


def _read(opts: ReadOptions, partition: Partition) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, KeyLookup):
        with open_read_only(partition.root, opts.geometry, max_query_results=_UNLIMITED_RESULTS) as store:
            found = store.query(partition.topic, partition.key, max_count=_UNLIMITED_RESULTS)
        yield from batches(_bounded(opts, found, filter_topics=False), partition.root)
    elif isinstance(partition, QueueRange):
        with LogReader(partition.root, partition.config) as log:
            if partition.tags_codes is None and direct.AVAILABLE:
                made = direct.queue_batches(log, partition.topic, partition.queue_id, partition.start, partition.end,
                                             partition.root)
                yield from _bounded_batches(opts, made)
                return
            if partition.tags_codes is not None:
                runs = log.queue_runs_tagged(partition.topic, partition.queue_id, partition.start, partition.end,
                                             partition.tags_codes)
            else:
                runs = log.queue_runs(partition.topic, partition.queue_id, partition.start, partition.end)
            yield from run_batches(_bounded_runs(opts, runs, filter_topics=False), partition.root)
    elif isinstance(partition, CommitLogRange):
        with LogReader(partition.root, partition.config) as log:
            if direct.AVAILABLE:
                made = _bounded_batches(opts, direct.log_batches(log, partition.start, partition.end, partition.root,
                                                                 partition.topics),
                                        topics=opts.topics if partition.queues is None else ())  # queued keeps them
            else:
                runs = log.scan_runs(partition.start, partition.end)
                made = run_batches(_bounded_runs(opts, runs, filter_topics=True), partition.root)
            yield from made if partition.queues is None else queued(made, partition.queues)


def _bounded_batches(opts: ReadOptions, found: Iterable[pa.RecordBatch],
                     topics: Sequence[str] = ()) -> Iterator[pa.RecordBatch]:
    """The batches with only the rows inside the store-time bounds and, given `topics`, of those topics
    (batches left empty dropped)."""
    preds: list[Predicate] = [("topic", "in", list(topics))] if topics else []
    if opts.starting_timestamp_ms is not None:
        preds.append(("storeTimestamp", ">=", opts.starting_timestamp_ms))
    if opts.ending_timestamp_ms is not None:
        preds.append(("storeTimestamp", "<", opts.ending_timestamp_ms))
    for batch in found:
        keep = mask(batch, preds)
        if keep is not None:
            batch = batch.filter(keep)
        if batch.num_rows:
            yield batch


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
