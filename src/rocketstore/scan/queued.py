"""Which rows of a commitlog range's batches are records its queues hold.

A read of a commitlog range that stands for queues (`plan.CommitLogRange.queues`) keeps a record when it
is a NOT or COMMIT record (the kinds a queue holds) whose queue offset lies inside its queue's bounds as
planned: records written after the plan, below a queue's retained minimum, or of prepared or rolled back
transactions are the log's, not the queues'.

The bounds are one table of (topic, queue id) cells, and a batch's rows are checked against it in one
vectorized pass: each row's table row found by Arrow's `index_in` over the table's topics, then its
cell's low and high bound gathered by cell number. A batch of one topic, as the records a single
producer writes mostly are, is found so from its bytes and checked first from its extremes alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore.format.sysflag import TRANSACTION_MASK, TransactionType

__all__ = ["QueueBounds", "QueueTable", "queued"]

QueueBounds = tuple[tuple[str, int, int, int], ...]
"""(topic, queue id, min offset, max offset) of each queue of a store, as planned."""


class QueueTable:
    """The planned bounds of queues as a table: row `topics[topic]`, column queue id; a cell no queue
    fills holds the empty range [0, 0)."""

    def __init__(self, queues: QueueBounds) -> None:
        self.topics: dict[str, int] = {}
        for topic, _, _, _ in queues:
            self.topics.setdefault(topic, len(self.topics))
        self.width = max((queue_id for _, queue_id, _, _ in queues), default=-1) + 1
        self.lo = np.zeros(len(self.topics) * self.width, dtype=np.int64)
        self.hi = np.zeros(len(self.topics) * self.width, dtype=np.int64)
        for topic, queue_id, low, high in queues:
            if queue_id >= 0:
                cell = self.topics[topic] * self.width + queue_id
                self.lo[cell], self.hi[cell] = low, high
        self._names = pa.array(list(self.topics), type=pa.string())

    def held(self, batch: pa.RecordBatch) -> np.ndarray | None:
        """Which rows of `batch` are records the queues hold; None when every row is."""
        kind = _values(batch.column("sysFlag")) & TRANSACTION_MASK
        keep = (kind == int(TransactionType.NOT)) | (kind == int(TransactionType.COMMIT)) if kind.any() else None
        inside = self._inside(self._topic_rows(batch.column("topic")), _values(batch.column("queueId")),
                              _values(batch.column("queueOffset")))
        if inside is None:
            return keep
        return inside if keep is None else keep & inside

    def _topic_rows(self, topics: pa.Array) -> int | np.ndarray:
        """Each row's table row (-1: a topic of no queue): one number when every row has the same topic."""
        n = len(topics)
        if n and topics.null_count == 0:
            first = topics[0].as_py()
            if topics[n - 1].as_py() == first:  # else the rows are of more than one topic
                encoded = first.encode()
                offsets = np.frombuffer(topics.buffers()[1], dtype=np.int32, count=n + 1, offset=4 * topics.offset)
                if (np.diff(offsets) == len(encoded)).all():
                    data = topics.buffers()[2]
                    if data[int(offsets[0]):int(offsets[-1])].to_pybytes() == encoded * n:
                        return self.topics.get(first, -1)
        found = pc.index_in(topics, value_set=self._names)  # the row of each topic in the table, null for none
        if found.null_count:
            found = found.fill_null(-1)
        return found.to_numpy()

    def _inside(self, table_rows: int | np.ndarray, queue_ids: np.ndarray,
                offsets: np.ndarray) -> np.ndarray | None:
        """Which rows' queue offsets lie inside their cell's bounds; None when all do, as found first from
        the extremes alone for a batch of one topic."""
        if not self.lo.size or isinstance(table_rows, int) and table_rows < 0:
            return np.zeros(len(queue_ids), dtype=bool)
        if isinstance(table_rows, int):
            lo = self.lo[table_rows * self.width:(table_rows + 1) * self.width]
            hi = self.hi[table_rows * self.width:(table_rows + 1) * self.width]
            if len(queue_ids) and queue_ids.min() >= 0 and queue_ids.max() < self.width \
                    and offsets.min() >= lo.max() and offsets.max() < hi.min():
                return None
        known = (table_rows >= 0) & (queue_ids >= 0) & (queue_ids < self.width)
        cells = np.where(known, table_rows * self.width + queue_ids, 0)
        held: np.ndarray = known & (offsets >= self.lo[cells]) & (offsets < self.hi[cells])
        return held


def queued(found: Iterable[pa.RecordBatch], queues: QueueBounds) -> Iterator[pa.RecordBatch]:
    """The batches with only the rows of records the queues hold (batches left empty dropped)."""
    table = QueueTable(queues)
    for batch in found:
        keep = table.held(batch)
        if keep is not None and not keep.all():
            batch = batch.filter(pa.array(keep))
        if batch.num_rows:
            yield batch


def _values(column: pa.Array) -> np.ndarray:
    """The values of an integer column without nulls, as a numpy view of its buffer (`to_numpy` imports
    pandas on its first call: a quarter of a second of a process's first read)."""
    kind = np.dtype(column.type.to_pandas_dtype())  # numpy's type of it, pandas not involved
    return np.frombuffer(column.buffers()[1], dtype=kind, count=len(column), offset=column.offset * kind.itemsize)
