"""Decoding ahead: a partition's record batches made in a thread while the consumer handles the ones
before them (option `readAhead`, `read_ahead`); and several partitions read at once by a pool of
threads, their batches handed out in plan order (option `readThreads` of `rocketstore.arrow`,
`read_in_order`).

The thread gains only where both sides let go of the GIL: the compiled column building
(`record_columns`), file reads and page faults on the decoding side, socket writes and Arrow's own
kernels on the consuming side. Reading records one by one (`decode_run`, `record_at`) and the numpy
checks of a queue chunk hold it, so on a machine whose cores are all busy (a Spark worker beside its
JVM) those parts take turns; `benchmarks/bench_spark_read.py` measures it. The same holds for the
pool: its threads overlap the compiled walks (`record_spans`, `record_columns`) and take turns on the
Arrow array building; on a machine whose cores other processes keep busy, a thread that holds the GIL
when the system preempts it stalls the others (`benchmarks/bench_vs_java.py --arrow` sets the pool
beside one thread).
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import Any

import pyarrow as pa

__all__ = ["AHEAD_BYTES", "read_ahead", "read_in_order"]

_END = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(batches: Iterator[pa.RecordBatch], depth: int) -> Iterator[pa.RecordBatch]:
    """`batches` as they are, made up to `depth` ahead in a daemon thread (`depth` 0: in this thread).

    An error of the decoding is raised here, at the batch where it happened. Closing the returned
    generator early stops the thread at its next batch.
    """
    if depth <= 0:
        yield from batches
        return
    ready: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for batch in batches:
                while not stop.is_set():
                    try:
                        ready.put(batch, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            ready.put(_END)
        except BaseException as exc:  # handed to the consumer, raised there
            ready.put(_Failed(exc))

    thread = threading.Thread(target=produce, name="rocketstore-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = ready.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # let a producer blocked on a full queue see the stop
            try:
                ready.get_nowait()
            except queue.Empty:
                thread.join(0.05)


AHEAD_BYTES = 256 * 1024 * 1024
"""Bytes of record batches `read_in_order`'s workers hold decoded ahead of the consumer, at most (past it
only by the batch each worker is making, and by the partition the consumer is on, which may always hold
`_HEAD_DEPTH` batches)."""
_HEAD_DEPTH = 4


class _Pool:
    """The state the workers of `read_in_order` share with its consumer, under one lock: `arrived` wakes
    the consumer (an item of the partition it is on), `room` the workers (an item taken, or the end)."""

    def __init__(self, count: int, budget: int) -> None:
        self.ready: list[collections.deque[Any]] = [collections.deque() for _ in range(count)]
        lock = threading.Lock()
        self.arrived = threading.Condition(lock)
        self.room = threading.Condition(lock)
        self.head = 0  # the partition the consumer is on
        self.next = 0  # the next partition a worker takes
        self.held = 0  # bytes of the batches waiting in `ready`
        self.budget = budget
        self.stop = False

    def take(self) -> int | None:
        """The next partition to read, or None when there is none or the read stopped."""
        with self.room:
            if self.stop or self.next >= len(self.ready):
                return None
            self.next += 1
            return self.next - 1

    def _full(self, index: int, size: int) -> bool:
        if self.held + size <= self.budget or self.held == 0:
            return False
        return index != self.head or len(self.ready[index]) >= _HEAD_DEPTH

    def put(self, index: int, item: Any, size: int) -> bool:
        """Hand `item` of partition `index` to the consumer once there is room; False when the read
        stopped. The head partition may always hold `_HEAD_DEPTH` items, so the consumer never waits on
        the budget the partitions after it took."""
        with self.room:
            while not self.stop and self._full(index, size):
                self.room.wait()
            if self.stop:
                return False
            self.ready[index].append((item, size))
            self.held += size
            if index == self.head:
                self.arrived.notify()
            return True

    def get(self) -> Any:
        """The next item of the head partition, waited for."""
        with self.arrived:
            items = self.ready[self.head]
            while not items:
                self.arrived.wait()
            item, size = items.popleft()
            self.held -= size
            if item is _END:
                self.head += 1
            self.room.notify_all()
            return item

    def close(self) -> None:
        with self.room:
            self.stop = True
            self.room.notify_all()


def _work(pool: _Pool, partitions: Sequence[Callable[[], Iterator[pa.RecordBatch]]]) -> None:
    while (index := pool.take()) is not None:
        batches: Iterator[pa.RecordBatch] | None = None
        try:
            batches = partitions[index]()
            for batch in batches:
                if not pool.put(index, batch, batch.get_total_buffer_size()):
                    return
            end: Any = _END
        except BaseException as exc:  # handed to the consumer, raised at this partition's place
            end = _Failed(exc)
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
        if not pool.put(index, end, 0):
            return


def read_in_order(partitions: Sequence[Callable[[], Iterator[pa.RecordBatch]]], threads: int,
                  ahead_bytes: int = AHEAD_BYTES) -> Generator[pa.RecordBatch, None, None]:
    """The batches of every partition (each a callable that makes its batches), partition after
    partition in the given order, made by up to `threads` daemon threads at once, each reading a whole
    partition and then taking the next one not yet taken.

    The batches made ahead of the consumer hold at most about `ahead_bytes` (`AHEAD_BYTES`): a worker
    past the budget waits, except on the partition the consumer is on. An error of a partition is
    raised here, after its batches made before it. Closing the returned generator early stops the
    workers (each at its next batch) and waits for them to end.
    """
    if threads <= 1 or len(partitions) <= 1:
        for make in partitions:
            yield from make()
        return
    pool = _Pool(len(partitions), ahead_bytes)
    workers = [threading.Thread(target=_work, args=(pool, partitions), name=f"rocketstore-read-{n}", daemon=True)
               for n in range(min(threads, len(partitions)))]
    for worker in workers:
        worker.start()
    try:
        while pool.head < len(partitions):
            item = pool.get()
            if isinstance(item, _Failed):
                raise item.error
            if item is not _END:
                yield item
    finally:
        pool.close()
        for worker in workers:
            worker.join()
