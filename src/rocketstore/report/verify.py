"""Verify a store directory: every commitlog record, every consume-queue entry, every index entry.

Read-only and independent of `MessageStore` (it must judge files the store would refuse or repair):
files are mapped with `mmap.ACCESS_READ` and decoded with `rocketstore.format`. Checks:

* commitlog: file names and sizes; each record decodes, its body CRC matches, its PHYSICALOFFSET is
  where it lies, its queue offset follows the previous one of its queue; every file but the last ends
  with a blank record of the right size; nothing but zeros after the end of the written data.
* consume queues: each entry points at a record start, with that record's size, topic, queue id,
  queue offset and tags code; no entries after the first empty one; every record that belongs in a
  consume queue is in it.
* index files: size, header count; slots and chain links point inside the file and at entries of the
  same slot; each entry points at a record start carrying a key with that hash; every key of every
  indexed record is in the index.

Each problem names its file (relative to the store root) and the byte position inside it.

The records at the end of the log that are in no consume queue and under no index key are not
problems but `undispatched`: what a store that stopped with puts ahead of its dispatch leaves (a crash
of an ASYNC store, as RocketMQ's reput lag leaves it), which the next writable open dispatches.

A snapshot, safe beside a live writer: before anything else the log's end is read once, as a read-only
open reads it (one past the last whole record: a record still being copied ends the data before it),
and the store is checked as of that end. Every record below it is checked, and every consume-queue and
index entry pointing below it. At the end of the walk the log is looked at again: when a whole record
now starts at the snapshot's end, a writer appended while verify ran, and what it wrote is newer than
the snapshot, counted (`newer_*`) and not checked: the records from the end on, the queue and index
entries pointing at or past it (but not one followed in its queue or index file by an entry pointing
below the end: a queue's entries, and an index file's, point ever further, so no writer added it).
When none does, nothing was appended, and the log past the end and the entries pointing there are
checked as any others (a torn last record, an entry past the log's end).
A finding a writer may have been making while verify read it (an entry being written, a queue entry
or index key the dispatch wrote after verify read that queue or the index, a file being created) is
read again after a pause, and is a problem only when the second read makes it too; an entry that was
missing and is there on the second read counts as newer.

The delivery tags codes of delayed records (SCHEDULE_TOPIC_XXXX) are computed with the delay levels the
store recorded in `config/rocketstore.json` (see `recorded_delay_levels`), else the config's.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from rocketstore.errors import CorruptRecordError
from rocketstore.format import consume_queue as cq_format
from rocketstore.format import index as index_format
from rocketstore.format.filenames import name_to_offset, offset_to_name
from rocketstore.format.javahash import index_key_hash
from rocketstore.format.layout import JAVA_LONG_MAX
from rocketstore.format.message import (
    BLANK_MAGIC,
    END_OF_FILE,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    NEED_DATA,
    PHY_OFFSET_POS,
    StoredMessage,
    decode_message,
    peek_prefix,
)
from rocketstore.format.store_dirs import (
    COMMITLOG_DIR,
    CONFIG_DIR,
    CONSUME_QUEUE_DIR,
    INDEX_DIR,
    STORE_CONFIG_FILE,
    queue_dirs,
)
from rocketstore.format.sysflag import gets_index_entry, gets_queue_entry
from rocketstore.report._files import first_nonzero as _first_nonzero
from rocketstore.report._files import mapped as _mapped
from rocketstore.store.files import IndexFile, request_from_message

if TYPE_CHECKING:
    from rocketstore import StoreConfig

RECHECK_PAUSES_S = (0.05, 0.2, 0.5)
"""The pauses before reading a suspect finding again (a writer finishes an entry, a dispatch its batch)."""


def recorded_delay_levels(root: Path) -> str | None:
    """The delay levels the store at `root` recorded in `config/rocketstore.json` (every writable open
    records those it was opened with), None when it recorded none (a store RocketMQ wrote, or one
    written with the default levels before they were recorded) or the file is unreadable."""
    path = Path(root) / CONFIG_DIR / STORE_CONFIG_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    levels = data.get("delay_levels") if isinstance(data, dict) else None
    return levels if isinstance(levels, str) else None


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding: the file (relative to the store root), the byte position in it, and what is wrong."""

    file: str
    pos: int
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class VerifyResult:
    """What `verify_store` walked and what it found."""

    problems: list[Problem] = field(default_factory=list)
    commitlog_files: int = 0
    records: int = 0
    blank_records: int = 0
    min_phy_offset: int = 0
    max_phy_offset: int = 0
    consume_queues: int = 0
    cq_entries: int = 0
    index_files: int = 0
    index_entries: int = 0
    undispatched: int = 0
    """Records at the end of the log in no consume queue and under no index key (see the module's doc)."""
    undispatched_from: int | None = None
    """Where they start (None: every record is dispatched)."""
    snapshot_end: int = 0
    """The log's end verify read first: the store is checked as of it (see the module's doc)."""
    log_grew: bool = False
    """A writer appended past `snapshot_end` while verify ran: what follows is newer, not checked."""
    newer_queue_entries: int = 0
    """Consume-queue entries written while verify ran: pointing at or past the snapshot's end once the log
    grew (not checked), or missing when verify read their queue and there, pointing at their record, when
    it looked again."""
    newer_index_entries: int = 0
    """Index entries written while verify ran: pointing at or past the snapshot's end once the log grew, or
    added after verify read their file's header (neither checked), or keys missing when verify read the
    index and there when it looked again."""

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def newer(self) -> int:
        """How many entries verify counted as newer than the snapshot."""
        return self.newer_queue_entries + self.newer_index_entries

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k != "problems"}
        return {"ok": self.ok, **data, "problems": [p.to_dict() for p in self.problems]}


