"""Retention: delete expired commitlog files, then the consume-queue and index files they emptied.

RocketMQ 4.9.8's CleanCommitLogService / CleanConsumeQueueService (spec §8), one pass per `run_once()`:

* a pass may delete commitlog files when the local hour of `now` is one of `delete_when` ("04" or
  "03;04"), or when the disk holding the store is more than `disk_max_used_ratio` full;
* it deletes, oldest first and never the file being written, the files whose newest message is older
  than `file_reserved_hours` (every file, regardless of age, above `disk_clean_forcibly_ratio`, 85 %),
  stopping at the first file it keeps and after 10 files;
* then every consume-queue file (but the last of its queue) whose last entry points below the new
  commitlog min offset, and index files the same way, and moves each queue's min offset.

A deleted file's name goes at once; its mapping is closed at the next pass, so that a read that
started before the deletion finishes on valid memory (RocketMQ's delayed destroy of a shut-down file).

Unlike RocketMQ, a file's age is the store time of its newest message (the first record of the next
file, which is never younger), not its mtime: a copied or restored store keeps its ages. Above
`disk_full_ratio` (90 %) of disk use the store refuses puts until a pass finds the disk below that level
again.

Every deletion is logged, as RocketMQ's cleaner logs them, on the logger `rocketstore.services.cleanup`:
INFO for each file deleted, with its reason (expired; disk over diskMaxUsedSpaceRatio; forced above
diskSpaceCleanForciblyRatio; a queue or index file whose messages are all gone) and its size in bytes;
WARNING once a pass when the disk's use makes it delete, and when the disk passes (or falls back under)
the level at which puts are refused.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rocketstore._types import Clock
from rocketstore.format.consume_queue import UNIT, UNIT_SIZE
from rocketstore.format.message import MAGIC_V1, MAGIC_V2, peek_prefix, store_timestamp_in
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.index_service import IndexService
from rocketstore.services.service import Service
from rocketstore.storage import fs
from rocketstore.storage.mapped_file import MappedFile

log = logging.getLogger(__name__)

MAX_FILES_PER_PASS = 10  # RocketMQ 4.9.8 deletes at most 10 commitlog files per run
CLEAN_INTERVAL_MS = 10_000  # cleanResourceInterval
HOUR_MS = 3_600_000


@dataclass
class CleanupReport:
    """What one retention pass did."""

    now_ms: int
    disk_used_ratio: float
    by_time: bool = False
    by_space: bool = False
    at_once: bool = False
    disk_full: bool = False
    commitlog_files_deleted: list[str] = field(default_factory=list)
    queue_files_deleted: list[str] = field(default_factory=list)
    index_files_deleted: list[str] = field(default_factory=list)
    min_phy_offset: int = 0


def parse_delete_when(text: str) -> set[int]:
    """`"04"` or `"03;04"` -> the hours of the day at which files may be deleted by age.

    Raises:
        ValueError: a part that is not an hour 0..23.
    """
    hours = set()
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        hour = int(part)
        if not 0 <= hour <= 23:
            raise ValueError(f"delete_when hour {part!r} is not in 0..23")
        hours.add(hour)
    return hours


def _hours(hours: set[int]) -> str:
    return ";".join(f"{hour:02d}" for hour in sorted(hours)) or "none"


def local_hour(now_ms: int) -> int:
    """Hour of the day of `now_ms` in the local time zone (as RocketMQ's Calendar)."""
    return time.localtime(now_ms / 1000).tm_hour


def newest_message_time(files: list[MappedFile], index: int) -> int:
    """Store time of the newest message of file `index` (not the last file): the store time of the
    first record of the next file, falling back to the file's mtime when that is not readable."""
    nxt = files[index + 1].mm
    prefix = peek_prefix(nxt, 0)
    if prefix is not None and prefix[1] in (MAGIC_V1, MAGIC_V2):
        store_ts = store_timestamp_in(nxt)
        if store_ts > 0:
            return store_ts
    return int(os.stat(files[index].path).st_mtime * 1000)


class _Closable(Protocol):
    path: Path

    def pin(self) -> None: ...

    def close(self) -> None: ...


class CleanupService(Service):
    """Deletes expired files on a schedule; `run_once(now_ms)` is one pass. `queues()` is called under
    the lock at the start of a pass, before any file goes (the store dispatches there what its puts
    left behind the log)."""

    name = "cleanup"

    def __init__(self, root: Path, commitlog: CommitLog, queues: Callable[[], list[ConsumeQueue]],
                 index: IndexService, clock: Clock, *, file_reserved_hours: float, delete_when: str,
                 disk_max_used_ratio: float, clean_forcibly_ratio: float, disk_full_ratio: float,
                 lock: threading.Lock,
                 on_disk_full: Callable[[bool, float], None] | None = None,
                 interval_ms: int = CLEAN_INTERVAL_MS) -> None:
        super().__init__(interval_ms)
        self.root = root
        self.commitlog = commitlog
        self.queues = queues
        self.index = index
        self.clock = clock
        self.reserved_ms = int(file_reserved_hours * HOUR_MS)
        self.delete_hours = parse_delete_when(delete_when)
        self.disk_max_used_ratio = disk_max_used_ratio
        self.clean_forcibly_ratio = clean_forcibly_ratio  # diskSpaceCleanForciblyRatio: delete regardless of age
        self.disk_full_ratio = disk_full_ratio  # diskSpaceWarningLevelRatio: the store stops accepting puts
        self.on_disk_full = on_disk_full
        self._lock = lock
        self.last_report: CleanupReport | None = None
        self._retired: list[_Closable] = []
        self._disk_was_full = False

    def run_once(self, now_ms: int | None = None) -> CleanupReport:  # type: ignore[override]
        """One retention pass at `now_ms` (default: the clock).

        Raises:
            OSError: the disk could not be measured or a file could not be deleted.
        """
        now = self.clock() if now_ms is None else now_ms
        self.close_retired()
        usage = fs.disk_used_ratio(self.root)
        report = CleanupReport(now, usage)
        report.by_time = local_hour(now) in self.delete_hours
        report.by_space = usage > self.disk_max_used_ratio
        report.at_once = usage > self.clean_forcibly_ratio
        report.disk_full = usage > self.disk_full_ratio
        if report.disk_full != self._disk_was_full:
            self._disk_was_full = report.disk_full
            if report.disk_full:
                log.warning("disk of %s is %.1f%% used, above diskSpaceWarningLevelRatio %.0f%%: puts are refused "
                            "until retention frees space", self.root, 100 * usage, 100 * self.disk_full_ratio)
            else:
                log.warning("disk of %s is %.1f%% used, back under diskSpaceWarningLevelRatio %.0f%%: puts are "
                            "accepted again", self.root, 100 * usage, 100 * self.disk_full_ratio)
        if self.on_disk_full is not None:
            self.on_disk_full(report.disk_full, usage)
        with self._lock:
            queues = self.queues()  # first: the store dispatches what is behind its log while the log is whole
            if report.by_time or report.by_space or report.at_once:
                self._delete_commitlog(now, report)
            report.min_phy_offset = self.commitlog.min_offset
            self._delete_queues(queues, report.min_phy_offset, report)
            report.index_files_deleted = self._delete_index(report.min_phy_offset)
        self.last_report = report
        return report

    def close_retired(self) -> None:
        """Unmap the files deleted by the previous pass (and at store close)."""
        retired, self._retired = self._retired, []
        for f in retired:
            f.close()

    def _retire(self, f: _Closable, what: str, reason: str) -> str:
        f.pin()  # a deleted file cannot be mapped again: its readers keep the mapping until the next pass
        try:
            size = f.path.stat().st_size
        except OSError:
            size = 0
        f.path.unlink(missing_ok=True)
        self._retired.append(f)
        log.info("retention deleted %s %s (%d bytes): %s", what, f.path, size, reason)
        return f.path.name

    def _delete_index(self, min_phy: int) -> list[str]:
        files = self.index.files
        count = 0
        while count < len(files) - 1 and files[count].header.end_phy_offset < min_phy:
            count += 1
        self.index.files = files[count:]
        reason = f"every message it indexes is gone (commitlog min offset {min_phy})"
        return [self._retire(f, "index file", reason) for f in files[:count]]

    def _delete_commitlog(self, now: int, report: CleanupReport) -> None:
        files = self.commitlog.queue.files
        count = 0
        while count < min(MAX_FILES_PER_PASS, len(files) - 1):
            if not report.at_once and now < newest_message_time(files, count) + self.reserved_ms:
                break
            count += 1
        queue = self.commitlog.queue
        doomed, queue.files = files[:count], files[count:]
        if doomed and (report.by_space or report.at_once):
            level = (f"above diskSpaceCleanForciblyRatio {100 * self.clean_forcibly_ratio:.0f}%: every file but "
                     "the newest goes, whatever its age" if report.at_once else
                     f"above diskMaxUsedSpaceRatio {100 * self.disk_max_used_ratio:.0f}%: expired files go at "
                     "any hour")
            log.warning("disk of %s is %.1f%% used, %s", self.root, 100 * report.disk_used_ratio, level)
        reasons = [self._reason(files, index, now, report) for index in range(count)]  # before any file goes
        report.commitlog_files_deleted = [self._retire(mf, "commitlog file", reason)
                                          for mf, reason in zip(doomed, reasons, strict=True)]
        if doomed:
            fs.fsync_dir(queue.directory)

    def _reason(self, files: list[MappedFile], index: int, now: int, report: CleanupReport) -> str:
        """Why file `index` of the commitlog goes (the three reasons RocketMQ's cleaner logs)."""
        age_hours = (now - newest_message_time(files, index)) / HOUR_MS
        reserved = self.reserved_ms / HOUR_MS
        if report.at_once and (age_hours < reserved or not (report.by_time or report.by_space)):
            return (f"forced: disk {100 * report.disk_used_ratio:.1f}% used, above diskSpaceCleanForciblyRatio "
                    f"{100 * self.clean_forcibly_ratio:.0f}% (newest message {age_hours:.1f} h old, "
                    f"fileReservedTime {reserved:g} h)")
        expired = f"expired: newest message {age_hours:.1f} h old, fileReservedTime {reserved:g} h"
        if report.by_time:
            return f"{expired}, deleteWhen {_hours(self.delete_hours)}"
        return (f"{expired}; disk {100 * report.disk_used_ratio:.1f}% used, above diskMaxUsedSpaceRatio "
                f"{100 * self.disk_max_used_ratio:.0f}%")

    def _delete_queues(self, queues: list[ConsumeQueue], min_phy: int, report: CleanupReport) -> None:
        for cq in queues:
            files = cq.queue.files
            count = 0
            while count < len(files) - 1:
                mf = files[count]
                last_phy = UNIT.unpack_from(mf.mm, mf.file_size - UNIT_SIZE)[0]
                if last_phy >= min_phy:
                    break
                count += 1
            doomed, cq.queue.files = files[:count], files[count:]
            reason = f"every message it lists is gone (commitlog min offset {min_phy})"
            for mf in doomed:
                name = self._retire(mf, "consume-queue file", reason)
                report.queue_files_deleted.append(f"{cq.topic}/{cq.queue_id}/{name}")
            cq.correct_min_offset(min_phy)
