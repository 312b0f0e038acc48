"""`plan.tasks` packs a plan's partitions into tasks: every partition once, in plan order; a task of
several holds at most one task's work; and no task could have taken the next one's first partition
(the packing is greedy, so a short window's many small queue ranges become few tasks)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore.config import StoreConfig
from rocketstore.scan.plan import CommitLogRange, KeyLookup, Partition, QueueRange, tasks

CONFIG = StoreConfig()
MESSAGES, BYTES = 1000, 1 << 20


def _queue_range(start: int, length: int) -> Partition:
    return QueueRange("/s", "T", 0, start, start + length, CONFIG)


def _log_range(start: int, length: int) -> Partition:
    return CommitLogRange("/s", start, start + length, CONFIG)


PARTS = st.lists(st.one_of(
    st.builds(_queue_range, st.integers(0, 10**6), st.integers(0, 3 * MESSAGES)),
    st.builds(_log_range, st.integers(0, 10**9), st.integers(0, 3 * BYTES)),
    st.just(KeyLookup("/s", "T", "k")),
), max_size=40)


def _work(part: Partition) -> float:
    if isinstance(part, QueueRange):
        return (part.end - part.start) / MESSAGES
    if isinstance(part, CommitLogRange):
        return (part.end - part.start) / BYTES
    return float("inf")


@settings(deadline=None, max_examples=300)
@given(PARTS)
def test_tasks_keep_every_partition_in_order_and_pack_greedily(parts):
    packed = tasks(parts, MESSAGES, BYTES)
    assert [p for task in packed for p in task] == parts
    assert all(task for task in packed)
    for task in packed:
        if len(task) > 1:
            assert sum(_work(p) for p in task) <= 1.0
            assert not any(isinstance(p, KeyLookup) for p in task)
    for task, following in zip(packed, packed[1:], strict=False):
        assert sum(_work(p) for p in task) + _work(following[0]) > 1.0


def test_a_short_window_over_32_queues_is_one_task():
    parts = [QueueRange("/s", "T", q, 100, 130, CONFIG) for q in range(32)]  # 960 messages
    assert tasks(parts, MESSAGES, BYTES) == [tuple(parts)]