class _Record(NamedTuple):
    """What the queue and index checks need of one commitlog record."""

    size: int
    topic: str
    queue_id: int
    queue_offset: int
    tags_code: int
    sys_flag: int
    key_hashes: frozenset[int]
    file: str
    pos: int


_PROBED_GAP_FILES = 64
"""A gap of at most this many files in a listing is looked up by name (see `_listed`)."""


def _listed(directory: Path, file_size: int) -> list[Path]:
    """The files of `directory`, sorted. A listing running while a writer creates files may miss one it
    created and show the next: the names a small gap between offset-named files leaves out are looked up
    one by one (a file that is there is found by its name)."""
    paths = sorted(p for p in directory.iterdir() if p.is_file())
    starts = sorted(start for start in (name_to_offset(p.name) for p in paths) if start is not None)
    found = [directory / offset_to_name(missing) for a, b in zip(starts, starts[1:], strict=False)
             if b - a <= _PROBED_GAP_FILES * file_size for missing in range(a + file_size, b, file_size)]
    return sorted(paths + [p for p in found if p.is_file()])


def _offset_files(directory: Path, file_size: int, rel: str, problems: list[Problem]) -> list[tuple[int, Path]]:
    """(start offset, path) of the offset-named files of `directory`, checking names, sizes, gaps."""
    files: list[tuple[int, Path]] = []
    for path in _listed(directory, file_size):
        start = name_to_offset(path.name)
        where = f"{rel}/{path.name}"
        if start is None:
            problems.append(Problem(where, 0, "not a 20-digit offset file name"))
            continue
        if start % file_size:
            problems.append(Problem(where, 0, f"start offset {start} is not a multiple of the file size {file_size}"))
        size = path.stat().st_size
        if size != file_size:
            problems.append(Problem(where, 0, f"file is {size} bytes, the geometry says {file_size}"))
        if files and start != files[-1][0] + file_size:
            problems.append(Problem(where, 0, f"gap: the previous file ends at {files[-1][0] + file_size}"))
        files.append((start, path))
    return files


def _first_nonzero_below(buf: Any, start: int, stop: int | None) -> int | None:
    """`first_nonzero` of `buf[:stop]` (all of it when stop is None)."""
    if stop is None or stop >= len(buf):
        return _first_nonzero(buf, start)
    view = memoryview(buf)[:stop]
    try:
        return _first_nonzero(view, start)
    finally:
        view.release()


def _torn(buf: Any, pos: int, msg: StoredMessage) -> bool:
    """A record that decodes but ends in a zero byte where data must be: a copy not finished yet (the
    rule of the read-only open's end)."""
    last = pos + msg.size - 1 - (0 if msg.properties_string else 2)
    return bool(buf[last] == 0)


def _whole_record_at(buf: Any, pos: int, phy_offset: int) -> bool:
    """A whole record lies at `pos`: its prefix, PHYSICALOFFSET, body CRC and last byte check out."""
    try:
        msg = decode_message(buf, pos, check_crc=True)
    except CorruptRecordError:
        return False
    return isinstance(msg, StoredMessage) and msg.phy_offset == phy_offset and not _torn(buf, pos, msg)


def _log_end(files: list[tuple[int, Path]]) -> int:
    """One past the last whole record, as a read-only open finds it: the last file holding data is walked
    by the records' length prefixes, and its last record decoded in full; the files before it are whole."""
    index = len(files) - 1
    while index >= 0:
        start, path = files[index]
        with _mapped(path) as buf:
            if index > 0 and peek_prefix(buf, 0) in (None, (0, 0)):
                index -= 1
                continue
            pos, last = 0, None
            while True:
                prefix = peek_prefix(buf, pos)
                if prefix is None:
                    break
                total, magic = prefix
                if magic == BLANK_MAGIC:
                    return start + len(buf)
                if magic not in (MAGIC_V1, MAGIC_V2) or total < MIN_RECORD_SIZE or pos + total > len(buf):
                    break
                if int.from_bytes(buf[pos + PHY_OFFSET_POS:pos + PHY_OFFSET_POS + 8], "big", signed=True) \
                        != start + pos:
                    break
                last, pos = pos, pos + total
            if last is not None and not _whole_record_at(buf, last, start + last):
                pos = last
            return start + pos
    return 0


