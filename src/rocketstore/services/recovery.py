"""Recovery: find the end of the whole records of the commitlog, set every structure to it, move
whatever lies past it aside (never destroying it), and dispatch what the queues and index miss.

Normal mode (clean close, no `abort` file) scans the last three commitlog files, as RocketMQ 4.9.8.
Abnormal mode (`abort` present) starts at the newest file whose first record is older than the
checkpoint's safe time and dispatches every record from there. Unlike RocketMQ, bytes past the
recovered end are first copied to `quarantine/<file>.<position>.bin` and listed in the report.
"""

from __future__ import annotations

import enum
import struct
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rocketstore._types import Buffer
from rocketstore.errors import CorruptRecordError, MessageNotFoundError
from rocketstore.format import properties as props
from rocketstore.format.checkpoint import Checkpoint
from rocketstore.format.consume_queue import UNIT_SIZE, CqUnit
from rocketstore.format.index import FIRST_ENTRY, IndexHeader, index_key
from rocketstore.format.javahash import index_key_hash, tags_code
from rocketstore.format.layout import JAVA_LONG_MAX
from rocketstore.format.message import (
    END_OF_FILE,
    MAGIC_V1,
    MAGIC_V2,
    NEED_DATA,
    StoredMessage,
    decode_message,
    peek_prefix,
    store_timestamp_in,
)
from rocketstore.format.spans import SPANS_BLANK, SPANS_FULL, record_spans
from rocketstore.format.store_dirs import CONSUME_QUEUE_DIR, QUARANTINE_DIR
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.derived_ends import Ends, IndexEnd, QueueEnd
from rocketstore.log.index_file import IndexFile
from rocketstore.log.index_service import IndexService
from rocketstore.log.json_config import StateFileProblem
from rocketstore.native import speedups
from rocketstore.services.dispatch import DISPATCH_BATCH, request_from_message, requests_from
from rocketstore.services.odd_files import OddFile
from rocketstore.storage import fs, sparse
from rocketstore.storage.mapped_file import MappedFile

_PHY_OFFSET = struct.Struct(">q")
LONG_MAX = JAVA_LONG_MAX
NORMAL_RECOVERY_FILES = 3
_SPANS_A_CALL = 65536
"""Records a `record_spans` call of `find_end` walks at most."""


class RecoveryMode(str, enum.Enum):
    """Which recovery ran."""

    NORMAL = "normal"
    ABNORMAL = "abnormal"
    READ_ONLY = "read-only"


@dataclass(frozen=True)
class QuarantinedRange:
    """Bytes moved aside from past the recovered end."""

    source: str
    position: int
    length: int
    saved_to: str
    reason: str


@dataclass(frozen=True)
class RebuiltQueue:
    """A consume queue found damaged: its files went to quarantine and it was rebuilt from the log."""

    topic: str
    queue_id: int
    reason: str
    saved_to: str


@dataclass
class RecoveryReport:
    """What recovery did when the store was opened."""

    mode: RecoveryMode
    start_offset: int = 0
    end_offset: int = 0
    stop_reason: str = "end of data"
    records_scanned: int = 0
    queue_entries_dispatched: int = 0
    index_records_dispatched: int = 0
    queues_truncated: list[str] = field(default_factory=list)
    index_files_dropped: list[str] = field(default_factory=list)
    commitlog_files_removed: list[str] = field(default_factory=list)
    quarantined: list[QuarantinedRange] = field(default_factory=list)
    dispatch_skipped: list[str] = field(default_factory=list)
    queues_rebuilt: list[RebuiltQueue] = field(default_factory=list)
    odd_files: list[OddFile] = field(default_factory=list)
    state_files: list[StateFileProblem] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    """What the store had on disk and no longer has (the log ends below where it was flushed)."""

    @property
    def clean(self) -> bool:
        """True when nothing was moved aside, removed, rebuilt, resized or left out of a queue, and every
        state file read as it was."""
        return not (self.quarantined or self.commitlog_files_removed or self.dispatch_skipped
                    or self.queues_rebuilt or self.odd_files or self.state_files or self.lost
                    or (self.mode is RecoveryMode.NORMAL and self.queues_truncated))

    def to_dict(self) -> dict[str, object]:
        """Plain JSON-ready dict."""
        return {
            "mode": self.mode.value, "start_offset": self.start_offset, "end_offset": self.end_offset,
            "stop_reason": self.stop_reason, "records_scanned": self.records_scanned,
            "queue_entries_dispatched": self.queue_entries_dispatched,
            "index_records_dispatched": self.index_records_dispatched,
            "queues_truncated": self.queues_truncated, "index_files_dropped": self.index_files_dropped,
            "commitlog_files_removed": self.commitlog_files_removed,
            "quarantined": [vars(q) for q in self.quarantined],
            "dispatch_skipped": self.dispatch_skipped, "queues_rebuilt": [vars(q) for q in self.queues_rebuilt],
            "odd_files": [vars(f) for f in self.odd_files],
            "state_files": [vars(f) for f in self.state_files], "lost": self.lost,
        }


