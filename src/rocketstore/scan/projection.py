"""A read's projection: the columns asked for, in their order, and the ones a read builds to give them.

A read builds the columns asked, those its predicates test, and the few the read core looks at itself
(`CORE`: the topic, queue and store-time bounds and the log-order read's queue check); the batch
builders (`scan.columnar`) skip every other column's work: no properties parse when none of `uniqKey`,
`tags`, `keys`, `properties` is built, no body slices without `body`, and so on.

The builders learn the columns from `building()`, set by `projected` around each step of a partition's
batches, in whichever thread takes that step (the read core's signatures stay those of a full read).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass

import pyarrow as pa

from rocketstore.errors import InvalidArgumentError
from rocketstore.scan.filters import Predicate
from rocketstore.scan.records import ARROW_SCHEMA, COLUMNS

__all__ = ["CORE", "Projection", "building", "projected"]

CORE = frozenset({"topic", "queueId", "queueOffset", "sysFlag", "storeTimestamp"})
"""The columns the read core tests on its own (topic and store-time bounds, the queues a log-order read
keeps, a queue range's topic check): always built, cheap fixed-width fields and the topic."""

_BUILT: ContextVar[frozenset[str] | None] = ContextVar("rocketstore_built_columns", default=None)


def building() -> frozenset[str] | None:
    """The columns the batches being made now need (None: every column)."""
    return _BUILT.get()


@dataclass(frozen=True)
class Projection:
    """The columns a read gives (`columns`, in that order) and those it builds (`built`)."""

    columns: tuple[str, ...]
    built: frozenset[str]

    @classmethod
    def of(cls, columns: Iterable[str] | None, preds: Sequence[Predicate] = ()) -> Projection | None:
        """The projection of `columns` (names of `ARROW_SCHEMA`'s fields) for a read with `preds`, or
        None for every column (`columns` None).

        Raises:
            rocketstore.errors.InvalidArgumentError: a name that is not a column, or one given twice,
                naming it and the known columns.
        """
        if columns is None:
            return None
        if isinstance(columns, str):
            raise InvalidArgumentError(f"columns must be a list of column names, not the string {columns!r}")
        wanted = tuple(columns)
        for name in wanted:
            if name not in COLUMNS:
                raise InvalidArgumentError(f"unknown column {name!r}; the columns are {', '.join(COLUMNS)}")
        if len(set(wanted)) != len(wanted):
            twice = sorted({name for name in wanted if wanted.count(name) > 1})
            raise InvalidArgumentError(f"column {twice[0]!r} asked for twice")
        return cls(wanted, frozenset(wanted) | CORE | {column for column, _, _ in preds})

    @property
    def schema(self) -> pa.Schema:
        """The schema of the batches the read gives."""
        return pa.schema([ARROW_SCHEMA.field(name) for name in self.columns])


def projected(batches: Iterator[pa.RecordBatch], projection: Projection | None) -> Iterator[pa.RecordBatch]:
    """`batches` (a partition's, made as they are taken) built with only `projection.built` and given
    with the columns asked, in their order; `batches` as they are for no projection. Closing the
    result closes `batches`."""
    if projection is None:
        yield from batches
        return
    columns = list(projection.columns)
    try:
        while True:
            token = _BUILT.set(projection.built)
            try:
                batch = next(batches)
            except StopIteration:
                return
            finally:
                _BUILT.reset(token)
            yield batch.select(columns)
    finally:
        close = getattr(batches, "close", None)
        if close is not None:
            close()