_Read = TypeVar("_Read")


def _settled(reads: Sequence[Callable[[], tuple[list[Problem], _Read]]]) -> Iterator[tuple[list[Problem], _Read]]:
    """Each read once; those that found problems again after one pause, keeping the problems both reads
    made (a writer in the middle of an entry or a file makes a finding the second read does not) and
    the second read's data. In the order of `reads`."""
    first = [read() for read in reads]
    if any(problems for problems, _ in first):
        time.sleep(RECHECK_PAUSES_S[0])
    for read, (problems, data) in zip(reads, first, strict=True):
        if not problems:
            yield problems, data
            continue
        again, data = read()
        made = set(problems)
        yield [p for p in again if p in made], data


class _QueueRead(NamedTuple):
    """One read of one consume queue."""

    problems: list[Problem]
    entries: int
    dispatched: list[int]
    """Physical offsets of the entries checked below the snapshot's end."""
    beyond: list[tuple[cq_format.CqUnit, int, str, int]]
    """Entries pointing at or past the snapshot's end: (unit, queue offset, file, position)."""
    end: int
    """The queue offset where the queue ended when read: its first empty entry, else past its last file."""


class _IndexRead(NamedTuple):
    """One read of one index file."""

    problems: list[Problem]
    entries: int
    indexed: list[tuple[int, int]]
    beyond: list[tuple[int, int, int, str, int]]
    """Entries pointing at or past the snapshot's end: (key hash, phy offset, entry number, file, pos)."""
    newer_entries: int
    """Entries added after the header was read (slots pointing at them)."""
    begin: int | None