class WalkStop(enum.IntEnum):
    """Why `walk_records` stopped (the compiled walk returns these values; `_layout.h` has them)."""

    BLANK = 0
    """A blank record at the position: the file's data ends there."""
    CHECK = 1
    """The record at the position is not whole and well formed (or the buffer ends): the full decode
    says why."""


def walk_records_py(buf: Buffer, pos: int, file_start: int, check_crc: bool) -> tuple[int, int, WalkStop]:
    """The recovery walk over one commitlog file's mapping from `pos`: every record that passes
    `_record_check` (whole and well formed by `decode_message`, with its body CRC when `check_crc`, at
    its own physical offset `file_start + pos`, not torn). Returns the position it stopped at, how many
    records it passed, and why it stopped. The compiled `walk_records` runs the same loop over the
    bytes, with the checks of `build_message`."""
    count = 0
    while True:
        size, reason = _record_check(buf, pos, file_start, check_crc, "")
        if reason is not None:
            return pos, count, WalkStop.CHECK
        if size < 0:
            return pos, count, WalkStop.BLANK
        pos += size
        count += 1


def _record_check(buf: Buffer, pos: int, file_start: int, check_crc: bool, name: str) -> tuple[int, str | None]:
    """The walk's checks of the record at `pos` of the commitlog file `name`: (its size, None) when the
    walk passes it, (-1, None) for a blank record (the file's end), (0, why) when the walk stops there."""
    try:
        result = decode_message(buf, pos, check_crc=check_crc)
    except CorruptRecordError as exc:
        return 0, f"{exc.reason} at {name}+{pos}"
    if result is END_OF_FILE:
        return -1, None
    if result is NEED_DATA:
        return 0, f"record cut by the end of {name} at +{pos}"
    if result.phy_offset != file_start + pos:
        return 0, f"record at {name}+{pos} claims physical offset {result.phy_offset}"
    if _torn(buf, pos, result):
        return 0, f"torn record at {name}+{pos} (its last byte is zero)"
    return result.size, None


walk_records: Callable[[Buffer, int, int, bool], tuple[int, int, int]] = (
    walk_records_py if speedups is None or not hasattr(speedups, "walk_records") else speedups.walk_records)


class _Walk:
    """Walks the whole records from a file on; afterwards `end` and `reason` say where it stopped and
    `scanned` how many records it passed."""

    def __init__(self, commitlog: CommitLog, start_index: int, check_crc: bool) -> None:
        self.commitlog = commitlog
        self.start_index = start_index
        self.check_crc = check_crc
        files = commitlog.queue.files
        self.end = files[start_index].file_from_offset if files else 0
        self.reason = "end of data"
        self.scanned = 0

    def run(self) -> None:
        files = self.commitlog.queue.files
        for index in range(self.start_index, len(files)):
            mf = files[index]
            pos = 0
            self.end = mf.file_from_offset
            while True:
                pos, count, stop = walk_records(mf.mm, pos, mf.file_from_offset, self.check_crc)
                self.scanned += count
                self.end = mf.file_from_offset + pos
                if stop == WalkStop.BLANK:
                    self.end = mf.end_offset
                    break
                # the full decode says why the fast loop stopped (or takes a record it left)
                size, reason = _record_check(mf.mm, pos, mf.file_from_offset, self.check_crc, mf.path.name)
                if reason is not None:
                    self.reason = reason
                    return
                if size < 0:
                    self.end = mf.end_offset
                    break
                pos += size
                self.scanned += 1
                self.end = mf.file_from_offset + pos
        self.reason = "end of data"


