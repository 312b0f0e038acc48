"""Which rows of a commitlog range's batches are records its queues hold.

A read of a commitlog range that stands for queues (`plan.CommitLogRange.queues`) keeps a record when it
is a NOT or COMMIT record (the kinds a queue holds) whose queue offset lies inside its queue's bounds as
planned: records written after the plan, below a queue's retained minimum, or of prepared or rolled back
transactions are the log's, not the queues'.

The bounds are one sorted table of (topic, queue id) cells, and a batch's rows are checked against it
in one vectorized pass: each row's topic found by Arrow's `index_in` over the table's topics, its cell by
a binary search, then the cell's low and high bound gathered. A batch of one topic, as the records a single
producer writes mostly are, is found so from its bytes and checked first from its extremes alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore.format.sysflag import TRANSACTION_MASK, TransactionType
from rocketstore.scan.arrays import bools, from_numpy, from_values, numpy_view

__all__ = ["QueueBounds", "QueueTable", "queued"]

QueueBounds = tuple[tuple[str, int, int, int], ...]
"""(topic, queue id, min offset, max offset) of each queue of a store, as planned."""


class QueueTable:
    """The planned bounds of queues as a table of cells, one per (topic, queue id), sorted by cell number
    (the topic's row in `topics` times 2**32 plus the queue id): found for many rows at once by a binary
    search, whatever the queue ids (a dense table would take memory by the largest)."""

    def __init__(self, queues: QueueBounds) -> None:
        self.topics: dict[str, int] = {}
        for topic, _, _, _ in queues:
            self.topics.setdefault(topic, len(self.topics))
        cells = sorted((self.topics[topic] << 32 | queue_id, low, high) for topic, queue_id, low, high in queues
                       if queue_id >= 0)
        self.cells = np.array([c for c, _, _ in cells], dtype=np.int64)
        self.lo = np.array([low for _, low, _ in cells], dtype=np.int64)
        self.hi = np.array([high for _, _, high in cells], dtype=np.int64)
        self._names = from_values(list(self.topics), pa.string())
        # (first queue id, last queue id, highest low bound, lowest high bound) of each topic whose queue
        # ids run without a gap: a batch of that topic inside all four needs no search
        self._spans: dict[int, tuple[int, int, int, int]] = {}
        for row in self.topics.values():
            mine = [(c & 0xFFFFFFFF, low, high) for c, low, high in cells if c >> 32 == row]
            if mine and mine[-1][0] - mine[0][0] + 1 == len(mine):
                self._spans[row] = (mine[0][0], mine[-1][0], max(low for _, low, _ in mine),
                                    min(high for _, _, high in mine))

    def held(self, batch: pa.RecordBatch) -> np.ndarray | None:
        """Which rows of `batch` are records the queues hold; None when every row is."""
        kind = numpy_view(batch.column("sysFlag")) & TRANSACTION_MASK
        keep = (kind == int(TransactionType.NOT)) | (kind == int(TransactionType.COMMIT)) if kind.any() else None
        inside = self._inside(self._topic_rows(batch.column("topic")), numpy_view(batch.column("queueId")),
                              numpy_view(batch.column("queueOffset")))
        if inside is None:
            return keep
        return inside if keep is None else keep & inside

    def _topic_rows(self, topics: pa.Array) -> int | np.ndarray:
        """Each row's topic row (-1: a topic of no queue): one number when every row has the same topic."""
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
        found = pc.index_in(topics, value_set=self._names)  # the row of each topic, null for none
        rows = numpy_view(found)
        return np.where(bools(found.is_valid()), rows, -1) if found.null_count else rows

    def _inside(self, topic_rows: int | np.ndarray, queue_ids: np.ndarray,
                offsets: np.ndarray) -> np.ndarray | None:
        """Which rows' queue offsets lie inside their cell's bounds; None when a batch of one topic lies
        inside its topic's span (its queue ids and offsets against the span's extremes alone)."""
        if not self.cells.size or isinstance(topic_rows, int) and topic_rows < 0:
            return np.zeros(len(queue_ids), dtype=bool)
        span = self._spans.get(topic_rows) if isinstance(topic_rows, int) else None
        if span is not None and len(queue_ids) and span[0] <= queue_ids.min() and queue_ids.max() <= span[1] \
                and offsets.min() >= span[2] and offsets.max() < span[3]:
            return None
        wanted = (np.asarray(topic_rows, dtype=np.int64) << 32) | queue_ids.astype(np.int64)
        at = np.minimum(np.searchsorted(self.cells, wanted), len(self.cells) - 1)
        known = (self.cells[at] == wanted) & (queue_ids >= 0)
        held: np.ndarray = known & (offsets >= self.lo[at]) & (offsets < self.hi[at])
        if isinstance(topic_rows, np.ndarray):
            held &= topic_rows >= 0
        return held


def queued(found: Iterable[pa.RecordBatch], queues: QueueBounds) -> Iterator[pa.RecordBatch]:
    """The batches with only the rows of records the queues hold (batches left empty dropped)."""
    table = QueueTable(queues)
    for batch in found:
        keep = table.held(batch)
        if keep is not None and not keep.all():
            batch = batch.filter(from_numpy(keep))
        if batch.num_rows:
            yield batch

