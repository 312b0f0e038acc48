"""Arguments no caller of the compiled kernels passes, which they must still refuse without touching
memory outside their buffers: a record range shorter than a record header (`record_columns`), an empty
first field (`record_columns` copying zero bytes into a buffer it has not allocated yet), an index header
whose entry or slot count is near 2**63 (`index_put_keys`, where `n + count` overflowed and the write went
outside the mapping).

The ranges end right before a page the process may not read, so an overread is a crash here with the
normal build too; the empty field is only seen by the sanitizer build CI runs this module with
(`.ci/run`: UBSan's null-pointer check on memcpy).
"""

from __future__ import annotations

import ctypes
import mmap
import struct
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from rocketstore.format import message as fm
from rocketstore.format.index import index_file_size
from rocketstore.log.index_file import KEY, IndexFile
from rocketstore.native import speedups

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.skipif(speedups is None, reason="the compiled module is not built (or "
                                                         "ROCKETSTORE_PURE_PYTHON is set)")

PAGE = mmap.PAGESIZE
PROT_NONE = 0


class Guarded:
    """`size` writable bytes that end right before a page the process may not read or write."""

    def __init__(self, size: int) -> None:
        pages = -(-size // PAGE)
        self.mm = mmap.mmap(-1, (pages + 1) * PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.mm))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        if libc.mprotect(base + pages * PAGE, PAGE, PROT_NONE) != 0:
            pytest.skip(f"mprotect of a guard page failed (errno {ctypes.get_errno()})")
        self.start = pages * PAGE - size
        self.view = memoryview(self.mm)[self.start:pages * PAGE]

    def close(self) -> None:
        self.view.release()
        # the guard page stays PROT_NONE until unmapped; mmap.close unmaps it without touching it
        self.mm.close()


@pytest.fixture
def guarded() -> Iterator[type[Guarded]]:
    made: list[Guarded] = []

    class Made(Guarded):
        def __init__(self, size: int) -> None:
            super().__init__(size)
            made.append(self)

    yield Made
    for g in made:
        g.close()


def _columns(data: object, ranges: list[tuple[int, int]]) -> object:
    starts = np.array([a for a, _ in ranges], dtype=np.int64)
    ends = np.array([b for _, b in ranges], dtype=np.int64)
    return speedups.record_columns(data, starts, ends)


def _record(topic: bytes, body: bytes, properties: bytes = b"") -> bytes:
    return fm.encode_message(topic=topic, body=body, properties=properties, queue_id=1, flag=0, queue_offset=2,
                             phy_offset=300, sys_flag=0, born_timestamp=4, born_ip=b"\1\2\3\4", born_port=5,
                             store_timestamp=6, store_ip=b"\7\7\7\7", store_port=8)


@pytest.mark.parametrize("length", [1, 4, 8, 20, 36, 39, 40, 87, fm.encoded_size(1, 0, 0) - 1])
def test_record_columns_declines_a_range_shorter_than_a_record_without_reading_past_it(guarded, length):
    whole = _record(b"T", b"")
    g = guarded(length)
    g.view[:] = struct.pack(">i", length) + whole[4:length] if length >= 4 else whole[:length]
    assert _columns(g.view, [(0, length)]) is None  # the row path's record: the caller takes that path
    # a whole record right before the guard page is read to its last byte and no further
    g2 = guarded(len(whole))
    g2.view[:] = whole
    assert _columns(g2.view, [(0, len(whole))]) is not None


@pytest.mark.parametrize("ranges", [[(-1, 10)], [(10, 5)], [(0, 200)], [(2**62, 2**62 + 100)],
                                    [(0, -(2**63))]])
def test_record_columns_refuses_a_range_outside_the_data(ranges):
    with pytest.raises(ValueError, match="record range outside the data"):
        _columns(bytearray(100), ranges)


@pytest.mark.parametrize(("topic", "body"), [(b"", b"body"), (b"T", b""), (b"", b"")])
def test_record_columns_takes_an_empty_first_topic_or_body(topic, body):
    records = [_record(topic, body, b"KEYS\x01k"), _record(b"T2", b"b2")]
    data = b"".join(records)
    columns = _columns(data, [(0, len(records[0])), (len(records[0]), len(data))])
    assert columns is not None
    topic_offsets, topics = columns[10], columns[11]  # after the ten fixed-width columns
    assert np.frombuffer(topic_offsets, dtype=np.int32).tolist() == [0, len(topic), len(topic) + 2]
    assert topics == topic + b"T2"
    body_offsets, bodies = columns[-6], columns[-5]
    assert np.frombuffer(body_offsets, dtype=np.int32).tolist() == [0, len(body), len(body) + 2]
    assert bodies == body + b"b2"


POOLED_ROOM = 4 << 20
"""columns.c's POOLED_ROOM: rooms of this many bytes or more come from `allocate`."""


