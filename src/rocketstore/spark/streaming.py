"""Streaming source: micro-batches of the messages put to the consume queues since the last trigger.

Offsets are per queue, `{"TopicA/0": 17, ...}` = the next queue offset to read, for one store; with
several stores they are nested by store root, `{"/data/a/store": {"TopicA/0": 17}, ...}`. A
micro-batch reads queue offsets `[start, end)` of every queue; the rows of such a range never change
once written, so replaying a range from Spark's checkpoint gives the same rows, and a query restarted
from its checkpoint continues exactly where the last committed batch ended.

Queues that appear while the query runs are read from their first retained offset. A queue whose
retained minimum moved past the next offset to read (files deleted) fails the query when
`failOnDataLoss` is true (the default), else the query skips to the minimum.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from rocketstore.config import StoreConfig
from rocketstore.scan.columnar import run_batches
from rocketstore.scan.options import (
    DEFAULT_BYTES_PER_PARTITION,
    DEFAULT_MESSAGES_PER_PARTITION,
    EARLIEST,
    LATEST,
    StreamOptions,
)
from rocketstore.scan.plan import Partition, QueueRange, tasks
from rocketstore.scan.stores import LogReader, open_read_only
from rocketstore.spark.batch import ScanPartition

__all__ = ["DataLossError", "RocketStoreStreamReader", "allocate", "queue_key"]

Positions = dict[str, dict[str, int]]
"""store root -> "topic/queueId" -> queue offset."""


class DataLossError(ValueError):
    """Messages the query has not read yet are no longer in the store (with failOnDataLoss=true)."""


def queue_key(topic: str, queue_id: int) -> str:
    """The offset key of a queue: `"TopicA/0"` (topics cannot contain '/')."""
    return f"{topic}/{queue_id}"


def _split_key(key: str) -> tuple[str, int]:
    topic, _, queue_id = key.rpartition("/")
    return topic, int(queue_id)


def allocate(available: Mapping[str, int], budget: int) -> dict[str, int]:
    """Share `budget` rows among queues with `available` rows each, evenly (water-filling), in key order.

    Every queue gets min(its rows, an equal share); rows a small queue leaves over go to the others.
    """
    grant = {key: 0 for key in available}
    left = dict(sorted((k, v) for k, v in available.items() if v > 0))
    while budget > 0 and left:
        share = max(budget // len(left), 1)
        for key in list(left):
            take = min(share, left[key], budget)
            grant[key] += take
            left[key] -= take
            budget -= take
            if left[key] == 0:
                del left[key]
            if budget == 0:
                break
    return grant


class RocketStoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Per-queue offsets over one or more stores; admission control by `maxMessagesPerTrigger`."""

    def __init__(self, options: StreamOptions) -> None:
        self.options = options
        self._target: Positions | None = None
        self._configs: dict[str, StoreConfig] = {}

    # -- offsets ---------------------------------------------------------------------------------

    def _encode(self, positions: Positions) -> dict[str, Any]:
        if len(self.options.paths) == 1:
            return dict(positions.get(self.options.paths[0], {}))
        return {root: dict(positions.get(root, {})) for root in self.options.paths}

    def _decode(self, offset: Mapping[str, Any]) -> Positions:
        if len(self.options.paths) == 1:
            return {self.options.paths[0]: {k: int(v) for k, v in offset.items()}}
        return {root: {k: int(v) for k, v in offset.get(root, {}).items()} for root in self.options.paths}

    def _bounds(self) -> dict[str, dict[str, tuple[int, int]]]:
        """root -> queue key -> (min offset, max offset) of every selected queue, now."""
        bounds: dict[str, dict[str, tuple[int, int]]] = {}
        for root in self.options.paths:
            per_root: dict[str, tuple[int, int]] = {}
            with open_read_only(root, self.options.geometry) as store:
                self._configs[root] = store.config
                for topic, queue_ids in store.queues().items():
                    if self.options.topics and topic not in self.options.topics:
                        continue
                    for queue_id in queue_ids:
                        per_root[queue_key(topic, queue_id)] = (
                            store.min_offset(topic, queue_id),
                            store.max_offset(topic, queue_id),
                        )
            bounds[root] = per_root
        return bounds

    def initialOffset(self) -> dict:
        """Where a new query starts: `startingOffsets` (default `latest`) resolved per queue."""
        positions: Positions = {}
        for root, per_root in self._bounds().items():
            positions[root] = {}
            for key, (low, high) in per_root.items():
                wanted = self.options.starting.for_queue(*_split_key(key))
                if wanted == EARLIEST:
                    wanted = low
                elif wanted == LATEST:
                    wanted = high
                positions[root][key] = min(max(wanted, low), high)
        return self._encode(positions)

    def getDefaultReadLimit(self) -> ReadLimit:
        """`ReadMaxRows(maxMessagesPerTrigger)` when the option is set."""
        if self.options.max_messages_per_trigger is not None:
            return ReadMaxRows(self.options.max_messages_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end of an `availableNow` run at what the queues hold now."""
        self._target = {root: {k: high for k, (_, high) in per.items()} for root, per in self._bounds().items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        """The end of the next micro-batch: every queue's max offset, capped by the limit.

        Raises:
            DataLossError: with failOnDataLoss, a queue lost messages the query has not read.
        """
        bounds = self._bounds()
        begin = self._checked(self._decode(start), bounds)
        end: Positions = {}
        available: dict[str, int] = {}
        for root, per_root in bounds.items():
            cap = self._target.get(root, {}) if self._target is not None else None
            end[root] = {}
            for key, (_, high) in per_root.items():
                if cap is not None:
                    high = min(high, cap.get(key, 0))
                first = begin[root].get(key, 0)
                end[root][key] = max(first, high)
                available[f"{root}\0{key}"] = max(high - first, 0)
        if isinstance(limit, ReadMaxRows):
            grant = allocate(available, limit.max_rows)
            for joined, rows in grant.items():
                root, _, key = joined.partition("\0")
                end[root][key] = begin[root].get(key, 0) + rows
        return self._encode(end)

    def _checked(self, positions: Positions, bounds: dict[str, dict[str, tuple[int, int]]]) -> Positions:
        """`positions` with queues new to the query at their minimum and lost ranges handled."""
        result: Positions = {}
        for root, per_root in bounds.items():
            result[root] = {}
            for key, (low, _) in per_root.items():
                known = positions.get(root, {}).get(key)
                if known is None:
                    result[root][key] = low
                elif known < low:
                    if self.options.fail_on_data_loss:
                        raise DataLossError(
                            f"{root}: {key} offsets {known}..{low - 1} were deleted before they were read "
                            "(set failOnDataLoss=false to skip them)"
                        )
                    result[root][key] = low
                else:
                    result[root][key] = known
        return result

    # -- reading ---------------------------------------------------------------------------------

    def _config(self, root: str) -> StoreConfig:
        if root not in self._configs:
            with open_read_only(root, self.options.geometry) as store:
                self._configs[root] = store.config
        return self._configs[root]

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The range of each queue that has rows in `[start, end)`, packed into tasks of up to
        `DEFAULT_MESSAGES_PER_PARTITION` messages (`plan.tasks`: a micro-batch of a few new messages in
        each of many queues is one task, where a task per queue cost each batch the tasks' fixed cost)."""
        begin, finish = self._decode(start), self._decode(end)
        ranges: list[Partition] = []
        for root in self.options.paths:
            for key, last in sorted(finish.get(root, {}).items()):
                first = begin.get(root, {}).get(key, 0)
                if last > first:
                    topic, queue_id = _split_key(key)
                    ranges.append(QueueRange(root, topic, queue_id, first, last, self._config(root)))
        packed = tasks(ranges, DEFAULT_MESSAGES_PER_PARTITION, DEFAULT_BYTES_PER_PARTITION)
        return [ScanPartition(task) for task in packed]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The messages of a task's queue ranges as record batches (ranges planned on the driver, whose
        data-loss check already ran in `latestOffset`)."""
        if not isinstance(partition, ScanPartition):
            return  # Spark's placeholder when a batch has no partitions
        for part in partition.value:
            assert isinstance(part, QueueRange)  # partitions() makes nothing else
            with LogReader(part.root, part.config) as log:
                runs = log.queue_runs(part.topic, part.queue_id, part.start, part.end)
                yield from run_batches(runs, part.root)

    def commit(self, end: dict) -> None:
        """Nothing to release: the source keeps no state between batches."""
