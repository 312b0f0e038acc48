"""Flush services: the commitlog's async flush, its sync group commit, and the queue/index/checkpoint flush.

The checkpoint only ever receives a timestamp after the bytes it vouches for are on disk: each service
samples the store timestamp *before* its flush and writes it into the checkpoint *after* the flush
succeeded (RocketMQ 4.9.8's rule). A failed flush raises; the service loop then stops and hands the
error to the store, which turns read-only (after an fsync error the kernel may have dropped the dirty
pages, so no later flush could be trusted to cover them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from rocketstore._types import Clock
from rocketstore.log.checkpoint import StoreCheckpoint
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.derived_ends import DerivedEnds, snapshot
from rocketstore.log.index_service import IndexService
from rocketstore.services.service import Service

GROUP_COMMIT_INTERVAL_MS = 10  # RocketMQ's GroupCommitService wakes every 10 ms or on request


WARM_AHEAD_MAX = 256 * 1024 * 1024
"""The most of the commitlog file being written that the flush pass populates ahead of the writes."""


class CommitLogFlushService(Service):
    """ASYNC mode (RocketMQ's FlushRealTimeService): every `interval_ms` flush the commitlog when at
    least `least_pages` pages are dirty, and everything every `thorough_interval_ms`.

    Each pass then populates the pages ahead of the write position (`MappedFile.populate`), twice as
    far as the log grew since the last pass (at most WARM_AHEAD_MAX, nothing while no put comes): the
    page faults and zero-filled pages of the next writes are taken on this thread, without the
    interpreter lock, instead of in each put (docs/benchmarks.md: 100 B puts 1.07-1.15x faster).
    """

    name = "commitlog-flush"

    def __init__(self, commitlog: CommitLog, checkpoint: StoreCheckpoint, clock: Clock, *, interval_ms: int,
                 least_pages: int, thorough_interval_ms: int, last_store_timestamp: Callable[[], int],
                 lock: threading.Lock) -> None:
        super().__init__(interval_ms)
        self.commitlog = commitlog
        self.checkpoint = checkpoint
        self.clock = clock
        self.least_pages = least_pages
        self.thorough_interval_ms = thorough_interval_ms
        self._last_thorough = clock()
        self._last_store_timestamp = last_store_timestamp
        self._lock = lock
        self._last_end = commitlog.max_offset
        self._warmed_to = 0

    def run_once(self) -> None:
        """One flush pass (thorough when the thorough interval has passed), then the warm-ahead.

        Raises:
            OSError: the disk did not accept the bytes.
        """
        now = self.clock()
        least = self.least_pages
        if now >= self._last_thorough + self.thorough_interval_ms:
            least = 0
            self._last_thorough = now
        with self._lock:  # what the flush covers: every record written before this point
            store_ts = self._last_store_timestamp()
            mf = self.commitlog.queue.last
            end = self.commitlog.max_offset
        self.commitlog.queue.flush(least)  # outside the lock: puts go on while the disk works
        if least == 0 and store_ts > 0:
            self.checkpoint.values.physic_msg_timestamp = store_ts
        grown, self._last_end = end - self._last_end, end
        if mf is not None and grown > 0:
            start = max(end, self._warmed_to) - mf.file_from_offset
            stop = min(end + min(2 * grown, WARM_AHEAD_MAX) - mf.file_from_offset, mf.file_size)
            if start < stop and mf.populate(start, stop):  # outside the lock: puts go on meanwhile
                self._warmed_to = mf.file_from_offset + stop


class GroupCommitService(Service):
    """SYNC mode: puts wait until their end offset is flushed; one sync serves every waiting put."""

    name = "group-commit"

    def __init__(self, commitlog: CommitLog, checkpoint: StoreCheckpoint, *,
                 last_store_timestamp: Callable[[], int], lock: threading.Lock) -> None:
        super().__init__(interval_ms=GROUP_COMMIT_INTERVAL_MS)
        self.commitlog = commitlog
        self.checkpoint = checkpoint
        self._last_store_timestamp = last_store_timestamp
        self._lock = lock
        self._cond = threading.Condition()
        self._flushed = commitlog.queue.flushed_offset
        self.syncs = 0  # flushes that moved the flushed offset (how many puts shared one is visible)
        self.before_sync: Callable[[], None] | None = None  # writes what producers queued (put_nowait)

    @property
    def flushed_offset(self) -> int:
        """Commitlog offset up to which every byte is known to be on disk."""
        return self._flushed

    def run_once(self) -> None:
        """Flush everything written so far and release the puts it covers.

        Raises:
            OSError: the disk did not accept the bytes (waiting puts are released, unconfirmed).
        """
        if self.before_sync is not None:
            self.before_sync()
        with self._lock:
            target = self.commitlog.max_offset
            store_ts = self._last_store_timestamp()
        if target <= self._flushed:
            return
        flushed = self.commitlog.queue.flush(0)
        self.syncs += 1
        if store_ts > 0:
            self.checkpoint.values.physic_msg_timestamp = store_ts
        self.flushed_to(flushed)

    def flushed_to(self, offset: int) -> None:
        """Everything up to `offset` is on disk (this service's sync, or the store's own flush): release
        the puts it covers."""
        with self._cond:
            if offset > self._flushed:
                self._flushed = offset
                self._cond.notify_all()

    def fail(self, exc: BaseException) -> None:
        """Record the failure and release every waiting put (they report FLUSH_DISK_TIMEOUT)."""
        super().fail(exc)
        with self._cond:
            self._cond.notify_all()

    def confirm(self, offset: int, timeout_ms: float, on_error: Callable[[BaseException], None]) -> bool:
        """`wait_flushed`, telling `on_error` of a flush error when that is why `offset` is not on disk
        (the one rule of a put that waits: `put`, `put_batch` and `PendingPut.result`)."""
        if self.wait_flushed(offset, timeout_ms):
            return True
        if self.error is not None:
            on_error(self.error)
        return False

    def wait_flushed(self, offset: int, timeout_ms: float) -> bool:
        """Block until `offset` is on disk; False on timeout or after a flush error."""
        if self._flushed >= offset and self.error is None:
            return True  # already there: no wake-up, no lock
        self.wakeup()
        with self._cond:
            self._cond.wait_for(lambda: self._flushed >= offset or self.error is not None,
                                timeout=timeout_ms / 1000)
            return self._flushed >= offset and self.error is None


class QueueFlushService(Service):
    """RocketMQ's FlushConsumeQueueService: flushes consume queues with `least_pages`; on a thorough
    pass flushes every queue and the index completely, then writes the sampled `logicsMsgTimestamp` and
    forces the checkpoint.
    """

    name = "queue-flush"

    def __init__(self, queues: Callable[[], list[ConsumeQueue]], index: IndexService,
                 checkpoint: StoreCheckpoint, clock: Clock, *, interval_ms: int, thorough_interval_ms: int,
                 lock: threading.Lock, least_pages: int = 2, derived_ends: DerivedEnds | None = None,
                 log_bounds: Callable[[], tuple[int, int]] = lambda: (0, 0)) -> None:
        super().__init__(interval_ms)
        self.queues = queues
        self.derived_ends = derived_ends
        self.log_bounds = log_bounds  # the log's min offset and how far it is on disk
        self.index = index
        self.checkpoint = checkpoint
        self.clock = clock
        self.thorough_interval_ms = thorough_interval_ms
        self.least_pages = least_pages
        self._last_thorough = 0
        self._lock = lock
        self.logics_timestamp = 0

    def run_once(self) -> None:
        """One flush pass.

        Raises:
            OSError: the disk did not accept the bytes.
        """
        now = self.clock()
        thorough = now >= self._last_thorough + self.thorough_interval_ms
        with self._lock:
            logics = self.logics_timestamp  # sampled before the flush: never ahead of what is durable
            queues = self.queues()
            ends = (snapshot(queues, self.index, *self.log_bounds()) if thorough and self.derived_ends is not None
                    else None)  # sampled with logics
            generation = None if self.derived_ends is None else self.derived_ends.generation
        for cq in queues:
            cq.flush(0 if thorough else self.least_pages)
        if thorough:
            self._last_thorough = now
            self.index.flush()  # outside the lock: a sync of the index files takes long, puts go on
            if ends is not None and self.derived_ends is not None:  # before the checkpoint: an abnormal
                self.derived_ends.persist(ends, generation)  # recovery then never starts after the record
            with self._lock:
                if logics > 0:
                    self.checkpoint.values.logics_msg_timestamp = logics
                self.checkpoint.flush()
