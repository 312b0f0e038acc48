"""Batch reader: Spark's adapter over the read core (`rocketstore.scan.plan`), which plans the
partitions of one or more stores and reads them as Arrow record batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from rocketstore.scan.filters import EVERYTHING, Predicate, Prune
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.plan import CommitLogRange, KeyLookup, Partition, QueueRange, plan_partitions, read_partition

__all__ = [
    "CommitLogRange",
    "KeyLookup",
    "QueueRange",
    "RocketStoreBatchReader",
    "ScanPartition",
]


class ScanPartition(InputPartition):
    """A core partition (`QueueRange`, `CommitLogRange` or `KeyLookup`) as Spark's input partition."""

    def __init__(self, value: Partition) -> None:
        super().__init__(value)


class RocketStoreBatchReader(DataSourceReader):
    """Reads the partitions the read core plans; holds only picklable values (options, predicates)."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.predicates: tuple[Predicate, ...] = ()

    def partitions(self) -> Sequence[InputPartition]:
        """Queue ranges, commitlog ranges or key lookups (`rocketstore.scan.plan`)."""
        prune = Prune.of(self.predicates) if self.predicates else EVERYTHING
        return [ScanPartition(part) for part in plan_partitions(self.options, prune)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow record batches of the partition's messages that pass the bounds and the predicates."""
        if isinstance(partition, ScanPartition):
            yield from read_partition(self.options, partition.value, self.predicates)
        # else: Spark reads one placeholder partition when planning found none; it has no rows.
