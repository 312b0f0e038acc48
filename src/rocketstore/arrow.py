"""Stores as Arrow, without Spark: a `pyarrow.RecordBatchReader` over one or more store directories.

    import rocketstore.arrow
    reader = rocketstore.arrow.read("/data/store", {"topics": "TopicA"},
                                    filters=[("queueId", "in", [0, 1]), ("storeTimestamp", ">=", 1795319620000)])
    table = reader.read_all()

The options are the Spark source's read options (`docs/spark.md`, "Batch reads"); the rows and columns
are the Spark source's (`rocketstore.scan.records.ARROW_SCHEMA`). `filters` are `(column, op, value)`
predicates (`rocketstore.scan.filters`), their AND: they prune the plan as Spark's pushed filters do,
and every batch holds exactly the rows they hold true for. Needs pyarrow (the `spark` extra), not pyspark.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import partial
from typing import Any

import pyarrow as pa

from rocketstore.errors import InvalidArgumentError
from rocketstore.scan.filters import Predicate, Prune, predicates
from rocketstore.scan.options import ReadOptions
from rocketstore.scan.plan import Partition, plan_partitions, read_partition
from rocketstore.scan.projection import Projection, projected
from rocketstore.scan.readahead import read_ahead, read_in_order
from rocketstore.scan.records import ARROW_SCHEMA

__all__ = ["ARROW_SCHEMA", "check", "read"]


def _parse(path: str | Sequence[str], options: Mapping[str, Any] | None,
           filters: Iterable[Sequence[Any]]) -> tuple[ReadOptions, tuple[Predicate, ...]]:
    roots = path if isinstance(path, str) else ",".join(path)
    try:
        opts = ReadOptions.parse({**{str(k): str(v) for k, v in (options or {}).items()}, "path": roots})
        return opts, predicates(filters)
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from None


def check(path: str | Sequence[str], options: Mapping[str, Any] | None = None,
          filters: Iterable[Sequence[Any]] = ()) -> None:
    """Check what `read` would be given, without opening a store.

    Raises:
        rocketstore.errors.InvalidArgumentError: a malformed option or filter, or a path that names no
            directory, naming it.
    """
    _parse(path, options, filters)


def read(path: str | Sequence[str], options: Mapping[str, Any] | None = None,
         filters: Iterable[Sequence[Any]] = (), columns: Iterable[str] | None = None) -> pa.RecordBatchReader:
    """The messages of the stores at `path` (a root, comma-separated roots, glob patterns, or a list of
    them) as a record batch reader, partitions in plan order.

    `columns` (names of `ARROW_SCHEMA`'s fields) makes the batches hold only those, in that order, and
    skips the work of the others (a read of `topic` parses no properties and slices no bodies); the
    rows are those of a read of every column. None: every column.

    The plan is made here (each store opened read-only once); the records are read as the reader is
    consumed, each partition through the store's files, one after the other in the consumer's thread
    (with `readAhead`, each decoded ahead in one more thread). Option `readThreads` above 1 reads that
    many partitions at once, each in a thread of its own, the batches still yielded in plan order; the
    batches decoded ahead of the consumer hold at most about `rocketstore.scan.readahead.AHEAD_BYTES`
    (256 MiB); an error of a partition is raised after the batches before it; releasing the reader
    early stops the threads (pyarrow's `close()` keeps the batches' source until the reader is
    released: until then the threads wait, idle). The threads overlap only the compiled walks over the
    records, which let go of the GIL, and take turns on the rest; where other processes keep the cores
    busy they read slower than one thread.

    Raises:
        rocketstore.errors.InvalidArgumentError: (a ValueError) a malformed option or filter, a path that
            names no directory, or a column that is not one (or is given twice), naming it.
        rocketstore.errors.StoreError: a path is not a store or does not fit the geometry.
    """
    opts, preds = _parse(path, options, filters)
    projection = Projection.of(columns, preds)
    parts = plan_partitions(opts, Prune.of(preds))

    schema = ARROW_SCHEMA if projection is None else projection.schema

    def partition(part: Partition) -> Iterator[pa.RecordBatch]:
        return projected(read_partition(opts, part, preds), projection)

    if opts.read_threads > 1:
        made = read_in_order([partial(partition, part) for part in parts], opts.read_threads)
        return pa.RecordBatchReader.from_batches(schema, made)

    def batches() -> Iterator[pa.RecordBatch]:
        for part in parts:
            yield from read_ahead(partition(part), opts.read_ahead)

    return pa.RecordBatchReader.from_batches(schema, batches())
