"""The store's background services, started after an open's recovery and stopped at close: the
commitlog's flush (or SYNC mode's group commit), the consume queues' and index's flush, retention, and
delayed delivery."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from threading import Lock

from rocketstore._types import Clock
from rocketstore.config import FlushMode, StoreConfig
from rocketstore.format.message import StoredMessage
from rocketstore.format.store_dirs import CONFIG_DIR, QUARANTINE_DIR
from rocketstore.log.checkpoint import StoreCheckpoint
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.derived_ends import DerivedEnds
from rocketstore.log.index_service import IndexService
from rocketstore.log.json_config import StateFileProblem
from rocketstore.services.cleanup import CleanupService
from rocketstore.services.flush import CommitLogFlushService, GroupCommitService, QueueFlushService
from rocketstore.services.schedule import ScheduleService
from rocketstore.services.service import Service
from rocketstore.store.write_path import WritePath


class Background:
    """The services of one open store (none for a read-only open)."""

    def __init__(self) -> None:
        self.flush: CommitLogFlushService | GroupCommitService | None = None
        self.queue_flush: QueueFlushService | None = None
        self.cleanup: CleanupService | None = None
        self.schedule: ScheduleService | None = None

    def start(self, root: Path, config: StoreConfig, commitlog: CommitLog, checkpoint: StoreCheckpoint,
              index: IndexService, writes: WritePath, derived_ends: DerivedEnds, clock: Clock, lock: Lock, *,
              on_error: Callable[[BaseException], None], on_disk_full: Callable[[bool, float], None],
              schedule_queue: Callable[[int], ConsumeQueue | None],
              deliver: Callable[[StoredMessage, str, int, dict[str, str]], None],
              delay_millis: list[int]) -> StateFileProblem | None:
        """Make and start the services; the problem with delayed delivery's progress file, if any."""
        if config.flush_mode is FlushMode.SYNC:
            self.flush = GroupCommitService(commitlog, checkpoint,
                                            last_store_timestamp=lambda: writes.last_store_timestamp, lock=lock)
            self.flush.before_sync = writes.combiner.drain  # puts queued by put_nowait
        else:
            self.flush = CommitLogFlushService(
                commitlog, checkpoint, clock, interval_ms=config.flush_interval_ms,
                least_pages=config.flush_least_pages, thorough_interval_ms=config.flush_thorough_interval_ms,
                last_store_timestamp=lambda: writes.last_store_timestamp, lock=lock)
        self.queue_flush = QueueFlushService(
            writes.caught_up_queues, index, checkpoint, clock, derived_ends=derived_ends,
            log_bounds=lambda: (commitlog.min_offset, commitlog.queue.flushed_offset),
            interval_ms=config.flush_consume_queue_interval_ms,
            thorough_interval_ms=config.flush_consume_queue_thorough_interval_ms, lock=lock,
            least_pages=config.flush_consume_queue_least_pages)
        self.cleanup = CleanupService(
            root, commitlog, writes.caught_up_queues, index, clock,
            file_reserved_hours=config.file_reserved_hours, delete_when=config.delete_when,
            disk_max_used_ratio=config.disk_max_used_ratio, clean_forcibly_ratio=config.disk_clean_forcibly_ratio,
            disk_full_ratio=config.disk_full_ratio, lock=lock, on_disk_full=on_disk_full,
            interval_ms=config.clean_interval_ms)
        services: list[Service] = [self.flush, self.queue_flush, self.cleanup]
        problem = None
        if config.deliver_delayed_messages:
            self.schedule = ScheduleService(root, delay_millis, queue_for=schedule_queue, read=commitlog.message_at,
                                            deliver=deliver, clock=clock, interval_ms=config.schedule_interval_ms)
            problem = self.schedule.load(quarantine=root / QUARANTINE_DIR / CONFIG_DIR)
            services.append(self.schedule)
        for service in services:
            service.on_error = on_error
            service.start()
        return problem

    def stop(self) -> None:
        """Stop every service (delayed delivery and retention first, the flushes last)."""
        for service in (self.schedule, self.cleanup, self.flush, self.queue_flush):
            if service is not None:
                service.stop()

    def close_retired(self) -> None:
        """Close the files retention retired that a reader may still have held."""
        if self.cleanup is not None:
            self.cleanup.close_retired()