def _torn(buf: Buffer, pos: int, msg: StoredMessage) -> bool:
    """True when a record that parses ends in a zero byte where real data must be: its properties end
    with the \x02 separator, or, when it has none, its topic (before the 2-byte zero length) is not
    NUL-terminated. A write torn before the record's end leaves zeros there, which the body CRC
    alone cannot see.
    """
    last = pos + msg.size - 1 - (0 if msg.properties_string else 2)
    return buf[last] == 0


def find_end(commitlog: CommitLog, check_crc: bool = True) -> int:
    """Physical offset one past the last whole record, for read-only opens (nothing is repaired).

    Files before the last one holding data are taken as whole (they end with a blank record). In
    that file, records are walked by their length prefix and own physical offset (`format.spans`), and
    the last one is decoded in full (CRC and torn-write checks): a record a live writer is still copying
    ends the data before it.
    """
    files = commitlog.queue.files
    index = len(files) - 1
    while index > 0 and peek_prefix(files[index].mm, 0) in (None, (0, 0)):
        index -= 1
    if index < 0:
        return 0
    mf = files[index]
    buf, size = mf.mm, mf.file_size
    starts, ends = array("q", bytes(8 * _SPANS_A_CALL)), array("q", bytes(8 * _SPANS_A_CALL))
    pos, stop = 0, SPANS_FULL
    last: int | None = None
    while stop == SPANS_FULL:
        count, pos, stop = record_spans(buf, pos, size, size, mf.file_from_offset, _SPANS_A_CALL, size, starts, ends)
        if count:
            last = starts[count - 1]
    if stop == SPANS_BLANK:
        return mf.end_offset
    if last is not None:
        try:
            result = decode_message(mf.mm, last, check_crc=check_crc)
            whole = isinstance(result, StoredMessage) and not _torn(mf.mm, last, result)
        except CorruptRecordError:
            whole = False
        if not whole:
            pos = last
    return mf.file_from_offset + pos


def _abnormal_start_index(files: list[MappedFile], checkpoint: Checkpoint) -> int:
    safe = checkpoint.min_timestamp
    for index in range(len(files) - 1, -1, -1):
        prefix = peek_prefix(files[index].mm, 0)
        if prefix is None or prefix[1] not in (MAGIC_V1, MAGIC_V2):
            continue
        store_ts = store_timestamp_in(files[index].mm)
        if store_ts != 0 and store_ts <= safe:
            return index
    return 0


def _last_nonzero(mm: MappedFile, start: int) -> int:
    """Position one past the last non-zero byte of the file at or after `start` (start if none)."""
    return sparse.last_nonzero(mm.path, mm.mm, start, mm.file_size)


def _quarantine_path(target: Path, name: str, start: int) -> Path:
    """A fresh file name: an earlier crash may have quarantined bytes at the same position."""
    saved = target / f"{name}.{start}.bin"
    attempt = 1
    while saved.exists():
        saved = target / f"{name}.{start}.{attempt}.bin"
        attempt += 1
    return saved


def _quarantine(root: Path, commitlog: CommitLog, end: int, reason: str, report: RecoveryReport) -> None:
    """Copy every non-zero byte past `end` to `quarantine/` (forced to disk), then zero it in the file
    that stays, so that stale records past the end can never be taken for new ones later.

    Raises:
        OSError: the copy failed; nothing was zeroed then.
    """
    target = root / QUARANTINE_DIR
    for mf in commitlog.queue.files:
        if mf.end_offset <= end:
            continue
        start = max(0, end - mf.file_from_offset)
        stop = _last_nonzero(mf, start)
        if stop <= start:
            continue
        target.mkdir(exist_ok=True)
        saved = _quarantine_path(target, mf.path.name, start)
        fs.write_file(saved, mf.mm[start:stop])
        fs.fsync_dir(target)
        report.quarantined.append(QuarantinedRange(mf.path.name, start, stop - start, str(saved), reason))
        if mf.file_from_offset <= end:  # the file that holds the new end stays: clear its tail
            mf.write_at(start, bytes(stop - start))
            fs.msync(mf.mm, start, stop)


