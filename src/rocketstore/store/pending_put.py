"""Puts that do not wait: `PendingPut`, the outcome of `MessageStore.put_nowait`, and `PutCombiner`,
which writes queued puts in batches.

In SYNC mode a put that waits for its flush lets one sync cover at most one put per producer thread.
`put_nowait` instead checks the message (errors are raised at once), queues it and returns a
`PendingPut`; `result()` waits until the record is written and, in SYNC mode, on disk. A producer that
keeps several puts pending lets one sync of the group commit confirm all of them (RocketMQ's
asyncPutMessage and its flush future). In ASYNC mode `put_nowait` writes at once, as `put` does.

The queue is written in batches, each under one hold of the store lock (flat combining), by whoever
comes first: the producer whose put makes it WRITE_THRESHOLD long, the group-commit thread before each
sync (`put_nowait` wakes it, so a queued put is written within one group commit), a `result()` whose
put is still queued, and `put()`, `put_batch()`, `flush()` and `close()`, which write the queue before
they go on. Whoever finds the combiner lock taken leaves the queue to its holder, who looks at the
queue again after releasing it. So eight producer threads do not hand the store lock to each other
once per message, and their records are written at batch speed. A reader sees a message once it is
written. A producer's puts keep the order of its calls, also across `put()` and `put_batch()`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rocketstore.results import PutResult, PutStatus
from rocketstore.services.flush import GroupCommitService
from rocketstore.store.prepare import Prepared

__all__ = ["WRITE_THRESHOLD", "PendingPut", "PutCombiner", "with_status"]

WRITE_THRESHOLD = 256  # queued puts a producer writes at once (8 producers: 1.14x the rate of 64; 512 no better)


def with_status(result: PutResult, status: PutStatus) -> PutResult:
    """`result` with another status (the record stays where it is)."""
    return PutResult(status, result.phy_offset, result.queue_offset, result.size, result.msg_id,
                     result.store_timestamp, result.topic, result.queue_id)


class PendingPut:
    """The outcome of one `put_nowait`: `result()` once the record is written and, in SYNC mode, on disk."""

    __slots__ = ("_combiner", "_deadline", "_error", "_final", "_on_flush_error", "_result", "_service")

    def __init__(self, service: GroupCommitService | None, timeout_ms: int,
                 on_flush_error: Callable[[BaseException], None], combiner: PutCombiner) -> None:
        """A put queued for writing; `service` is None when its flush is not waited for."""
        self._service = service
        self._deadline = time.monotonic() + timeout_ms / 1000
        self._on_flush_error = on_flush_error
        self._combiner = combiner
        self._result: PutResult | None = None
        self._error: BaseException | None = None
        self._final: PutResult | None = None

    @classmethod
    def settled(cls, result: PutResult) -> PendingPut:
        """A put whose result is final (ASYNC mode: written, nothing to wait for)."""
        pending = cls.__new__(cls)
        pending._service = None
        pending._deadline = 0.0
        pending._result = pending._final = result
        pending._error = None
        return pending

    def done(self) -> bool:
        """True when `result()` would answer without waiting."""
        if self._final is not None or self._error is not None:
            return True
        if self._result is None:
            return False
        service = self._service
        return service is None or service.flushed_offset >= self._result.phy_offset + self._result.size \
            or service.error is not None or time.monotonic() >= self._deadline

    def result(self) -> PutResult:
        """The put's result: PUT_OK once its record is on disk (SYNC mode), FLUSH_DISK_TIMEOUT when the
        disk did not confirm it within `sync_flush_timeout_ms` of the put or a flush failed (the record
        is in the log but maybe not durable; after a flush error the store turns read-only).

        Raises:
            StoreReadOnlyError: the record could not be written (the store turned read-only).
        """
        final = self._final
        if final is not None:
            return final
        result = self._result
        service = self._service
        if result is not None and (service is None or service.flushed_offset >= result.phy_offset + result.size
                                   and service.error is None):  # on disk already: nothing to wait for
            self._final = result
            return result
        if result is None and self._error is None:
            self._combiner.write_now()
        if self._error is not None:
            raise self._error
        result = self._result
        assert result is not None
        if service is None or service.confirm(result.phy_offset + result.size,
                                              max(0.0, (self._deadline - time.monotonic()) * 1000),
                                              self._on_flush_error):
            final = result
        else:
            final = with_status(result, PutStatus.FLUSH_DISK_TIMEOUT)
        self._final = final
        return final

    def __repr__(self) -> str:
        if self._error is not None:
            return f"PendingPut(failed: {self._error})"
        state = "queued" if self._result is None else f"phy_offset={self._result.phy_offset}"
        return f"PendingPut({state}, {'pending' if self._final is None else self._final.status.value})"


class PutCombiner:
    """The queue of `put_nowait` and its flat-combining writer (see the module's text)."""

    def __init__(self, write: Callable[[list[Prepared]], list[PutResult]]) -> None:
        """`write` appends prepared messages under the store lock and returns their results."""
        self._write = write
        self._queue: deque[tuple[Prepared, PendingPut]] = deque()
        self._lock = threading.Lock()  # held by the producer writing the queue
        self.used = False  # a put was ever queued: direct puts then order themselves after the queue

    def submit(self, prepared: Prepared, pending: PendingPut) -> None:
        """Queue a put; once WRITE_THRESHOLD are queued, write them unless someone else is at it."""
        self.used = True
        queue = self._queue
        queue.append((prepared, pending))
        if len(queue) >= WRITE_THRESHOLD:
            self.drain()

    def drain(self) -> None:
        """Write the queue unless someone else is at it. Whoever holds the lock looks at the queue
        again after releasing it, so nothing queued before that release stays behind."""
        queue = self._queue
        while queue:
            if not self._lock.acquire(blocking=False):
                return
            try:
                self._write_queue()
            finally:
                self._lock.release()

    def write_now(self) -> None:
        """Return once every put queued so far is written (or failed): wait for the producer writing
        the queue, then write what is left."""
        with self._lock:
            self._write_queue()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the writer's place: every put queued so far is written first (a direct put of a thread
        then follows that thread's queued ones)."""
        with self._lock:
            self._write_queue()
            yield
        self.drain()  # what was queued meanwhile

    def _write_queue(self) -> None:
        """Write everything queued as one batch (called with the lock held)."""
        queue = self._queue
        if not queue:
            return
        items = [queue.popleft() for _ in range(len(queue))]
        try:
            results = self._write([prepared for prepared, _ in items])
        except BaseException as exc:
            for _, pending in items:
                pending._error = exc
            if not isinstance(exc, Exception):
                raise
            return
        for (_, pending), result in zip(items, results, strict=True):
            pending._result = result
