"""What an open does to a store's files before the first put: recovery (`services.recovery`) and the
catch-up dispatch of the records the consume queues or the index lack; or, for a read-only open, the
end of the log and of each queue, found in memory."""

from __future__ import annotations

from pathlib import Path

from rocketstore.errors import StoreError
from rocketstore.log.checkpoint import StoreCheckpoint
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.derived_ends import DerivedEnds, Ends, QueueKey, snapshot
from rocketstore.log.index_service import IndexService
from rocketstore.services import odd_files, recovery
from rocketstore.services.dispatch import DISPATCH_BATCH, Dispatcher, DispatchRequest, packed_from, request_from_message
from rocketstore.store.queue_order import QueueOrder
from rocketstore.store.queues import ConsumeQueues


def queue_key(name: str) -> QueueKey:
    """(topic, queue id) of a `topic/queue id` name (a topic may hold no slash, RocketMQ's rule)."""
    topic, _, queue_id = name.rpartition("/")
    return topic, int(queue_id)


class OpenRecovery:
    """Brings the consume queues and the index level with the log at an open (a part of `MessageStore`,
    used once)."""

    def __init__(self, root: Path, commitlog: CommitLog, queues: ConsumeQueues, index: IndexService,
                 dispatcher: Dispatcher, delay_millis: list[int], *, check_crc: bool) -> None:
        self._root = root
        self.commitlog = commitlog
        self._queues = queues
        self.index = index
        self._dispatcher = dispatcher
        self._delay_millis = delay_millis
        self._check_crc = check_crc
        self.last_store_timestamp = 0
        """The store timestamp of the newest record the catch-up dispatched (0: none)."""

    def read_only_end(self) -> recovery.RecoveryReport:
        """A read-only open: the end of the log's whole records, and each queue's end below it, found in
        memory (nothing is written); the report of a READ_ONLY recovery."""
        end = recovery.find_end(self.commitlog)
        self.commitlog.end_read_only(end)
        for cq in self._queues.all():
            cq.end_read_only(end, recovery.NORMAL_RECOVERY_FILES)
        self._queues.reset_offsets(self.commitlog.min_offset)
        return recovery.RecoveryReport(recovery.RecoveryMode.READ_ONLY, end_offset=end)

    def recover(self, checkpoint: StoreCheckpoint, derived_ends: DerivedEnds, abnormal: bool, odd: odd_files.OddFiles,
                recorded: Ends | None, *, thorough: bool, recorded_whole: bool) -> recovery.RecoveryReport:
        """Recover (`services.recovery`), then catch up; the report. `recorded`: the queue and index ends
        recorded at the last flush (None: no record); not `recorded_whole`: the record was damaged or
        missing and `recorded` is its older backup, or nothing."""
        for key in recorded.queues if recorded else ():
            self._queues.queue_for(*key)  # a queue whose files are all gone is checked (and rebuilt) too
        report = recovery.recover(self._root, self.commitlog, self._queues.all(), self.index, checkpoint.values,
                                  abnormal=abnormal, check_crc=self._check_crc, walk_from=odd.first_resized_offset,
                                  recorded=recorded, recorded_whole=recorded_whole, thorough=thorough)
        report.odd_files = odd.files
        self._queues.reset_offsets(self.commitlog.min_offset)
        self._catch_up(report, from_walk=abnormal or recorded is None or not recorded_whole)
        self._queues.reset_offsets(self.commitlog.min_offset)
        if (recorded is None or not recorded_whole or report.queues_rebuilt or report.queues_truncated
                or report.index_files_dropped):
            derived_ends.persist(snapshot(self._queues.all(), self.index, self.commitlog.min_offset,
                                          self.commitlog.queue.flushed_offset))
        return report

    def _catch_up(self, report: recovery.RecoveryReport, *, from_walk: bool) -> None:
        """Dispatch the records the consume queues or the index do not hold yet: the queues' from the
        newest queue end on, or from where the recovery walk started when `from_walk` (an abnormal exit,
        or a store without recorded queue ends, whose queues are then checked against the walked
        records), and from the end of any queue recovery cut back; the index from the record its newest
        entry points at (keys of that record already there are not added again).

        A record whose queue offset does not follow its queue's last entry means a queue lost entries
        before the scan's start: the scan is redone once from the oldest record. A record that still
        does not fit (a damaged queue-offset field, which no CRC covers) is left out of its queue but
        indexed, and listed in `report.dispatch_skipped`.
        """
        min_phy = self.commitlog.min_offset
        cq_from = max((cq.max_physic_offset for cq in self._queues.all()), default=-1)
        for name in report.queues_truncated:  # a queue cut back catches up from its own end
            cut = self._queues.by_key[queue_key(name)].max_physic_offset
            if cut >= 0:
                cq_from = min(cq_from, cut)
        cq_from = max(cq_from, min_phy)
        if from_walk:
            cq_from = min(cq_from, report.start_offset)
        if report.queues_rebuilt:
            self._rebuild_queues({(q.topic, q.queue_id) for q in report.queues_rebuilt}, min_phy, cq_from, report)
        index_from = self.index.files[-1].header.end_phy_offset if self.index.files else -1
        start = max(min(cq_from, max(index_from, min_phy)), min_phy)
        try:
            self._dispatch_from(start, cq_from, index_from, report, skip_gaps=False)
        except StoreError:
            self._dispatch_from(min_phy, min_phy, index_from, report, skip_gaps=True)

    def _rebuild_queues(self, keys: set[tuple[str, int]], start: int, end: int,
                        report: recovery.RecoveryReport) -> None:
        """Write the entries of the queues `keys` (emptied by recovery) for the records in [start, end),
        keeping each queue's sequence (`QueueOrder`: a record out of it is listed in
        `report.dispatch_skipped`); the catch-up that follows dispatches every queue from `end` on."""
        order = self._queue_order(report)
        for msg in self.commitlog.scan(start, end):
            if (msg.topic, msg.queue_id) in keys:
                order.add(request_from_message(msg, self._delay_millis))
        order.finish()

    def _queue_order(self, report: recovery.RecoveryReport) -> QueueOrder:
        def write(req: DispatchRequest) -> bool:
            return self._dispatcher.dispatch(req, index=False)[0]

        def skipped(req: DispatchRequest, why: str) -> None:
            report.dispatch_skipped.append(f"{req.phy_offset}: {why}")

        return QueueOrder(write, self._queues.queue_for, skipped)

    def _dispatch_from(self, start: int, cq_from: int, index_from: int, report: recovery.RecoveryReport, *,
                       skip_gaps: bool) -> None:
        """Dispatch the records from `start` on: queue entries from `cq_from`, index keys from
        `index_from` (the record there may have been indexed in part: `IndexService` adds only the
        keys it lacks)."""
        if not skip_gaps:  # the usual catch-up: batches of records, as puts dispatch them
            for packed in packed_from(self.commitlog, start, self._delay_millis, DISPATCH_BATCH, cq_from, index_from,
                                      True):
                queued, indexed = self._dispatcher.write_packed(packed.runs, packed.groups)
                report.queue_entries_dispatched += queued
                report.index_records_dispatched += indexed
                if packed.last_store_timestamp is not None:
                    self.last_store_timestamp = packed.last_store_timestamp
            return
        order = self._queue_order(report)  # from the oldest record: each queue's sequence kept
        for msg in self.commitlog.scan(start):
            req = request_from_message(msg, self._delay_millis)
            if msg.phy_offset >= cq_from:
                report.queue_entries_dispatched += order.add(req)  # what was added, not what was looked at
            report.index_records_dispatched += self._dispatcher.dispatch(req, queues=False,
                                                                         index=msg.phy_offset >= index_from)[1]
            self.last_store_timestamp = msg.store_timestamp
        report.queue_entries_dispatched += order.finish()
