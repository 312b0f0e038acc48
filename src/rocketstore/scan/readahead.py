"""Decoding ahead: a partition's record batches made in a thread while the consumer handles the ones
before them (option `readAhead`).

The thread gains only where both sides let go of the GIL: the compiled column building
(`record_columns`), file reads and page faults on the decoding side, socket writes and Arrow's own
kernels on the consuming side. Reading records one by one (`decode_run`, `record_at`) and the numpy
checks of a queue chunk hold it, so on a machine whose cores are all busy (a Spark worker beside its
JVM) those parts take turns; `benchmarks/bench_spark_read.py` measures it.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

__all__ = ["read_ahead"]

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