def recover(root: Path, commitlog: CommitLog, queues: list[ConsumeQueue], index: IndexService,
            checkpoint: Checkpoint, *, abnormal: bool, check_crc: bool, walk_from: int | None = None,
            recorded: Ends | None = None, recorded_whole: bool = True, thorough: bool = False) -> RecoveryReport:
    """Recover a writable store in place: set every structure to the end of the whole records.

    Dispatching what the queues and index miss is left to the caller (from `report.start_offset` in
    abnormal mode, from where each structure ends otherwise). `walk_from`: a log offset the walk
    starts at or before (a file that was resized). `recorded`: how far the queues and index files
    reached at the last flush (`log.derived_ends`); a queue that ends below it lost entries and is
    rebuilt (`queues` must hold a queue, empty if need be, for every recorded one), an index file that
    lost entries or is damaged is dropped with every newer one (their records are indexed again). Not
    `recorded_whole`: `recorded` is the record's older backup (or None); index files are then also
    checked for a lost file between them (`_first_after_gap`), as they are when `thorough`.
    `thorough` (`rocketstore recover`): every queue entry is checked against the log, not the first and
    last of each file, and every index slot and entry, not the header and the entries it names.

    Raises:
        OSError: the quarantine copy or a truncation failed; nothing past the end was removed then.
    """
    report = RecoveryReport(RecoveryMode.ABNORMAL if abnormal else RecoveryMode.NORMAL)
    damage: dict[int, str] = {}
    samples: dict[int, list[tuple[int, CqUnit]]] = {}
    for n, cq in enumerate(queues):
        reason, samples[n] = cq.find_damage(every_entry=thorough)
        if reason is not None:
            damage[n] = reason
        else:
            cq.recover()
    if abnormal:
        report.index_files_dropped = [p.name for p in index.drop_newer_than(checkpoint.index_msg_timestamp)]
    files = commitlog.queue.files
    if not files:
        for cq in queues:
            cq.queue.destroy()
        return report
    start_index = (_abnormal_start_index(files, checkpoint) if abnormal
                   else max(0, len(files) - NORMAL_RECOVERY_FILES))
    if walk_from is not None:
        start_index = min(start_index, next((n for n, mf in enumerate(files) if mf.end_offset > walk_from), 0))
    report.start_offset = files[start_index].file_from_offset
    walk = _Walk(commitlog, start_index, check_crc)
    walk.run()
    report.records_scanned = walk.scanned
    end = walk.end
    report.end_offset = end
    report.stop_reason = walk.reason
    _quarantine(root, commitlog, end, walk.reason, report)
    report.commitlog_files_removed = [p.name for p in commitlog.queue.truncate(end)]
    recorded_whole = recorded_whole and recorded is not None
    recorded = recorded or Ends()
    if end < recorded.log_flushed:
        report.lost.append(f"the log ends at {end}, but it was on disk up to {recorded.log_flushed} at the last "
                           f"flush: the records in between are gone (a commitlog file deleted or cut)"
                           + (" or quarantined" if report.quarantined else ""))
    for n, cq in enumerate(queues):
        reason = damage.get(n) or _disagreement(cq, commitlog, samples[n], end)
        if reason is None and cq.max_physic_offset > end:
            cq.truncate_to_phy(end)
            report.queues_truncated.append(f"{cq.topic}/{cq.queue_id}")
        if reason is None:
            reason = _short_of_record(cq, recorded.queues.get((cq.topic, cq.queue_id)), end,
                                      commitlog.min_offset == recorded.log_min)
        if reason is not None:
            _quarantine_queue(root, cq, reason, report)
    if thorough:
        _rebuild_queues_missing_their_front(root, commitlog, queues, end, report)
    _drop_index_from_first_bad(index, commitlog, recorded.index_files, end, thorough,
                               thorough or not recorded_whole or not recorded.index_files, report)
    _drop_index_past(index, end, report)
    return report


def _rebuild_queues_missing_their_front(root: Path, commitlog: CommitLog, queues: list[ConsumeQueue], end: int,
                                        report: RecoveryReport) -> None:
    """`recover`: quarantine (for a rebuild) every queue that starts above the first of its records in
    the log (its oldest files were lost; retention deletes a queue's files only once the log no longer
    holds their records). One compiled pass over the log's records."""
    first: dict[tuple[str, int], int] = {}
    for reqs in requests_from(commitlog, commitlog.min_offset, [], DISPATCH_BATCH, end):
        for req in reqs:
            if req.gets_queue_entry and 0 <= req.queue_offset < first.get((req.topic, req.queue_id), LONG_MAX):
                first[(req.topic, req.queue_id)] = req.queue_offset
    rebuilt = {(q.topic, q.queue_id) for q in report.queues_rebuilt}
    for cq in queues:
        key = (cq.topic, cq.queue_id)
        oldest = first.get(key)
        if key not in rebuilt and cq.queue.files and oldest is not None and oldest < cq.min_offset:
            _quarantine_queue(root, cq, f"{cq.topic}/{cq.queue_id} starts at queue offset {cq.min_offset}, but the "
                                        f"log holds its record of offset {oldest} (its oldest files are missing)",
                              report)


