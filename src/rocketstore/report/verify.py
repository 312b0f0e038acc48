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
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from rocketstore.errors import CorruptRecordError
from rocketstore.format import consume_queue as cq_format
from rocketstore.format import index as index_format
from rocketstore.format.filenames import name_to_offset
from rocketstore.format.javahash import index_key_hash
from rocketstore.format.message import END_OF_FILE, NEED_DATA, StoredMessage, decode_message, peek_prefix
from rocketstore.format.store_dirs import COMMITLOG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR, queue_dirs
from rocketstore.format.sysflag import gets_index_entry, gets_queue_entry
from rocketstore.report._files import first_nonzero as _first_nonzero
from rocketstore.report._files import mapped as _mapped
from rocketstore.store.files import request_from_message

if TYPE_CHECKING:
    from rocketstore import StoreConfig



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

    @property
    def ok(self) -> bool:
        return not self.problems

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


def _offset_files(directory: Path, file_size: int, rel: str, problems: list[Problem]) -> list[tuple[int, Path]]:
    """(start offset, path) of the offset-named files of `directory`, checking names, sizes, gaps."""
    files: list[tuple[int, Path]] = []
    for path in sorted(p for p in directory.iterdir() if p.is_file()):
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


class _Verifier:
    def __init__(self, root: Path, config: StoreConfig) -> None:
        self.root = root
        self.config = config
        self.result = VerifyResult()
        self.records: dict[int, _Record] = {}
        self.dispatched: set[int] = set()
        self.indexed: set[tuple[int, int]] = set()
        self._first_indexed: int | None = None
        self._delays = config.delay_level_millis()

    def problem(self, file: str, pos: int, message: str) -> None:
        self.result.problems.append(Problem(file, pos, message))

    def _nowhere(self, phy_offset: int) -> str:
        """Why no record is at `phy_offset`."""
        if phy_offset >= self.result.max_phy_offset:
            return "past the end of the commitlog"
        return "where no record starts"

    # -- commitlog -------------------------------------------------------------------------------

    def commitlog(self) -> None:
        directory = self.root / COMMITLOG_DIR
        if not directory.is_dir():
            self.problem(COMMITLOG_DIR, 0, "no commitlog directory")
            return
        files = _offset_files(directory, self.config.commitlog_file_size, COMMITLOG_DIR, self.result.problems)
        self.result.commitlog_files = len(files)
        if files:
            self.result.min_phy_offset = self.result.max_phy_offset = files[0][0]
        next_queue_offset: dict[tuple[str, int], int] = {}
        ended_at: str | None = None
        for start, path in files:
            rel = f"{COMMITLOG_DIR}/{path.name}"
            with _mapped(path) as buf:
                if ended_at is not None and _first_nonzero(buf, 0) is not None:
                    self.problem(rel, 0, f"holds data although the log ended in {ended_at}")
                if ended_at is None:
                    end = self._walk_file(buf, start, rel, next_queue_offset)
                    if end is not None:
                        ended_at = rel
                        self.result.max_phy_offset = start + end
                    else:
                        self.result.max_phy_offset = start + len(buf)

    def _walk_file(self, buf: Any, start: int, rel: str, next_queue_offset: dict[tuple[str, int], int]) -> int | None:
        """Walk one file's records; the position where written data ends, None when a blank closes it."""
        pos = 0
        while True:
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
            self._check_record(message, start + pos, rel, pos, next_queue_offset)
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
                                       f"follows {expected - 1}")
            next_queue_offset[queue] = message.queue_offset + 1
        dispatch = request_from_message(message, self._delays)  # what the store derives from the record
        keys = dispatch.index_keys
        self.records[phy_offset] = _Record(
            message.size, message.topic, message.queue_id, message.queue_offset, dispatch.tags_code,
            message.sys_flag, frozenset(index_key_hash(index_format.index_key(message.topic, k)) for k in keys),
            rel, pos,
        )

    # -- consume queues --------------------------------------------------------------------------

    def consume_queues(self) -> None:
        for topic, queue_id, queue_dir in queue_dirs(self.root):
            self.result.consume_queues += 1
            self._check_queue(topic, queue_id, queue_dir)

    def _check_queue(self, topic: str, queue_id: int, directory: Path) -> None:
        rel_dir = f"{CONSUME_QUEUE_DIR}/{topic}/{queue_id}"
        file_size = self.config.consume_queue_file_size
        ended = False
        for start, path in _offset_files(directory, file_size, rel_dir, self.result.problems):
            rel = f"{rel_dir}/{path.name}"
            with _mapped(path) as buf:
                for i, unit in enumerate(cq_format.iter_units(buf)):
                    pos = i * cq_format.UNIT_SIZE
                    if unit == (0, 0, 0):
                        ended = True
                        continue
                    if ended:
                        self.problem(rel, pos, "entry after the end of the queue (an earlier entry is empty)")
                        return
                    if not unit.filler:
                        self._check_unit(unit, (start + pos) // cq_format.UNIT_SIZE, topic, queue_id, rel, pos)

    def _check_unit(self, unit: cq_format.CqUnit, queue_offset: int, topic: str, queue_id: int,
                    rel: str, pos: int) -> None:
        self.result.cq_entries += 1
        record = self.records.get(unit.phy_offset)
        if record is None:
            if unit.phy_offset >= self.result.min_phy_offset:
                self.problem(rel, pos, f"queue offset {queue_offset} points at {unit.phy_offset}, "
                                       f"{self._nowhere(unit.phy_offset)}")
            return
        self.dispatched.add(unit.phy_offset)
        expected = {"size": record.size, "topic": record.topic, "queue id": record.queue_id,
                    "queue offset": record.queue_offset, "tags code": record.tags_code}
        actual = {"size": unit.size, "topic": topic, "queue id": queue_id, "queue offset": queue_offset,
                  "tags code": unit.tags_code}
        for name, value in actual.items():
            if value != expected[name]:
                self.problem(rel, pos, f"queue offset {queue_offset} -> record at {unit.phy_offset}: "
                                       f"{name} {value!r}, the record says {expected[name]!r}")

    def dispatch(self) -> None:
        """After the queues and the index: the undispatched tail, then every record before it that
        misses its queue entry or an index key."""
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
        for phy_offset, record in self.records.items():
            if phy_offset >= tail:
                break
            if gets_queue_entry(record.sys_flag) and phy_offset not in self.dispatched:
                self.problem(record.file, record.pos, f"record at {phy_offset} ({record.topic}/{record.queue_id} "
                                                      f"offset {record.queue_offset}) is in no consume queue")

    # -- index -----------------------------------------------------------------------------------

    def index(self) -> None:
        directory = self.root / INDEX_DIR
        if not directory.is_dir():
            return
        first_indexed: int | None = None
        for path in sorted(p for p in directory.iterdir() if p.is_file()):
            rel = f"{INDEX_DIR}/{path.name}"
            self.result.index_files += 1
            with _mapped(path) as buf:
                begin = self._check_index_file(buf, rel)
            if begin is not None and first_indexed is None:
                first_indexed = begin
        self._first_indexed = first_indexed

    def _check_index_file(self, buf: Any, rel: str) -> int | None:
        """Check one index file; the begin physical offset of its header (None if unreadable)."""
        slots, max_entries = self.config.index_hash_slots, self.config.index_max_entries
        expected_size = index_format.index_file_size(slots, max_entries)
        if len(buf) != expected_size:
            self.problem(rel, 0, f"file is {len(buf)} bytes, the geometry says {expected_size}")
            return None
        header = index_format.IndexHeader.unpack(buf)
        count = header.index_count
        if count > max_entries:
            self.problem(rel, 0, f"indexCount {count} exceeds the {max_entries} entries of the file")
            count = max_entries
        slot_of = self._check_entries(buf, rel, count)
        table = memoryview(buf)[index_format.HEADER_SIZE:index_format.HEADER_SIZE + slots * index_format.SLOT_SIZE]
        for slot, (head,) in enumerate(index_format.SLOT.iter_unpack(table)):
            if head == 0:
                continue
            pos = index_format.HEADER_SIZE + slot * index_format.SLOT_SIZE
            if not 0 < head < count:
                self.problem(rel, pos, f"slot {slot} points at entry {head}, outside [1, {count})")
            elif slot_of[head] != slot:
                self.problem(rel, pos, f"slot {slot} points at entry {head} of slot {slot_of[head]}")
        del table
        return header.begin_phy_offset if count > index_format.FIRST_ENTRY else None

    def _check_entries(self, buf: Any, rel: str, count: int) -> list[int]:
        """Check entries 1..count-1; the slot of each entry number (index 0 unused)."""
        slots = self.config.index_hash_slots
        first = index_format.entry_pos(index_format.FIRST_ENTRY, slots)
        view = memoryview(buf)[first:index_format.entry_pos(max(count, 1), slots)]
        slot_of = [-1]
        for n, (key_hash, phy_offset, time_diff, prev) in enumerate(index_format.ENTRY.iter_unpack(view), 1):
            pos = index_format.entry_pos(n, slots)
            slot_of.append(key_hash % slots if key_hash >= 0 else -1)
            self.result.index_entries += 1
            if key_hash < 0 or time_diff < 0:
                self.problem(rel, pos, f"entry {n}: negative key hash {key_hash} or time diff {time_diff}")
            if prev and not 0 < prev < n:
                self.problem(rel, pos, f"entry {n}: chain link {prev} does not point at an older entry")
            elif prev and slot_of[prev] != slot_of[n]:
                self.problem(rel, pos, f"entry {n} (slot {slot_of[n]}) links to entry {prev} of slot {slot_of[prev]}")
            self._check_index_target(key_hash, phy_offset, n, rel, pos)
        del view
        return slot_of

    def _check_index_target(self, key_hash: int, phy_offset: int, n: int, rel: str, pos: int) -> None:
        record = self.records.get(phy_offset)
        if record is None:
            if phy_offset >= self.result.min_phy_offset:
                self.problem(rel, pos, f"entry {n} points at {phy_offset}, {self._nowhere(phy_offset)}")
            return
        if key_hash not in record.key_hashes:
            self.problem(rel, pos, f"entry {n}: key hash {key_hash} is not the hash of a key of the record "
                                   f"at {phy_offset}")
        self.indexed.add((key_hash, phy_offset))

    def _check_all_indexed(self, first_indexed: int | None, tail: int) -> None:
        for phy_offset, record in self.records.items():
            if phy_offset >= tail:
                break
            if first_indexed is None or phy_offset < first_indexed or not gets_index_entry(record.sys_flag):
                continue
            missing = [h for h in record.key_hashes if (h, phy_offset) not in self.indexed]
            if missing:
                self.problem(record.file, record.pos, f"record at {phy_offset} ({record.topic}): "
                                                      f"{len(missing)} key(s) not in the index")


def verify_store(root: Path, config: StoreConfig) -> VerifyResult:
    """Walk every file of the store at `root` (read-only) and report what is inconsistent.

    Args:
        root: the store directory.
        config: its geometry (file sizes, index slots and entries) and delay levels.

    Raises:
        OSError: a file cannot be read.
    """
    verifier = _Verifier(Path(root), config)
    verifier.commitlog()
    verifier.consume_queues()
    verifier.index()
    verifier.dispatch()
    return verifier.result
