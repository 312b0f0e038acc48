"""Batch reader: Spark's adapter over the read core (`rocketstore.scan.plan`), which plans the
partitions of one or more stores and reads them as Arrow record batches.

`RocketStoreBatchReader` reads what the options bound. `RocketStorePushdownReader` (option
`filterPushdown=true`, with `spark.sql.python.filterPushdown.enabled`) also takes the filters Spark
pushes: it turns those it understands into core predicates, which prune the plan
(`rocketstore.scan.filters.Prune`) and drop the rows they fail in the tasks, and hands every filter back,
so Spark evaluates each one again. Its state comes from one `pushFilters` call on a fresh reader, nothing
else.

Spark's Python data source API tells a reader no columns a query needs, but a schema given to the read
reaches it: one of some of the message columns is read as `rocketstore.arrow.read`'s `columns`, the
work of the others skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
)
from pyspark.sql.types import StructType

from rocketstore.errors import InvalidArgumentError
from rocketstore.scan.filters import EVERYTHING, Predicate, Prune, predicates
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.plan import (
    CommitLogRange,
    KeyLookup,
    Partition,
    QueueRange,
    plan_partitions,
    read_partition,
    tasks,
)
from rocketstore.scan.projection import Projection, projected
from rocketstore.scan.readahead import read_ahead
from rocketstore.spark.schema import MESSAGE_SCHEMA

__all__ = [
    "CommitLogRange",
    "KeyLookup",
    "QueueRange",
    "RocketStoreBatchReader",
    "RocketStorePushdownReader",
    "ScanPartition",
    "schema_columns",
    "to_predicate",
]


class ScanPartition(InputPartition):
    """A task's core partitions (`QueueRange`, `CommitLogRange` or `KeyLookup`; `plan.tasks` packs the
    small ones together) as Spark's input partition, read one after the other."""

    def __init__(self, value: tuple[Partition, ...]) -> None:
        super().__init__(value)


def schema_columns(schema: StructType) -> tuple[str, ...] | None:
    """The columns of a schema given to a read, when it is some of the message schema's (None: all of
    them, in their order).

    Raises:
        rocketstore.errors.InvalidArgumentError: (a ValueError) a column that is not one of the message
            schema or has another type there, naming it.
    """
    if schema.fieldNames() == MESSAGE_SCHEMA.fieldNames():
        return None
    known = {field.name: field.dataType for field in MESSAGE_SCHEMA.fields}
    for field in schema.fields:
        if field.name not in known:
            raise InvalidArgumentError(f"schema column {field.name!r} is not a message column; the columns are "
                                       f"{', '.join(known)}")
        if field.dataType != known[field.name]:
            raise InvalidArgumentError(f"schema column {field.name!r} is {known[field.name].simpleString()} in the "
                                       f"message schema, not {field.dataType.simpleString()}")
    return tuple(schema.fieldNames())


class RocketStoreBatchReader(DataSourceReader):
    """Reads the partitions the read core plans; holds only picklable values (options, predicates, the
    columns of a schema given to the read)."""

    def __init__(self, options: ReadOptions, columns: tuple[str, ...] | None = None) -> None:
        self.options = options
        self.columns = columns
        self.predicates: tuple[Predicate, ...] = ()

    def partitions(self) -> Sequence[InputPartition]:
        """Queue ranges, commitlog ranges or key lookups (`rocketstore.scan.plan`), consecutive small ones
        packed into one task (`plan.tasks`: a Spark task has a fixed cost)."""
        prune = Prune.of(self.predicates) if self.predicates else EVERYTHING
        parts = plan_partitions(self.options, prune)
        return [ScanPartition(task) for task in
                tasks(parts, self.options.messages_per_partition, self.options.bytes_per_partition)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Arrow record batches of the partition's messages that pass the bounds and the predicates."""
        if isinstance(partition, ScanPartition):
            projection = Projection.of(self.columns, self.predicates)
            found = (batch for part in partition.value for batch in read_partition(self.options, part, self.predicates))
            yield from read_ahead(projected(found, projection), self.options.read_ahead)
        # else: Spark reads one placeholder partition when planning found none; it has no rows.


class RocketStorePushdownReader(RocketStoreBatchReader):
    """`RocketStoreBatchReader` that prunes by the filters Spark pushes (and hands all of them back)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Take the filters this reader understands as predicates (replacing any taken before) and return
        every filter, for Spark to evaluate after the scan."""
        taken = [p for p in map(to_predicate, filters) if p is not None]
        self.predicates = predicates(taken)
        return list(filters)


_COMPLEMENT = {"=": "!=", "<": ">=", "<=": ">", ">": "<=", ">=": "<", "in": "not in", "is null": "is not null"}
_OPS: dict[type, str] = {EqualTo: "=", GreaterThan: ">", GreaterThanOrEqual: ">=", LessThan: "<",
                         LessThanOrEqual: "<=", In: "in", IsNull: "is null", IsNotNull: "is not null"}


def to_predicate(f: Filter) -> Predicate | None:
    """The core predicate of a Spark filter on a top-level integer or string column, or None when there is
    none (another column or kind of filter, a value of another type)."""
    negated = isinstance(f, Not)
    inner: Any = f.child if isinstance(f, Not) else f
    if isinstance(inner, EqualNullSafe):
        if inner.value is None:
            return None
        op = "="  # x <=> v with v not null is x = v, except for null x, which no filter keeps
        if negated:
            return None  # NOT (x <=> v) keeps a null x
    elif type(inner) in _OPS:
        op = _OPS[type(inner)]
    else:
        return None
    attribute: tuple[str, ...] = getattr(inner, "attribute", ())
    if len(attribute) != 1:
        return None
    if negated:
        if op == "is not null":
            op = "is null"
        elif op in _COMPLEMENT:
            op = _COMPLEMENT[op]
        else:
            return None
    value = getattr(inner, "value", None)
    try:
        return predicates([(attribute[0], op, value)])[0]
    except ValueError:
        return None