def _short_of_record(cq: ConsumeQueue, recorded: QueueEnd | None, end: int, log_kept_start: bool) -> str | None:
    """Why `cq` lost entries, None when it did not: it ends below the queue offset it had reached at
    the last flush while that flush's last entry still points inside the log (a record past the
    recovered end vouches for nothing: an ASYNC log cut by a power cut loses its tail), or its first
    file starts above the recorded one while the log kept its start (`log_kept_start`: retention,
    which deletes a queue's oldest files, has not run since)."""
    if recorded is None:
        return None
    max_offset, phy_end, first_file = recorded
    where = f"{cq.topic}/{cq.queue_id}"
    if phy_end <= end and cq.max_offset < max_offset:
        return f"{where} ends at queue offset {cq.max_offset}, but reached {max_offset} at the last flush"
    starts = cq.queue.min_offset // UNIT_SIZE
    if log_kept_start and cq.queue.files and starts > first_file:
        return f"{where} starts at queue offset {starts}, but at {first_file} at the last flush (a file is missing)"
    return None


def _disagreement(cq: ConsumeQueue, commitlog: CommitLog, samples: list[tuple[int, CqUnit]], end: int) -> str | None:
    """Why the sampled entries of `cq` disagree with the log, None when they agree: each entry inside
    the log must point at the start of a record of its size, topic, queue id and queue offset, and carry
    the record's tags code (a delayed record's, its delivery time, is the schedule service's to judge)."""
    low = commitlog.min_offset
    for queue_offset, unit in samples:
        if unit.filler or not low <= unit.phy_offset < end:
            continue  # a hole a rebuild left, expired by retention, or dispatched past a torn tail (cut below)
        where = f"{cq.topic}/{cq.queue_id} entry {queue_offset}"
        try:
            msg = commitlog.message_at(unit.phy_offset)
        except MessageNotFoundError as exc:
            return f"{where} points at {unit.phy_offset}: {exc}"
        if (msg.size, msg.topic, msg.queue_id, msg.queue_offset) != (unit.size, cq.topic, cq.queue_id,
                                                                     queue_offset):
            return (f"{where} points at a record of {msg.topic}/{msg.queue_id} queue offset {msg.queue_offset}, "
                    f"{msg.size} bytes (the entry says {unit.size})")
        code = tags_code(msg.properties.get(props.TAGS))
        if cq.topic != SCHEDULE_TOPIC and unit.tags_code != code:
            return f"{where} has tags code {unit.tags_code}, its record's tags give {code}"
    return None


def _quarantine_queue(root: Path, cq: ConsumeQueue, reason: str, report: RecoveryReport) -> None:
    """Copy every file of a damaged queue to `quarantine/consumequeue/<topic>/<queue id>/` (forced to
    disk), then delete them: the store rebuilds the queue from the commitlog.

    Raises:
        OSError: a copy failed; nothing was deleted then.
    """
    target = root / QUARANTINE_DIR / CONSUME_QUEUE_DIR / cq.topic / str(cq.queue_id)
    paths = sorted(p for p in cq.directory.iterdir() if p.is_file()) if cq.directory.is_dir() else []
    if paths:
        target.mkdir(parents=True, exist_ok=True)
        for path in paths:
            fs.write_file(_quarantine_path(target, path.name, 0), path.read_bytes())
        fs.fsync_dir(target)
    cq.queue.close()
    cq.queue.files = []
    for path in paths:
        path.unlink()
    if cq.directory.is_dir():
        fs.fsync_dir(cq.directory)
    cq.max_physic_offset = -1
    cq.min_logic_offset = 0
    report.queues_rebuilt.append(RebuiltQueue(cq.topic, cq.queue_id, reason, str(target) if paths else ""))