class _Verifier:
    def __init__(self, root: Path, config: StoreConfig) -> None:
        self.root = root
        self.config = config
        self.result = VerifyResult()
        self.records: dict[int, _Record] = {}
        self.dispatched: set[int] = set()
        self.indexed: set[tuple[int, int]] = set()
        self._first_indexed: int | None = None
        self._log_files: list[tuple[int, Path]] = []
        self._next_queue_offset: dict[tuple[str, int], int] = {}
        self._last_of_queue: dict[tuple[str, int], int] = {}  # the phy offset of each queue's latest record
        self._ended_at: str | None = None
        self._resume: tuple[int, int] | None = None  # (file number, position) where the walk stopped at the end
        self._after_end: list[Problem] = []  # listing problems of commitlog files at or past the end
        self._queues_beyond: list[tuple[cq_format.CqUnit, int, str, int, str, int]] = []
        self._index_beyond: list[tuple[int, int, int, str, int]] = []
        self._queue_ends: dict[tuple[str, int], int] = {}  # where each queue ended when read
        self._log_problems = self._queue_problems = 0  # where the problems of the queues, then the index, start
        levels = recorded_delay_levels(root)
        try:
            self._delays = (config if levels is None else replace(config, delay_levels=levels)).delay_level_millis()
        except (ValueError, KeyError, IndexError):
            self.problem(f"{CONFIG_DIR}/{STORE_CONFIG_FILE}", 0,
                         f"recorded delay_levels {levels!r} are not like '1s 5s 10s': the config's are used")
            self._delays = config.delay_level_millis()

    def problem(self, file: str, pos: int, message: str) -> None:
        self.result.problems.append(Problem(file, pos, message))

    def _nowhere(self, phy_offset: int) -> str:
        """Why no record is at `phy_offset`."""
        if phy_offset >= self.result.max_phy_offset:
            return "past the end of the commitlog"
        return "where no record starts"

    @property
    def _end(self) -> int:
        """Entries pointing at or past this are judged after `settle` (the snapshot's end until then)."""
        return self.result.snapshot_end if self._resume is not None else JAVA_LONG_MAX + 1

    # -- commitlog -------------------------------------------------------------------------------

    def commitlog(self) -> None:
        """Read the log's end (the snapshot), then walk every record below it."""
        directory = self.root / COMMITLOG_DIR
        if not directory.is_dir():
            self.problem(COMMITLOG_DIR, 0, "no commitlog directory")
            return
        listing: list[Problem] = []
        files = _offset_files(directory, self.config.commitlog_file_size, COMMITLOG_DIR, listing)
        end = self.result.snapshot_end = _log_end(files)
        for p in listing:  # a file at or past the end may be one a writer is creating: judged by `settle`
            start = name_to_offset(p.file.rsplit("/", 1)[-1])
            (self._after_end if start is not None and start >= end else self.result.problems).append(p)
        self._log_files = files
        self.result.commitlog_files = len(files)
        if files:
            self.result.min_phy_offset = self.result.max_phy_offset = files[0][0]
        self._resume = self._walk(0, 0, end)

    def _walk(self, first: int, at: int, limit: int | None) -> tuple[int, int] | None:
        """Walk the log from file number `first`, position `at`, as far as `limit` (a physical offset;
        None: to the end of the data). Returns where it stopped at the limit (the file number past the
        last when the files end before it), None when no limit was given."""
        files = self._log_files
        for number in range(first, len(files)):
            start, path = files[number]
            if limit is not None and start >= limit:
                return number, 0
            rel = f"{COMMITLOG_DIR}/{path.name}"
            pos = at if number == first else 0
            with _mapped(path) as buf:
                stop = None if limit is None or limit >= start + len(buf) else limit - start
                if self._ended_at is not None:
                    stray = _first_nonzero_below(buf, pos, stop)
                    if stray is not None:
                        self.problem(rel, 0 if pos == 0 else stray,
                                     f"holds data although the log ended in {self._ended_at}")
                    if stop is not None:
                        return number, stop
                    continue
                end = self._walk_file(buf, start, rel, pos, stop)
                if end is None:  # a blank record closed the file
                    self.result.max_phy_offset = start + len(buf)
                    continue
                self.result.max_phy_offset = start + end
                if stop is not None and end >= stop:
                    return number, end
                self._ended_at = rel
        return None if limit is None else (len(files), 0)

    def _walk_file(self, buf: Any, start: int, rel: str, pos: int, stop: int | None) -> int | None:
        """Walk one file's records from `pos` (up to `stop`); the position where the walk ends (the end of
        the written data, a record it cannot walk past, or `stop`), None when a blank closes the file."""
        while True:
            if stop is not None and pos >= stop:
                return pos
            prefix = peek_prefix(buf, pos)
            if prefix is None:
                self.problem(rel, pos, "file ends without a blank end-of-file record")
                return pos
            if prefix == (0, 0):
                stray = _first_nonzero(buf, pos)
                if stray is not None:
                    self.problem(rel, stray, f"non-zero bytes after the end of the written data at {pos}")
                return pos
            message = self._decode(buf, pos, rel)
            if message is END_OF_FILE:
                self.result.blank_records += 1
                if prefix[0] != len(buf) - pos:
                    self.problem(rel, pos, f"blank record says {prefix[0]} bytes, {len(buf) - pos} are left")
                return None
            if not isinstance(message, StoredMessage):
                return pos
            self._check_record(message, start + pos, rel, pos, self._next_queue_offset)
            pos += message.size

    def _decode(self, buf: Any, pos: int, rel: str) -> Any:
        """The record at pos (CRC checked); None (after reporting) when the walk cannot go on."""
        try:
            result = decode_message(buf, pos, check_crc=True)
        except CorruptRecordError as exc:
            self.problem(rel, pos, exc.reason)
            try:  # a body CRC mismatch leaves the lengths intact: report it and walk on
                result = decode_message(buf, pos)
            except CorruptRecordError:
                return None
            return result if isinstance(result, StoredMessage) else None
        if result is NEED_DATA:
            total = peek_prefix(buf, pos)[0]  # type: ignore[index]
            self.problem(rel, pos, f"record of {total} bytes runs past the end of the file")
            return None
        return result

    def _check_record(self, message: StoredMessage, phy_offset: int, rel: str, pos: int,
                      next_queue_offset: dict[tuple[str, int], int]) -> None:
        self.result.records += 1
        if message.phy_offset != phy_offset:
            self.problem(rel, pos, f"PHYSICALOFFSET says {message.phy_offset}, the record lies at {phy_offset}")
        queue = (message.topic, message.queue_id)
        if gets_queue_entry(message.sys_flag):
            expected = next_queue_offset.get(queue)
            if expected is not None and message.queue_offset != expected:
                self.problem(rel, pos, f"{queue[0]}/{queue[1]} queue offset {message.queue_offset} "
                                       f"follows {expected - 1} (the record at {self._last_of_queue[queue]})")
            next_queue_offset[queue] = message.queue_offset + 1
            self._last_of_queue[queue] = phy_offset
        dispatch = request_from_message(message, self._delays)  # what the store derives from the record
        keys = dispatch.index_keys
        self.records[phy_offset] = _Record(
            message.size, message.topic, message.queue_id, message.queue_offset, dispatch.tags_code,
            message.sys_flag, frozenset(index_key_hash(index_format.index_key(message.topic, k)) for k in keys),
            rel, pos,
        )

    def index_chains(self) -> None:
        """Every index file's slots and chain links as the store checks them (`IndexFile.find_damage`):
        a slot emptied or a link broken hides keys that every entry of the file still names. The newest
        file is left alone while a writer appends to the log (its header is written after its entries);
        a finding in it is read again after each pause, since a writer's dispatch may be adding keys to
        it (records below the snapshot's end, left behind by an ASYNC put) while the log does not grow."""
        directory = self.root / INDEX_DIR
        paths = sorted(p for p in directory.iterdir() if p.is_file() and p.name.isdigit()) if directory.is_dir() else []
        for path in paths[:-1] if self.result.log_grew else paths:
            if path.stat().st_size != self._index_file_size():
                continue  # reported with the file's size
            reason = self._index_damage(path)
            for pause in RECHECK_PAUSES_S if path == paths[-1] else ():
                if reason is None:
                    break
                time.sleep(pause)
                reason = self._index_damage(path)
            if reason is not None:
                self.result.problems.append(Problem(f"{INDEX_DIR}/{path.name}", 0, reason))

    def _index_damage(self, path: Path) -> str | None:
        """`IndexFile.find_damage` of the index file at `path`, read once."""
        index_file = IndexFile(path, self.config.index_hash_slots, self.config.index_max_entries, read_only=True)
        try:
            return index_file.find_damage(full=True)
        finally:
            index_file.close()

    def settle(self) -> None:
        """After the queues and the index: look at the log's end again. A writer appended (a whole record
        or a blank lies at the snapshot's end now): what lies past it is newer. Nothing was appended:
        walk on from the end as far as the data goes, then judge the entries pointing there."""
        if self._resume is None:
            return
        end = self.result.snapshot_end
        appended = self._appended_at(end)
        pauses = iter(RECHECK_PAUSES_S if self._anything_past(end) else ())
        while not appended and (pause := next(pauses, None)) is not None:  # a writer between two steps?
            time.sleep(pause)
            appended = self._appended_at(end)
        if appended:
            self.result.log_grew = True
            self.result.newer_queue_entries += len(self._queues_beyond)
            self.result.newer_index_entries += len(self._index_beyond)
            return
        problems = self.result.problems
        sections = (problems[:self._log_problems], problems[self._log_problems:self._queue_problems],
                    problems[self._queue_problems:])
        self.result.problems = list(self._after_end)
        number, at = self._resume
        self._resume = None
        self._walk(number, at, None)
        log_problems = sections[0] + self.result.problems  # each section's problems in the order of its pass
        queue_problems = sections[1]
        for unit, queue_offset, rel, pos, topic, queue_id in self._queues_beyond:
            self.result.cq_entries += 1
            queue_problems.extend(self._unit_problems(unit, queue_offset, topic, queue_id, rel, pos))
            if unit.phy_offset in self.records:
                self.dispatched.add(unit.phy_offset)
        index_problems = sections[2]
        for key_hash, phy_offset, n, rel, pos in self._index_beyond:
            self.result.index_entries += 1
            index_problems.extend(self._index_target_problems(key_hash, phy_offset, n, rel, pos))
            if phy_offset in self.records and key_hash in self.records[phy_offset].key_hashes:
                self.indexed.add((key_hash, phy_offset))
        self.result.problems = log_problems + queue_problems + index_problems

    def _anything_past(self, end: int) -> bool:
        """Something lies at or past the snapshot's end, or points there: a record or bytes at it, a
        commitlog file past it the listing found wrong, a queue or index entry."""
        if self._after_end or self._queues_beyond or self._index_beyond:
            return True
        file_size = self.config.commitlog_file_size
        path = self.root / COMMITLOG_DIR / offset_to_name(end - end % file_size)
        try:
            with _mapped(path) as buf:
                return peek_prefix(buf, end % file_size) not in (None, (0, 0))
        except FileNotFoundError:
            return False

    def _appended_at(self, end: int) -> bool:
        """A whole record, or a blank record, lies at physical offset `end` now (in the file the geometry
        puts it in, looked up by its name)."""
        file_size = self.config.commitlog_file_size
        path = self.root / COMMITLOG_DIR / offset_to_name(end - end % file_size)
        try:
            with _mapped(path) as buf:
                pos = end % file_size
                if pos >= len(buf):
                    return False
                prefix = peek_prefix(buf, pos)
                if prefix is not None and prefix[1] == BLANK_MAGIC:
                    return True
                return _whole_record_at(buf, pos, end)
        except FileNotFoundError:
            return False

    # -- consume queues --------------------------------------------------------------------------

    def consume_queues(self) -> None:
        self._log_problems = len(self.result.problems)
        queues = list(queue_dirs(self.root))
        self.result.consume_queues = len(queues)
        reads = [partial(self._read_queue, topic, queue_id, queue_dir) for topic, queue_id, queue_dir in queues]
        for (topic, queue_id, _), (problems, read) in zip(queues, _settled(reads), strict=True):
            self.result.problems.extend(problems)
            self.result.cq_entries += read.entries
            self.dispatched.update(read.dispatched)
            self._queues_beyond.extend((*b, topic, queue_id) for b in read.beyond)
            self._queue_ends[(topic, queue_id)] = read.end
        self._queue_problems = len(self.result.problems)

    def _read_queue(self, topic: str, queue_id: int, directory: Path) -> tuple[list[Problem], _QueueRead]:
        rel_dir = f"{CONSUME_QUEUE_DIR}/{topic}/{queue_id}"
        file_size = self.config.consume_queue_file_size
        problems: list[Problem] = []
        read = _QueueRead(problems, 0, [], [], 0)
        entries = 0
        ended: int | None = None
        for start, path in _offset_files(directory, file_size, rel_dir, problems):
            rel = f"{rel_dir}/{path.name}"
            with _mapped(path) as buf:
                for i, unit in enumerate(cq_format.iter_units(buf)):
                    pos = i * cq_format.UNIT_SIZE
                    if unit == (0, 0, 0):
                        if ended is None:
                            ended = (start + pos) // cq_format.UNIT_SIZE
                        continue
                    if ended is not None:
                        problems.append(Problem(rel, pos, "entry after the end of the queue (an earlier entry is "
                                                          "empty)"))
                        return problems, read._replace(entries=entries, end=ended)
                    if unit.filler:
                        continue
                    queue_offset = (start + pos) // cq_format.UNIT_SIZE
                    if unit.phy_offset >= self._end:
                        read.beyond.append((unit, queue_offset, rel, pos))
                        continue
                    for early in read.beyond:  # a queue's entries point ever further: not one a writer added
                        entries += 1
                        problems.extend(self._unit_problems(*early[:2], topic, queue_id, *early[2:]))
                    read.beyond.clear()
                    entries += 1
                    problems.extend(self._unit_problems(unit, queue_offset, topic, queue_id, rel, pos))
                    if unit.phy_offset in self.records:
                        read.dispatched.append(unit.phy_offset)
                if ended is None:
                    read = read._replace(end=(start + len(buf)) // cq_format.UNIT_SIZE)
        return problems, read._replace(entries=entries, end=read.end if ended is None else ended)

    def _unit_problems(self, unit: cq_format.CqUnit, queue_offset: int, topic: str, queue_id: int,
                       rel: str, pos: int) -> Iterable[Problem]:
        record = self.records.get(unit.phy_offset)
        if record is None:
            if unit.phy_offset >= self.result.min_phy_offset:
                yield Problem(rel, pos, f"queue offset {queue_offset} points at {unit.phy_offset}, "
                                        f"{self._nowhere(unit.phy_offset)}")
            return
        expected = {"size": record.size, "topic": record.topic, "queue id": record.queue_id,
                    "queue offset": record.queue_offset, "tags code": record.tags_code}
        actual = {"size": unit.size, "topic": topic, "queue id": queue_id, "queue offset": queue_offset,
                  "tags code": unit.tags_code}
        for name, value in actual.items():
            if value != expected[name]:
                yield Problem(rel, pos, f"queue offset {queue_offset} -> record at {unit.phy_offset}: "
                                        f"{name} {value!r}, the record says {expected[name]!r}")

    def dispatch(self) -> None:
        """After the queues, the index and `settle`: the undispatched tail, then every record before it
        that misses its queue entry or an index key."""
        tail = self._undispatched_tail()
        self._check_all_dispatched(tail)
        self._check_all_indexed(self._first_indexed, tail)

    def _undispatched_tail(self) -> int:
        """Where the records at the end of the log that are in no queue and under no index key start
        (the log's end when the newest record is dispatched); counted in the result."""
        tail = self.result.max_phy_offset
        count = 0
        for phy_offset, record in reversed(self.records.items()):
            if phy_offset in self.dispatched or any((h, phy_offset) in self.indexed for h in record.key_hashes):
                break
            if gets_queue_entry(record.sys_flag) or (gets_index_entry(record.sys_flag) and record.key_hashes):
                tail, count = phy_offset, count + 1
        if count:
            self.result.undispatched, self.result.undispatched_from = count, tail
        return tail

    def _check_all_dispatched(self, tail: int) -> None:
        missing = [phy_offset for phy_offset, record in self.records.items()
                   if phy_offset < tail and gets_queue_entry(record.sys_flag) and phy_offset not in self.dispatched]
        for pause in RECHECK_PAUSES_S:  # a dispatch may have written them after verify read their queue
            if not missing:
                break
            time.sleep(pause)
            found = self._queue_entries_now(missing)
            self.result.newer_queue_entries += len(found)
            missing = [phy_offset for phy_offset in missing if phy_offset not in found]
        for phy_offset in missing:
            record = self.records[phy_offset]
            self.problem(record.file, record.pos, f"record at {phy_offset} ({record.topic}/{record.queue_id} "
                                                  f"offset {record.queue_offset}) is in no consume queue")

    def _queue_entries_now(self, phy_offsets: list[int]) -> set[int]:
        """Of these records, those whose entry their queue holds now, appended to the queue after verify
        read it: from where the queue ended then to the record's entry, every entry is written."""
        found: set[int] = set()
        by_queue: dict[tuple[str, int], dict[int, int]] = {}
        for phy_offset in phy_offsets:
            record = self.records[phy_offset]
            by_queue.setdefault((record.topic, record.queue_id), {})[record.queue_offset] = phy_offset
        for (topic, queue_id), wanted in by_queue.items():
            start = self._queue_ends.get((topic, queue_id), 0)
            units = self._queue_units_now(topic, queue_id, start, max(wanted) + 1)
            for queue_offset, unit in enumerate(units, start):
                if unit == (0, 0, 0):
                    break
                phy_offset = wanted.get(queue_offset, -1)
                if phy_offset >= 0 and not any(self._unit_problems(unit, queue_offset, topic, queue_id, "", 0)):
                    found.add(phy_offset)
        return found

    def _queue_units_now(self, topic: str, queue_id: int, first: int, stop: int) -> list[cq_format.CqUnit]:
        """The entries of a queue from queue offset `first` to `stop`, read now (fewer where its files end)."""
        file_size = self.config.consume_queue_file_size
        per_file = file_size // cq_format.UNIT_SIZE
        directory = self.root / CONSUME_QUEUE_DIR / topic / str(queue_id)
        units: list[cq_format.CqUnit] = []
        offset = first
        while offset < stop:
            path = directory / f"{offset // per_file * file_size:020d}"
            count = min(stop, (offset // per_file + 1) * per_file) - offset
            try:
                with open(path, "rb") as fh:
                    data = os.pread(fh.fileno(), count * cq_format.UNIT_SIZE, offset % per_file * cq_format.UNIT_SIZE)
            except OSError:
                break
            units.extend(cq_format.iter_units(data))
            if len(data) < count * cq_format.UNIT_SIZE:
                break
            offset += count
        return units

    # -- index -----------------------------------------------------------------------------------

    def index(self) -> None:
        directory = self.root / INDEX_DIR
        if not directory.is_dir():
            return
        first_indexed: int | None = None
        paths = sorted(p for p in directory.iterdir() if p.is_file())
        self.result.index_files = len(paths)
        for problems, read in _settled([partial(self._read_index_file, path) for path in paths]):
            self.result.problems.extend(problems)
            self.result.index_entries += read.entries
            self.indexed.update(read.indexed)
            self._index_beyond.extend(read.beyond)
            self.result.newer_index_entries += read.newer_entries
            if read.begin is not None and first_indexed is None:
                first_indexed = read.begin
        self._first_indexed = first_indexed

    def _read_index_file(self, path: Path) -> tuple[list[Problem], _IndexRead]:
        read = _IndexRead([], 0, [], [], 0, None)
        with _mapped(path) as buf:
            return read.problems, self._check_index_file(buf, f"{INDEX_DIR}/{path.name}", read)

    def _index_file_size(self) -> int:
        return index_format.index_file_size(self.config.index_hash_slots, self.config.index_max_entries)

    def _check_index_file(self, buf: Any, rel: str, read: _IndexRead) -> _IndexRead:
        """Check one index file into `read`; with the begin physical offset of its header (None if unreadable)."""
        problems = read.problems
        slots, max_entries = self.config.index_hash_slots, self.config.index_max_entries
        expected_size = self._index_file_size()
        if len(buf) != expected_size:
            problems.append(Problem(rel, 0, f"file is {len(buf)} bytes, the geometry says {expected_size}"))
            return read
        header = index_format.IndexHeader.unpack(buf)
        count = header.index_count
        if count > max_entries:
            problems.append(Problem(rel, 0, f"indexCount {count} exceeds the {max_entries} entries of the file"))
            count = max_entries
        slot_of = self._check_entries(buf, rel, count, read)
        table = memoryview(buf)[index_format.HEADER_SIZE:index_format.HEADER_SIZE + slots * index_format.SLOT_SIZE]
        heads = list(index_format.SLOT.iter_unpack(table))
        table.release()
        count_now = min(index_format.IndexHeader.unpack(buf).index_count, max_entries)  # entries added meanwhile
        def outside(slot: int, head: int) -> Problem:
            return Problem(rel, index_format.HEADER_SIZE + slot * index_format.SLOT_SIZE,
                           f"slot {slot} points at entry {head}, outside [1, {count})")

        found: list[Problem] = []
        late: list[tuple[int, int]] = []  # (slot, head) of slots pointing past the header's count now
        for slot, (head,) in enumerate(heads):
            if head == 0:
                continue
            pos = index_format.HEADER_SIZE + slot * index_format.SLOT_SIZE
            if count <= head < count_now:
                continue  # an entry added after the header was read: newer
            if count <= head < max_entries:
                late.append((slot, head))
            elif not 0 < head < count:
                found.append(outside(slot, head))
            elif slot_of[head] != slot:
                found.append(Problem(rel, pos, f"slot {slot} points at entry {head} of slot {slot_of[head]}"))
        # a dispatch writes a batch's entries and slots, then the header's count: a slot may point at an
        # entry the header counts only after that batch, so such a slot is read against the count again
        for pause in RECHECK_PAUSES_S:
            if not late:
                break
            time.sleep(pause)
            count_now = min(index_format.IndexHeader.unpack(buf).index_count, max_entries)
            late = [(slot, head) for slot, head in late if head >= count_now]
        found.extend(outside(slot, head) for slot, head in late)
        problems.extend(sorted(found, key=lambda problem: problem.pos))
        begin = header.begin_phy_offset if count > index_format.FIRST_ENTRY else None
        return read._replace(begin=begin, newer_entries=max(0, count_now - count),
                             entries=read.entries + max(0, count - index_format.FIRST_ENTRY) - len(read.beyond))

    def _check_entries(self, buf: Any, rel: str, count: int, read: _IndexRead) -> list[int]:
        """Check entries 1..count-1; the slot of each entry number (index 0 unused)."""
        problems = read.problems
        slots = self.config.index_hash_slots
        first = index_format.entry_pos(index_format.FIRST_ENTRY, slots)
        view = memoryview(buf)[first:index_format.entry_pos(max(count, 1), slots)]
        slot_of = [-1]
        end = self._end
        for n, (key_hash, phy_offset, time_diff, prev) in enumerate(index_format.ENTRY.iter_unpack(view), 1):
            pos = index_format.entry_pos(n, slots)
            slot_of.append(key_hash % slots if key_hash >= 0 else -1)
            if key_hash < 0 or time_diff < 0:
                problems.append(Problem(rel, pos, f"entry {n}: negative key hash {key_hash} or time diff {time_diff}"))
            if prev and not 0 < prev < n:
                problems.append(Problem(rel, pos, f"entry {n}: chain link {prev} does not point at an older entry"))
            elif prev and slot_of[prev] != slot_of[n]:
                problems.append(Problem(rel, pos, f"entry {n} (slot {slot_of[n]}) links to entry {prev} of slot "
                                                  f"{slot_of[prev]}"))
            if phy_offset >= end:
                read.beyond.append((key_hash, phy_offset, n, rel, pos))
                continue
            for early in read.beyond:  # a file's entries are added in log order: not one a writer added
                problems.extend(self._index_target_problems(*early))
            read.beyond.clear()
            problems.extend(self._index_target_problems(key_hash, phy_offset, n, rel, pos))
            record = self.records.get(phy_offset)
            if record is not None and key_hash in record.key_hashes:
                read.indexed.append((key_hash, phy_offset))
        view.release()
        return slot_of

    def _index_target_problems(self, key_hash: int, phy_offset: int, n: int, rel: str, pos: int) -> Iterable[Problem]:
        record = self.records.get(phy_offset)
        if record is None:
            if phy_offset >= self.result.min_phy_offset:
                yield Problem(rel, pos, f"entry {n} points at {phy_offset}, {self._nowhere(phy_offset)}")
            return
        if key_hash not in record.key_hashes:
            yield Problem(rel, pos, f"entry {n}: key hash {key_hash} is not the hash of a key of the record "
                                    f"at {phy_offset}")

    def _check_all_indexed(self, first_indexed: int | None, tail: int) -> None:
        missing: dict[int, list[int]] = {}
        for phy_offset, record in self.records.items():
            if phy_offset >= tail:
                break
            if first_indexed is None or phy_offset < first_indexed or not gets_index_entry(record.sys_flag):
                continue
            hashes = [h for h in record.key_hashes if (h, phy_offset) not in self.indexed]
            if hashes:
                missing[phy_offset] = hashes
        for pause in RECHECK_PAUSES_S:  # the dispatch may have added them after verify read the index
            if not missing:
                break
            time.sleep(pause)
            found = self._index_keys_now(missing)
            self.result.newer_index_entries += len(found)
            for key_hash, phy_offset in found:
                missing[phy_offset].remove(key_hash)
                if not missing[phy_offset]:
                    del missing[phy_offset]
        for phy_offset, hashes in missing.items():
            record = self.records[phy_offset]
            self.problem(record.file, record.pos, f"record at {phy_offset} ({record.topic}): "
                                                  f"{len(hashes)} key(s) not in the index")

    def _index_keys_now(self, missing: dict[int, list[int]]) -> set[tuple[int, int]]:
        """Of these (key hash, record) pairs, those the index holds now (every index file read again)."""
        wanted = {(h, phy_offset) for phy_offset, hashes in missing.items() for h in hashes}
        found: set[tuple[int, int]] = set()
        slots, max_entries = self.config.index_hash_slots, self.config.index_max_entries
        directory = self.root / INDEX_DIR
        for path in sorted(p for p in directory.iterdir() if p.is_file()):
            with _mapped(path) as buf:
                if len(buf) != self._index_file_size():
                    continue
                count = min(index_format.IndexHeader.unpack(buf).index_count, max_entries)
                first = index_format.entry_pos(index_format.FIRST_ENTRY, slots)
                view = memoryview(buf)[first:index_format.entry_pos(max(count, 1), slots)]
                found.update(pair for key_hash, phy_offset, _, _ in index_format.ENTRY.iter_unpack(view)
                             if (pair := (key_hash, phy_offset)) in wanted)
                view.release()
        return found


def verify_store(root: Path, config: StoreConfig) -> VerifyResult:
    """Walk every file of the store at `root` (read-only) and report what is inconsistent, as of the
    log's end read first (see the module's doc: safe beside a live writer).

    Args:
        root: the store directory.
        config: its geometry (file sizes, index slots and entries) and delay levels (the levels the store
            recorded win).

    Raises:
        OSError: a file cannot be read.
    """
    verifier = _Verifier(Path(root), config)
    verifier.commitlog()
    verifier.consume_queues()
    verifier.index()
    verifier.settle()
    verifier.index_chains()
    verifier.dispatch()
    return verifier.result