def test_record_columns_writes_large_columns_into_what_allocate_gives_also_past_their_room():
    """With `allocate`, a column whose room is POOLED_ROOM or more is a slice of an object it made, the
    smaller ones bytes objects, all holding the bytes the bytes-object path gives; a column that outgrew
    its room (topics longer than the room a row is given) is copied into a new one of its length."""
    pa = pytest.importorskip("pyarrow")
    made: list[int] = []

    def allocate(size: int) -> object:
        made.append(size)
        return pa.allocate_buffer(size)

    small = [_record(b"T" * 120, b"body", b"KEYS\x01" + b"k " * 200), _record(b"U" * 120, b"b2")]
    data = b"".join(small)
    ranges = [(0, len(small[0])), (len(small[0]), len(data))]
    pooled = speedups.record_columns(data, *_starts_ends(ranges), allocate)
    assert pooled is not None and made == [] and all(isinstance(x, bytes) for x in pooled)
    assert list(pooled) == list(_columns(data, ranges))

    rows = 40_000  # topics of 4,800,000 bytes in all, past the 64 bytes a row the topic column is given
    record = _record(b"T" * 120, b"x" * 100)
    data = record * rows
    ranges = [(i * len(record), (i + 1) * len(record)) for i in range(rows)]
    pooled = speedups.record_columns(data, *_starts_ends(ranges), allocate)
    plain = _columns(data, ranges)
    assert pooled is not None and plain is not None
    assert [bytes(x) for x in pooled] == list(plain)
    topic, body = pooled[11], pooled[-5]
    assert isinstance(topic, pa.Buffer) and isinstance(body, pa.Buffer)
    assert 120 * rows in made  # the outgrown topic column's second room, of its length
    assert all(size >= POOLED_ROOM for size in made)


def _starts_ends(ranges: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    return (np.array([a for a, _ in ranges], dtype=np.int64), np.array([b for _, b in ranges], dtype=np.int64))


@pytest.mark.parametrize(("allocate", "error"), [
    (42, TypeError),  # not callable
    (lambda size: b"\0" * size, BufferError),  # no writable buffer
    (lambda size: bytearray(max(0, size - 1)), ValueError),  # shorter than asked
    (lambda size: 1 / 0, ZeroDivisionError),  # its own error goes through
])
def test_record_columns_refuses_an_allocate_that_gives_no_room(allocate, error):
    data = _record(b"T", b"x" * POOLED_ROOM)  # its body's room is one allocate makes
    with pytest.raises(error):
        speedups.record_columns(data, np.array([0], dtype=np.int64), np.array([len(data)], dtype=np.int64), allocate)


@pytest.mark.parametrize(("topics", "keep_rows", "ranges", "error"), [
    ([b"T"], 1, [(0, None)], TypeError),  # a list, not a tuple
    ((b"T", "T"), 1, [(0, None)], TypeError),  # a str among the bytes
    ((b"T",), 2, [(0, None)], ValueError),  # keep of another length than the ranges
    ((b"T",), 1, [(0, 10**6)], ValueError),  # a range outside the data
    ((b"T",), 1, [(-1, 10)], ValueError),
])
def test_topic_rows_refuses_what_it_cannot_walk(topics, keep_rows, ranges, error):
    data = _record(b"T", b"body")
    starts = np.array([a for a, _ in ranges], dtype=np.int64)
    ends = np.array([len(data) if b is None else b for _, b in ranges], dtype=np.int64)
    with pytest.raises(error):
        speedups.topic_rows(data, starts, ends, topics, np.zeros(keep_rows, dtype=np.bool_))


def test_topic_rows_declines_a_range_shorter_than_a_record_without_reading_past_it(guarded):
    whole = _record(b"T", b"")
    g = guarded(40)
    g.view[:] = whole[:40]
    keep = np.zeros(1, dtype=np.bool_)
    assert speedups.topic_rows(g.view, np.array([0], dtype=np.int64), np.array([40], dtype=np.int64), (b"T",),
                               keep) == -1
    g2 = guarded(len(whole))
    g2.view[:] = whole
    assert speedups.topic_rows(g2.view, np.array([0], dtype=np.int64), np.array([len(whole)], dtype=np.int64),
                               (b"T",), keep) == 1 and keep.tolist() == [True]


SLOTS, MAX_ENTRIES = 4, 8


def _index_put(buffer: object, header: tuple[int, ...], keys: bytes) -> object:
    return speedups.index_put_keys(buffer, SLOTS, header, keys, 1000, 0, len(keys) // KEY.size)


@pytest.mark.parametrize("header", [
    (0, 0, 0, 0, 0, 2**63 - 1),        # indexCount near 2**63: n + count overflowed int64
    (0, 0, 0, 0, 0, 2**63 - 20),
    (0, 0, 0, 0, 2**63 - 1, 1),        # hashSlotCount near 2**63
    (0, 0, 0, 0, -(2**63), 1),
    (0, 0, 0, 0, 0, 2**31 - 1),        # an entry number past int32 after the put
    (0, 0, 0, 0, 2**31 - 1, 1),
    (0, 0, 0, 0, 0, -(2**63)),
    (0, 0, 0, 0, 0, MAX_ENTRIES),      # no room in the file
])
def test_index_put_keys_declines_counts_near_the_int64_limit_and_writes_nothing(guarded, header):
    g = guarded(index_file_size(SLOTS, MAX_ENTRIES))
    g.view[:] = b"\x5a" * len(g.view)  # any bytes: the header's fields come as arguments
    before = bytes(g.view)
    keys = KEY.pack(5, 100) + KEY.pack(6, 200)
    assert _index_put(g.view, header, keys) is None  # the twin (IndexFile._put_keys_py) answers instead
    assert bytes(g.view) == before


def test_index_put_keys_writes_up_to_the_last_entry_of_the_file_as_its_twin_does(guarded):
    g = guarded(index_file_size(SLOTS, MAX_ENTRIES))
    header = (0, 0, 0, 0, 0, MAX_ENTRIES - 1)
    assert _index_put(g.view, header, KEY.pack(5, 100) + KEY.pack(6, 200)) is None  # one entry past the file
    twin = bytearray(g.view)
    after = _index_put(g.view, header, KEY.pack(5, 100))
    assert after == IndexFile._put_keys_py(SimpleNamespace(mm=twin, slots=SLOTS), header,  # type: ignore[arg-type]
                                           KEY.pack(5, 100), 1000, 0, 1)
    assert after[-1] == MAX_ENTRIES and bytes(g.view) == bytes(twin)