def _entries_disagree(f: IndexFile, commitlog: CommitLog, low: int, end: int) -> bool:
    """`recover`: whether an entry of the index file names a key hash that is not one of its record's
    keys (no checksum covers an entry: a flipped hash hides the key). One decode per record indexed."""
    hashes: dict[int, frozenset[int]] = {}
    for key_hash, phy, _, _ in f.entries():
        if not low <= phy < end:
            continue  # expired by retention, or past the end (dropped below)
        if phy not in hashes:
            try:
                req = request_from_message(commitlog.message_at(phy), [])
            except (MessageNotFoundError, CorruptRecordError):
                return True
            hashes[phy] = frozenset(index_key_hash(index_key(req.topic, k)) for k in req.index_keys)
        if key_hash not in hashes[phy]:
            return True
    return False


def _drop_index_from_first_bad(index: IndexService, commitlog: CommitLog, recorded: list[IndexEnd], end: int,
                               full: bool, gaps: bool, report: RecoveryReport) -> None:
    """Drop the first index file that is damaged (`IndexFile.find_damage`, with every slot and entry,
    and every entry's key hash against its record, when `full`), that lost entries since the last flush
    (gone, or holding fewer than recorded, while the records it indexed are still in the log) or, when
    `gaps`, that follows keys no file holds (`_first_after_gap`: a lost file the record cannot name), and
    every newer one: the catch-up indexes their records again."""
    low = commitlog.min_offset
    lost = {name: count for name, _, last_phy, count in recorded if low <= last_phy < end}
    present = {f.path.name for f in index.files}
    first_bad = min((name for name in lost if name not in present), default=None)
    for f in index.files:
        if first_bad is not None and f.path.name >= first_bad:
            break
        if (f.header.index_count < lost.get(f.path.name, 0) or f.find_damage(full) is not None
                or (full and _entries_disagree(f, commitlog, low, end))):
            first_bad = f.path.name
            break
    if gaps:
        after_gap = _first_after_gap(index.files, commitlog, end)
        if after_gap is not None and (first_bad is None or after_gap < first_bad):
            first_bad = after_gap
    if first_bad is None:
        return
    doomed = [f for f in index.files if f.path.name >= first_bad]
    index.files = [f for f in index.files if f.path.name < first_bad]
    for f in doomed:
        f.destroy()
    report.index_files_dropped += [f.path.name for f in doomed]


def _first_after_gap(files: list[IndexFile], commitlog: CommitLog, end: int) -> str | None:
    """The name of the first index file that follows a record with keys no file holds, None when the
    files cover the log: every record in [log start, end) with index keys lies at or after the first
    file's first entry (or before the log's start), and between two files' entries only at the record
    where one ends and the next begins (a record's keys may straddle two files). A file deleted,
    emptied or zero-filled between others, or the oldest one, leaves such a record; nothing in the
    files' own bytes says so. Reads only the records between one file's last entry and the next one's
    first (usually none, or the one a file ends at)."""
    covered, inclusive = commitlog.min_offset, True
    for f in files:
        h = f.header
        if h.index_count <= FIRST_ENTRY:
            continue  # holds nothing (an empty newest file)
        begin = min(h.begin_phy_offset, end)
        if begin > covered and _keyed_record_in(commitlog, covered, begin, inclusive):
            return f.path.name
        if h.end_phy_offset >= covered:
            covered, inclusive = h.end_phy_offset, False
    return None


def _keyed_record_in(commitlog: CommitLog, start: int, stop: int, inclusive: bool) -> bool:
    """Whether a record in [start, stop) (or (start, stop) when not `inclusive`) has index keys;
    `start` is a record's start."""
    for reqs in requests_from(commitlog, start, [], DISPATCH_BATCH, stop):
        if any(r.gets_index_entry and r.index_keys and (inclusive or r.phy_offset > start) for r in reqs):
            return True
    return False


def _points_at_or_past(header: IndexHeader, end: int) -> bool:
    """True when the file's newest entry (or, for an empty successor file, its inherited start) is at
    or past `end`; an empty first file points nowhere."""
    return header.end_phy_offset >= end and (header.end_phy_offset > 0 or header.index_count > FIRST_ENTRY)


def _drop_index_past(index: IndexService, end: int, report: RecoveryReport) -> None:
    """Index files whose entries point past the recovered end are rebuilt from the commitlog."""
    while index.files and _points_at_or_past(index.files[-1].header, end):
        dropped = index.files.pop()
        report.index_files_dropped.append(dropped.path.name)
        dropped.destroy()
