"""The read loop of a get: consume-queue entries turned into messages, decoded in place from the
commitlog file that holds them.

`decode_run` walks the entries from entry `i` and stops, returning `(i, total_bytes, stop)`, when
(`RunStop`):

- `END`: every entry was taken;
- `FULL`: entry `i` would take the result past `max_count` messages or `max_bytes` bytes (the
  limits are only checked once a message was taken, so a result always holds one message);
- `ELSEWHERE`: entry `i` is a wanted message that cannot be decoded in place: its record lies
  outside bytes [0, log_size) of the file starting at `log_start`, or the bytes there are not the whole
  record the entry names. The caller reads it the general way (which says why a record is missing) and
  calls again with the next entry and that record's file.

Entries with an invalid position or size and filler entries are skipped, as are entries whose tags
code is not in `wanted` (None wants every code). Given a `topic`, a record is only decoded in place when
it is of that topic and queue `queue_id` and its queue offset is `first_offset + i` for entry `i` (the
queue offset of the first entry of `entries` being `first_offset`); any other record is `ELSEWHERE`, for
the caller to judge: the entry is damaged (it points at a valid record of another queue or offset, or at
a record whose topic bytes, which no CRC covers, were rewritten). A decoded message is appended to
`messages` and its entry's size added to `total_bytes`. The compiled `rocketstore._speedups.decode_run`
runs the same loop when it is there; `decode_run_py` is its twin and the reference.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Collection, Iterator

from rocketstore._types import Buffer
from rocketstore.errors import MessageNotFoundError
from rocketstore.format.consume_queue import FILLER_SIZE, UNIT, UNIT_SIZE
from rocketstore.format.layout import JAVA_INT_MAX, JAVA_LONG_MAX
from rocketstore.format.message import (
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    PREFIX,
    PREFIX_SIZE,
    QUEUE_ID_POS,
    QUEUE_OFFSET_POS,
    StoredMessage,
    build_message_py,
)
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue, ConsumeQueueState
from rocketstore.native import speedups
from rocketstore.storage.mapped_file_queue import MappedFileQueue

__all__ = ["EntryReader", "RunStop", "decode_run", "decode_run_py", "get_run", "get_run_py", "queue_messages",
           "queue_runs"]

_QUEUE_FIELDS = struct.Struct(">iiq")  # QUEUEID, FLAG, QUEUEOFFSET: a record's bytes from QUEUE_ID_POS
assert QUEUE_OFFSET_POS == QUEUE_ID_POS + 8


class RunStop(enum.IntEnum):
    """Why a run of `decode_run` stopped (the compiled one answers the same numbers: its enum is generated
    from this one, store/c_layout.py)."""

    END = 0
    FULL = 1
    ELSEWHERE = 2


_END, _FULL, _ELSEWHERE = RunStop.END, RunStop.FULL, RunStop.ELSEWHERE


def decode_run_py(cls: type[StoredMessage], entries: bytes, i: int, log: Buffer, log_start: int, log_size: int,
                  wanted: Collection[int] | None, messages: list[StoredMessage], max_count: int, total_bytes: int,
                  max_bytes: int, topic: str | None = None, queue_id: int = 0,
                  first_offset: int = 0) -> tuple[int, int, RunStop]:
    """The loop in pure Python (see the module's text)."""
    log_size = min(log_size, len(log))
    end = len(entries) // UNIT_SIZE
    while i < end:
        phy_offset, size, code = UNIT.unpack_from(entries, i * UNIT_SIZE)
        if messages and (len(messages) >= max_count or total_bytes + size > max_bytes):
            return i, total_bytes, _FULL
        if phy_offset < 0 or size <= 0 or (phy_offset == 0 and size == FILLER_SIZE and code == 0) \
                or (wanted is not None and code not in wanted):
            i += 1
            continue
        pos = phy_offset - log_start
        if pos < 0 or pos > log_size - size or size < PREFIX_SIZE:
            return i, total_bytes, _ELSEWHERE
        total, magic = PREFIX.unpack_from(log, pos)
        if (magic != MAGIC_V1 and magic != MAGIC_V2) or not MIN_RECORD_SIZE <= total <= size:
            return i, total_bytes, _ELSEWHERE
        try:
            msg = build_message_py(cls, bytes(log[pos:pos + total]), magic)
        except ValueError:
            return i, total_bytes, _ELSEWHERE
        if msg.phy_offset != phy_offset:  # not the record the entry names
            return i, total_bytes, _ELSEWHERE
        if topic is not None:
            record_queue_id, _, record_offset = _QUEUE_FIELDS.unpack_from(log, pos + QUEUE_ID_POS)
            if record_queue_id != queue_id or record_offset != first_offset + i or msg.topic != topic:
                return i, total_bytes, _ELSEWHERE  # a record of another queue or offset
        messages.append(msg)
        total_bytes += size
        i += 1
    return i, total_bytes, _END


decode_run: Callable[..., tuple[int, int, int]] = decode_run_py if speedups is None else speedups.decode_run

def get_run_py(cls: type[StoredMessage], cq: ConsumeQueueState, min_logic: int, queue_id: int, offset: int,
               max_count: int, max_bytes: int, log_queue: MappedFileQueue,
               topic: str) -> tuple[list[StoredMessage], int, int] | None:
    """`MessageStore.get`'s plain case (no tags) in one call: `(messages, min_offset, max_offset)` when
    `offset` lies in the queue (`min_logic` its first valid byte offset) and each of the
    `min(max_offset - offset, max_count)` entries from it gives its message (`decode_run` with `topic`:
    a record of that topic, queue id and queue offset) from the one commitlog file holding the first
    entry's record, within `max_bytes`. None (declined) for anything else: an offset out of the queue, a
    window that crosses a consume-queue file, a file not mapped now, an entry passed over, a record in
    another file. The general reader answers those. The compiled `rocketstore._speedups.get_run` is its
    twin; neither maps a file (no Python code runs inside the compiled one)."""
    files = cq.queue.files
    if not files or max_count < 1 or max_count > JAVA_INT_MAX or max_bytes < 0 or min_logic < 0 or offset < 0:
        return None
    last = files[-1]
    hi = (last.file_from_offset + last.wrote_position) // UNIT_SIZE
    lo = max(min_logic, files[0].file_from_offset) // UNIT_SIZE
    if not lo <= offset < hi:
        return None
    want = min(hi - offset, max_count)
    at = offset * UNIT_SIZE
    mf = cq.queue.find(at)
    if mf is None or at - mf.file_from_offset + want * UNIT_SIZE > mf.wrote_position:
        return None
    entries_map = mf.mapped_now()
    if entries_map is None or mf.wrote_position > len(entries_map):
        return None
    pos = at - mf.file_from_offset
    entries = bytes(entries_map[pos:pos + want * UNIT_SIZE])
    log = log_queue.find(UNIT.unpack_from(entries)[0])
    log_map = None if log is None else log.mapped_now()
    if log is None or log_map is None or log.wrote_position > len(log_map):
        return None
    messages: list[StoredMessage] = []
    decode_run_py(cls, entries, 0, log_map, log.file_from_offset, log.wrote_position, None, messages, want, 0,
                  max_bytes, topic, queue_id, offset)
    return (messages, lo, hi) if len(messages) == want else None


get_run: Callable[..., tuple[list[StoredMessage], int, int] | None] = (
    get_run_py if speedups is None else speedups.get_run)


class EntryReader:
    """Reads the messages of consume-queue entries of the queue (`topic`, `queue_id`) for one get or
    scan: runs of `decode_run` in the commitlog file of the entry that stopped the previous run, with each
    entry it cannot decode in place there read through `CommitLog.message_at`, which says why a record is
    missing.

    A message is only ever taken for an entry when its record is of `topic`, `queue_id` and the entry's
    queue offset; an entry pointing at any other record (a damaged entry) is passed over and its queue
    offset listed in `misplaced`.

    After `read`: `messages` holds what was read, `full` says a limit stopped it, `removed` that an
    entry's record is no longer in the commitlog (deleted by retention, or not a record of the queue there).
    """

    __slots__ = ("_file", "commitlog", "full", "max_bytes", "max_count", "messages", "misplaced", "queue_id",
                 "removed", "topic", "total_bytes", "wanted")

    def __init__(self, commitlog: CommitLog, wanted: Collection[int] | None, max_count: int,
                 max_bytes: int, topic: str, queue_id: int) -> None:
        self.commitlog = commitlog
        self.wanted = wanted
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.topic = topic
        self.queue_id = queue_id
        self.messages: list[StoredMessage] = []
        self.misplaced: list[int] = []
        self.total_bytes = 0
        self.full = False
        self.removed = False
        self._file: tuple[int, int, Buffer] = (0, -1, b"")  # start, bytes written, mapping

    def read(self, entries: bytes, first_offset: int) -> int:
        """Read the messages of `entries` (whole 20-byte entries, the first at queue offset
        `first_offset`) until a limit is reached; returns how many entries were consumed (all of them
        unless `full`)."""
        i = 0
        messages = self.messages
        if self._file[1] < 0 and len(entries) >= UNIT_SIZE:  # the first run: in the file of the first entry
            self._file = self.commitlog.readable_file(UNIT.unpack_from(entries)[0])
        while True:
            file_start, file_size, mm = self._file
            i, self.total_bytes, state = decode_run(StoredMessage, entries, i, mm, file_start, file_size,
                                                    self.wanted, messages, self.max_count, self.total_bytes,
                                                    self.max_bytes, self.topic, self.queue_id, first_offset)
            if state != _ELSEWHERE:
                self.full = state == _FULL
                return i
            phy_offset, size, _ = UNIT.unpack_from(entries, i * UNIT_SIZE)
            if not file_start <= phy_offset < file_start + file_size:  # in another file: decode the run there
                found = self.commitlog.readable_file(phy_offset)
                if found[1] >= 0 and found[0] != file_start:
                    self._file = found
                    continue
            i += 1
            try:  # the general path: finds the file, says why a record is missing
                msg = self.commitlog.message_at(phy_offset, size)
            except MessageNotFoundError:
                self.removed = True
                continue
            self._file = self.commitlog.readable_file(phy_offset)
            if msg.topic != self.topic or msg.queue_id != self.queue_id or msg.queue_offset != first_offset + i - 1:
                self.misplaced.append(first_offset + i - 1)  # a damaged entry: never served as this queue's
                self.removed = True
                continue
            messages.append(msg)
            self.total_bytes += size


_NO_LIMIT = JAVA_LONG_MAX


MisplacedHandler = Callable[[str, int, list[int]], object]
"""Told (topic, queue id, queue offsets) of the entries a read passed over as misplaced."""


def queue_runs(commitlog: CommitLog, cq: ConsumeQueue, start: int, end: int, chunk: int = 1024,
               on_misplaced: MisplacedHandler | None = None) -> Iterator[list[StoredMessage]]:
    """Every message of the queue `cq` at queue offsets `[start, end)` (clipped to the queue's bounds),
    in order, in lists of the messages of `chunk` entries read at a time by `EntryReader`: fillers,
    invalid entries, entries whose record is gone and entries pointing at a record of another queue or
    queue offset (`EntryReader`) are passed over (the last told to `on_misplaced`, when given).
    `MessageStore.iter_queue` and the Spark queue reader both read a queue this way."""
    lo, hi = max(start, cq.min_offset), min(end, cq.max_offset)
    reader = EntryReader(commitlog, None, _NO_LIMIT, _NO_LIMIT, cq.topic, cq.queue_id)
    while lo < hi:
        entries = cq.entry_bytes(lo, min(hi, lo + chunk))
        if not entries:
            return
        reader.read(entries, lo)
        if reader.misplaced:
            if on_misplaced is not None:
                on_misplaced(cq.topic, cq.queue_id, reader.misplaced)
            reader.misplaced = []
        run, reader.messages = reader.messages, []
        yield run
        lo += len(entries) // UNIT_SIZE


def queue_messages(commitlog: CommitLog, cq: ConsumeQueue, start: int, end: int, chunk: int = 1024,
                   on_misplaced: MisplacedHandler | None = None) -> Iterator[StoredMessage]:
    """The messages of `queue_runs` one by one."""
    for run in queue_runs(commitlog, cq, start, end, chunk, on_misplaced):
        yield from run
