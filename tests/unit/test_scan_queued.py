"""`queued.QueueTable.held` answers, for every row of a batch at once, what the rule says of each row
alone: a NOT or COMMIT record of a planned queue whose queue offset lies inside that queue's bounds.
Batches of one topic (the table's short cut) and of many, topics no queue has, queue ids outside every
table row and offsets on both sides of each bound."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.format.sysflag import SysFlag
from rocketstore.scan.queued import QueueTable, queued

TOPICS = ["A", "B", "Topic-C", "D"]  # "D" is never planned
KINDS = [0, int(SysFlag.TRANSACTION_PREPARED), int(SysFlag.TRANSACTION_COMMIT), int(SysFlag.TRANSACTION_ROLLBACK)]

QUEUE_IDS = st.one_of(st.integers(-1, 5), st.just(2**31 - 1))  # the largest a queue id can be, too
QUEUES = st.lists(st.tuples(st.sampled_from(TOPICS[:3]), QUEUE_IDS, st.integers(0, 20), st.integers(0, 20)),
                  max_size=10, unique_by=lambda q: (q[0], q[1]))
ROWS = st.lists(st.tuples(st.sampled_from(TOPICS), st.one_of(st.integers(-2, 7), st.just(2**31 - 1)),
                          st.integers(-1, 22), st.sampled_from(KINDS)), max_size=60)


def _batch(rows: list[tuple[str, int, int, int]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "topic": pa.array([r[0] for r in rows], pa.string()),
        "queueId": pa.array([r[1] for r in rows], pa.int32()),
        "queueOffset": pa.array([r[2] for r in rows], pa.int64()),
        "sysFlag": pa.array([r[3] | 0x1 for r in rows], pa.int32()),  # another flag bit beside the kind
    })


def _held(queues: list[tuple[str, int, int, int]], row: tuple[str, int, int, int]) -> bool:
    topic, queue_id, offset, kind = row
    if kind not in (0, int(SysFlag.TRANSACTION_COMMIT)):
        return False
    return any(t == topic and q == queue_id and q >= 0 and lo <= offset < hi for t, q, lo, hi in queues)


@settings(deadline=None, max_examples=400)
@given(QUEUES, ROWS, st.booleans())
def test_held_is_the_rule_row_by_row(queues, rows, one_topic):
    if one_topic and rows:
        rows = [(rows[0][0], *row[1:]) for row in rows]
    batch = _batch(rows)
    keep = QueueTable(tuple(queues)).held(batch)
    expected = [_held(queues, row) for row in rows]
    assert (keep.tolist() if keep is not None else [True] * len(rows)) == expected
    kept = [row for batch in queued([batch], tuple(queues)) for row in batch.to_pylist()]
    assert [(r["topic"], r["queueId"], r["queueOffset"]) for r in kept] == \
        [row[:3] for row, held in zip(rows, expected, strict=True) if held]


def test_the_table_holds_one_cell_a_queue_whatever_its_id():
    table = QueueTable((("A", 2**31 - 1, 0, 5), ("B", 0, 0, 5)))
    assert table.lo.nbytes == table.hi.nbytes == 16  # not a row as wide as the largest queue id
    keep = table.held(_batch([("A", 2**31 - 1, 4, 0), ("A", 2**31 - 1, 5, 0), ("A", 0, 1, 0), ("B", 0, 1, 0)]))
    assert keep is not None and keep.tolist() == [True, False, False, True]


def test_a_slice_of_a_batch_is_read_at_its_own_offset():
    rows = [("A", 0, offset, 0) for offset in range(10)]
    table = QueueTable((("A", 0, 5, 8),))
    keep = table.held(_batch(rows).slice(4, 5))  # offsets 4..8
    assert keep is not None and keep.tolist() == [False, True, True, True, False]


def test_a_batch_of_one_topic_is_held_whole_only_inside_its_queues_span():
    """A topic whose queue ids run without a gap is checked first from the batch's extremes: every bound of
    that shortcut is the rule's."""
    queues = tuple(("A", q, 3, 10) for q in (1, 2, 3))
    table = QueueTable(queues)
    inside = [("A", q, offset, 0) for q in (1, 2, 3) for offset in (3, 9)]
    assert table.held(_batch(inside)) is None
    for row in (("A", 0, 5, 0), ("A", 4, 5, 0), ("A", 2, 10, 0), ("A", 2, 2, 0)):  # each just outside
        keep = table.held(_batch([*inside, row]))
        assert keep is not None and keep.tolist() == [True] * len(inside) + [False], row
    gapped = QueueTable((("A", 1, 3, 10), ("A", 3, 3, 10)))
    keep = gapped.held(_batch([("A", 1, 5, 0), ("A", 2, 5, 0), ("A", 3, 5, 0)]))
    assert keep is not None and keep.tolist() == [True, False, True]
