"""Whole records -> one Arrow record batch, column by column (no per-field Python).

`schema.to_record_batch` asks every `StoredMessage` for every field: ~20 Python calls per row, the
cost that bounded a Spark read. Here the records of a batch are joined into one buffer and every column
is made for all rows at once: by the compiled `record_columns` (one pass over the records writing each
column's Arrow buffers), or without it by `_columnar_py`, which gathers each header field from its
fixed position with numpy (record v1 and v2 with IPv4 hosts: the layout of `format.message`) and splits
the properties with Arrow's string kernels and RocketMQ's parse rule (`format.properties`). Rows these
paths do not cover (an IPv6 host, properties or topic that are not valid UTF-8, a property name given
twice in one record) make the whole batch take `to_record_batch`, so all paths always give equal
batches (`tests/spark/test_columnar.py` holds them to it).

A read with a projection (`scan.projection`) builds only the columns it needs. When none of them comes
from the properties (`uniqKey`, `tags`, `keys`, `properties`), the columns are gathered with numpy
even where `record_columns` is compiled, since it parses every record's properties: `columns_of` checks
each record's lengths the way `record_columns` does first, and declines the rows it declines. The
batches of such a read hold at least the columns it builds (a row-path batch holds them all);
`scan.projection.projected` selects the ones asked.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache, lru_cache
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from rocketstore.format import properties as props_codec
from rocketstore.format.hosts import format_host
from rocketstore.format.message import (
    BODY_CRC_POS,
    BORN_HOST_POS,
    FLAG_POS,
    MAGIC_V1,
    MAGIC_V2,
    MIN_RECORD_SIZE,
    PHY_OFFSET_POS,
    QUEUE_ID_POS,
    QUEUE_OFFSET_POS,
    SYS_FLAG_POS,
    header_struct,
    store_timestamp_pos,
)
from rocketstore.format.sysflag import SysFlag
from rocketstore.native import speedups
from rocketstore.scan.arrays import bools, from_numpy, from_values, numpy_view, scalar
from rocketstore.scan.projection import building
from rocketstore.scan.records import ARROW_SCHEMA, to_record_batch

if TYPE_CHECKING:
    from rocketstore import StoredMessage

__all__ = ["BATCH_BYTES", "BATCH_ROWS", "NotColumnar", "RecordLayout", "batches", "columns_of", "gather_rows",
           "record_batch", "run_batches"]

BATCH_ROWS = 8192
"""Rows per Arrow record batch a reader yields, at most (twice 4096 cut the Arrow reader's time on 10M
small messages by about a tenth: fewer batches to wrap and filter in Python; 16384 gained no more and
lost on 1M)."""
BATCH_BYTES = 64 * 1024 * 1024
"""Record bytes per batch, at most (one row may exceed it): keeps a batch of 4 MiB messages far from
Arrow's 2 GiB limit of a binary column and a Python worker's memory."""

# Field positions of a record with IPv4 born and store hosts (sys flag 0), from format.message's layout.
_HOST_BITS = int(SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6)
_BORN_TS_POS = SYS_FLAG_POS + 4
_STORE_TS_POS = store_timestamp_pos(0)
_STORE_HOST_POS = _STORE_TS_POS + 8
_RECONSUME_POS = _STORE_HOST_POS + 8  # after the 4-byte IP and 4-byte port
_BODY_POS = header_struct(4, 4).size  # 88
_BODY_LENGTH_POS = _BODY_POS - 4
_MSG_ID_BYTES = 16  # IPv4 store host (8) + physical offset (8)

_HEADER = np.dtype({
    "names": ["magic", "bodyCRC", "queueId", "flag", "queueOffset", "commitLogOffset", "sysFlag", "bornTimestamp",
              "bornHost", "storeTimestamp", "storeHost", "reconsumeTimes", "bodyLength"],
    "formats": [">u4", ">i4", ">i4", ">i4", ">i8", ">i8", ">i4", ">i8", ">u8", ">i8", ">u8", ">i4", ">i4"],
    "offsets": [4, BODY_CRC_POS, QUEUE_ID_POS, FLAG_POS, QUEUE_OFFSET_POS, PHY_OFFSET_POS, SYS_FLAG_POS, _BORN_TS_POS,
                BORN_HOST_POS, _STORE_TS_POS, _STORE_HOST_POS, _RECONSUME_POS, _BODY_LENGTH_POS],
    "itemsize": _BODY_POS,
})
"""The header fields of a record with IPv4 hosts, big-endian (hosts as ip and port in one value)."""

_HEX = np.frombuffer(b"".join(f"{i:02X}".encode() for i in range(256)), dtype=np.uint8).reshape(256, 2)


class NotColumnar(Exception):
    """The batch holds a row this path does not cover."""


def record_batch(messages: Sequence[StoredMessage], broker: str) -> pa.RecordBatch:
    """`schema.to_record_batch(messages, broker)`, computed column-wise where the rows allow it."""
    if not messages:
        return to_record_batch(messages, broker)
    try:
        return _columnar(messages, broker)
    except NotColumnar:
        return to_record_batch(messages, broker)


def batches(messages: Iterable[StoredMessage], broker: str, rows: int = BATCH_ROWS,
            max_bytes: int = BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """Group `messages` into record batches of at most `rows` rows and about `max_bytes` record bytes
    (none for no messages)."""
    it = iter(messages)
    return run_batches(iter(lambda: list(itertools.islice(it, 1024)), []), broker, rows, max_bytes)


_size_of = attrgetter("size")


def run_batches(runs: Iterable[Sequence[StoredMessage]], broker: str, rows: int = BATCH_ROWS,
                max_bytes: int = BATCH_BYTES) -> Iterator[pa.RecordBatch]:
    """`batches` of the messages that come in `runs` (lists of them, in order): the same batches, a run
    that ends no batch taken whole."""
    chunk: list[StoredMessage] = []
    size = 0
    for run in runs:
        run_size = sum(map(_size_of, run))
        if len(chunk) + len(run) < rows and size + run_size < max_bytes:
            chunk += run  # no batch ends inside it
            size += run_size
            continue
        for message in run:
            chunk.append(message)
            size += message.size
            if len(chunk) >= rows or size >= max_bytes:
                yield record_batch(chunk, broker)
                chunk, size = [], 0
    if chunk:
        yield record_batch(chunk, broker)


def gather_rows(u8: np.ndarray, pos: np.ndarray, width: int) -> np.ndarray:
    """The `width` bytes at each position, one row each (rows of a window view, copied)."""
    windows = np.lib.stride_tricks.as_strided(u8, shape=(max(len(u8) - width + 1, 0), width), strides=(1, 1),
                                              writeable=False)
    return windows[pos]


def _int8(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The signed byte at each position."""
    return u8[pos].view(np.int8).astype(np.int64)


def _int16(u8: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The big-endian signed 2-byte integer at each position (two byte gathers: far cheaper than rows)."""
    return ((u8[pos].astype(np.int16) << 8) | u8[pos + 1]).astype(np.int64)


def _slices(data: pa.Buffer, begins: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The bytes [begin, end) of each row, copied out of `data` by Arrow.

    Ascending, non-overlapping ranges make the offsets 0, b0, e0, b1, e1, ..., len of a binary array
    over the whole buffer (no copy) whose odd elements are the ranges: `take` copies just those.
    """
    n = len(begins)
    offsets = np.empty(2 * n + 2, dtype=np.int64)
    offsets[0], offsets[-1] = 0, data.size
    offsets[1:-1:2], offsets[2:-1:2] = begins, ends
    spans = pa.LargeBinaryArray.from_buffers(pa.large_binary(), 2 * n + 1, [None, pa.py_buffer(offsets), data])
    return pc.take(spans, from_numpy(np.arange(1, 2 * n, 2))).cast(pa.binary())


def _utf8(binary: pa.Array) -> pa.Array:
    try:
        return binary.cast(pa.string())
    except pa.ArrowInvalid:
        raise NotColumnar from None  # decoding with replacement is the row path's job


def _hosts(packed: np.ndarray) -> pa.Array:
    """`"ip:port"` of each IPv4 host (ip and port as one big-endian 8-byte value), formatted once per
    distinct host."""
    distinct, inverse = np.unique(packed, return_inverse=True)
    text = []
    for value in distinct.tolist():
        port = value & 0xFFFFFFFF
        text.append(format_host((value >> 32).to_bytes(4, "big"), port - (1 << 32) if port >= 1 << 31 else port))
    return pc.take(from_values(text, pa.string()), from_numpy(inverse.reshape(-1)))


def _msg_ids(headers: np.ndarray) -> pa.Array:
    """Offset msgIds: uppercase hex of store ip, port and physical offset, from each record's header
    bytes (one row each)."""
    store_host = headers[:, _STORE_HOST_POS:_STORE_HOST_POS + 8]
    raw = np.concatenate([store_host, headers[:, PHY_OFFSET_POS:PHY_OFFSET_POS + 8]], axis=1)
    n = len(headers)
    text = _HEX[raw].reshape(n, 2 * _MSG_ID_BYTES)
    offsets = np.arange(0, text.size + 1, 2 * _MSG_ID_BYTES, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(text.tobytes()))


def _same(text: str, n: int) -> pa.Array:
    """`text` in each of `n` rows: a slice of one array made once per text (a read has one broker per
    store), as `pa.repeat` copies the text into every row each time."""
    made = _SAME.get(text)
    if made is None or len(made) < n:
        if len(_SAME) >= _SAME_TEXTS:
            _SAME.clear()
        made = _SAME[text] = _repeated(text, max(n, BATCH_ROWS))
    return made.slice(0, n)


def _repeated(text: str, n: int) -> pa.Array:
    """`text` in each of `n` rows, built from its buffers (`pa.repeat` imports pandas on its first call,
    a quarter of a second of a process's first read)."""
    data = text.encode()
    offsets = np.arange(0, len(data) * n + 1, len(data) or 1, dtype=np.int32) if data else np.zeros(n + 1, np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data * n))


_SAME: dict[str, pa.Array] = {}
_SAME_TEXTS = 64
"""Texts `_SAME` keeps arrays of, at most (then it starts again): stores a process reads at once."""


_EMPTY = scalar("", pa.string())
_ZERO, _ONE, _TWO = (scalar(i, pa.int32()) for i in range(3))
_NUL = scalar("\x00", pa.string())


def _value_of(name: str, names: pa.Array, values: pa.Array, parents: np.ndarray, n: int) -> pa.Array:
    """Per row, the value of property `name` (null when the row has none)."""
    hit = bools(pc.equal(names, scalar(name, pa.string())))
    index = np.full(n, -1, dtype=np.int64)
    index[parents[hit]] = np.arange(int(hit.sum()))
    taken = from_numpy(index, valid=index >= 0)
    return pc.take(values.filter(from_numpy(hit)), taken)


def _split_keys(keys: pa.Array) -> pa.Array:
    """KEYS values -> lists of their non-empty space-separated tokens ([] for none)."""
    tokens = pc.split_pattern(pc.fill_null(keys, _EMPTY), props_codec.KEY_SEPARATOR)
    flat = tokens.flatten()
    parents = numpy_view(pc.list_parent_indices(tokens))
    keep = bools(pc.not_equal(flat, _EMPTY))
    counts = np.bincount(parents[keep], minlength=len(keys))
    offsets = np.zeros(len(keys) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(from_numpy(offsets), flat.filter(from_numpy(keep)))


def _properties(text: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
    """(properties map, TAGS, UNIQ_KEY, KEYS) per row, parsed with RocketMQ's rule."""
    n = len(text)
    segments = pc.split_pattern(text, props_codec.PROPERTY_SEPARATOR)
    flat = segments.flatten()
    parents = numpy_view(pc.list_parent_indices(segments))
    pairs = pc.split_pattern(flat, props_codec.NAME_VALUE_SEPARATOR, max_splits=1)
    paired = bools(pc.equal(pc.list_value_length(pairs), _TWO))  # a segment without U+0001 has no value
    pairs, parents = pairs.filter(from_numpy(paired)), parents[paired]
    names, values = pc.list_element(pairs, _ZERO), pc.list_element(pairs, _ONE)
    kept = bools(pc.and_(pc.not_equal(names, _EMPTY), pc.not_equal(values, _EMPTY)))
    names, values, parents = names.filter(from_numpy(kept)), values.filter(from_numpy(kept)), parents[kept]
    counts = np.bincount(parents, minlength=n)
    # a name given twice in one row moves to its later place: left to the row path
    row_names = pc.binary_join_element_wise(pc.cast(from_numpy(parents), pa.string()), names, _NUL)
    if pc.count_distinct(row_names).as_py() != len(row_names):
        raise NotColumnar
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    mapping = pa.MapArray.from_arrays(from_numpy(offsets), names, values)
    tags = _value_of(props_codec.TAGS, names, values, parents, n)
    uniq = _value_of(props_codec.UNIQ_KEY, names, values, parents, n)
    keys = _split_keys(_value_of(props_codec.KEYS, names, values, parents, n))
    return mapping, tags, uniq, keys


_PARSED = frozenset({"uniqKey", "tags", "keys", "properties"})
"""The columns made from the properties (by `record_columns` where it is compiled)."""

_record_columns = None if speedups is None else speedups.record_columns


def _numpy_route(built: frozenset[str] | None) -> bool:
    """Whether the columns `built` are gathered with numpy: without `record_columns`, or when none of
    them needs the properties parse it does for every record."""
    return _record_columns is None or (built is not None and not built & _PARSED)


@cache
def _schema_of(built: frozenset[str] | None) -> pa.Schema:
    """`ARROW_SCHEMA` with only the columns `built` (every column for None), in its order."""
    if built is None:
        return ARROW_SCHEMA
    return pa.schema([field for field in ARROW_SCHEMA if field.name in built])


def _columnar(messages: Sequence[StoredMessage], broker: str) -> pa.RecordBatch:
    raws = [m.raw for m in messages]
    buf = b"".join(raws)
    n = len(raws)
    sizes = np.fromiter(map(len, raws), dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(sizes[:-1], out=starts[1:])
    batch = columns_of(buf, starts, starts + sizes, broker)
    if batch is None:
        raise NotColumnar
    return batch


def columns_of(data: Any, starts: np.ndarray, ends: np.ndarray, broker: str) -> pa.RecordBatch | None:
    """The batch of the whole records at `[starts[i], ends[i])` of `data` (bytes or a mapped file),
    with the columns the read builds (`projection.building()`), or None when a record's lengths do not
    add up or a row is one these paths do not cover (the message path's to read)."""
    built = building()
    if _numpy_route(built):
        try:
            return _columnar_py(data, starts, ends - starts, broker, built)
        except NotColumnar:
            return None  # rows record_columns declines too
    buffers = _compiled(data, starts, ends)
    return None if buffers is None else _from_buffers(len(starts), buffers, broker, built)


def _compiled(data: Any, starts: np.ndarray, ends: np.ndarray) -> tuple[pa.Buffer, ...] | None:
    """`record_columns` of the records, or None where it declines or finds lengths that do not add up.
    Columns of 4 MiB or more are written into buffers of pyarrow's memory pool, which keeps the memory
    a batch let go of for the next one (bytes objects that large come from fresh pages of the C
    allocator, which the kernel faults in and zeroes); smaller ones are bytes objects, which the C
    allocator serves from memory the last batch freed, still in the cache."""
    assert _record_columns is not None
    try:
        result: tuple[pa.Buffer, ...] | None = _record_columns(data, np.ascontiguousarray(starts, dtype=np.int64),
                                                               np.ascontiguousarray(ends, dtype=np.int64),
                                                               pa.allocate_buffer)
    except (ValueError, OverflowError):
        return None
    return result


_FIXED = (("queueId", pa.int32()), ("queueOffset", pa.int64()), ("commitLogOffset", pa.int64()),
          ("storeSize", pa.int32()), ("flag", pa.int32()), ("sysFlag", pa.int32()), ("bornTimestamp", pa.int64()),
          ("storeTimestamp", pa.int64()), ("reconsumeTimes", pa.int32()), ("bodyCRC", pa.int32()))
"""The fixed-width columns record_columns returns first, in its order."""


_STRING, _BINARY, _INT32 = pa.string(), pa.binary(), pa.int32()
_KEY_LIST = pa.list_(_STRING)


@lru_cache(maxsize=8)
def _msg_id_offsets(n: int) -> pa.Buffer:
    """The offsets of `n` msgIds of 32 characters (a buffer batches share: Arrow's are immutable)."""
    return pa.py_buffer(np.arange(0, 32 * n + 1, 32, dtype=np.int32))


def _from_buffers(n: int, buffers: tuple[pa.Buffer | bytes, ...], broker: str,
                  built: frozenset[str] | None = None) -> pa.RecordBatch:
    """The record batch of `n` rows from the buffers of `record_columns` (see its order there), with
    the columns `built` (every column for None)."""
    b = [x if isinstance(x, pa.Buffer) else pa.py_buffer(x) for x in buffers]
    (topic_offsets, topic, msg_id, uniq_valid, uniq_offsets, uniq, tags_valid, tags_offsets, tags, keys_lists,
     keys_offsets, keys, entries, names_offsets, names, values_offsets, values, body_offsets, body, born_offsets,
     born, store_offsets, store) = b[len(_FIXED):]
    string = _STRING

    def key_list() -> pa.Array:
        children = [pa.Array.from_buffers(string, keys_offsets.size // 4 - 1, [None, keys_offsets, keys])]
        return pa.ListArray.from_buffers(_KEY_LIST, n, [None, keys_lists], children=children)

    def mapping() -> pa.Array:
        count = names_offsets.size // 4 - 1
        return pa.MapArray.from_arrays(pa.Array.from_buffers(_INT32, n + 1, [None, entries]),
                                       pa.Array.from_buffers(string, count, [None, names_offsets, names]),
                                       pa.Array.from_buffers(string, count, [None, values_offsets, values]))

    makers: dict[str, Callable[[], pa.Array]] = {
        "topic": lambda: pa.Array.from_buffers(string, n, [None, topic_offsets, topic]),
        "msgId": lambda: pa.Array.from_buffers(string, n, [None, _msg_id_offsets(n), msg_id]),
        "uniqKey": lambda: pa.Array.from_buffers(string, n, [uniq_valid, uniq_offsets, uniq]),
        "tags": lambda: pa.Array.from_buffers(string, n, [tags_valid, tags_offsets, tags]),
        "keys": key_list,
        "properties": mapping,
        "body": lambda: pa.Array.from_buffers(_BINARY, n, [None, body_offsets, body]),
        "bornHost": lambda: pa.Array.from_buffers(string, n, [None, born_offsets, born]),
        "storeHost": lambda: pa.Array.from_buffers(string, n, [None, store_offsets, store]),
        "broker": lambda: _same(broker, n),
    }
    for i, (name, kind) in enumerate(_FIXED):
        makers[name] = lambda kind=kind, i=i: pa.Array.from_buffers(kind, n, [None, b[i]])  # type: ignore[misc]
    schema = _schema_of(built)
    return pa.RecordBatch.from_arrays([makers[field.name]() for field in schema], schema=schema)


class RecordLayout:
    """Each record's header fields and where its variable parts lie (record v1 and v2 with IPv4 hosts),
    its lengths checked the way `record_columns` checks them (`NotColumnar` where they do not add up)."""

    def __init__(self, u8: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> None:
        if (sizes < MIN_RECORD_SIZE).any():
            raise NotColumnar
        self.raw = gather_rows(u8, starts, _BODY_POS)
        self.header = self.raw.view(_HEADER).reshape(-1)
        if (self.header["sysFlag"] & _HOST_BITS).any():
            raise NotColumnar  # IPv6 hosts move every later field
        magic = self.header["magic"]
        v2 = magic == MAGIC_V2
        if not (v2 | (magic == MAGIC_V1)).all():
            raise NotColumnar
        body_length = self.int("bodyLength", np.int64)
        topic_field = np.where(v2, 2, 1)
        if ((body_length < 0) | (_BODY_POS + body_length + topic_field > sizes)).any():
            raise NotColumnar
        self.body_begin = starts + _BODY_POS
        self.body_end = self.body_begin + body_length
        topic_length = np.empty(len(starts), dtype=np.int64)
        topic_length[v2] = _int16(u8, self.body_end[v2])
        topic_length[~v2] = _int8(u8, self.body_end[~v2])
        self.topic_begin = self.body_end + topic_field
        self.topic_end = self.topic_begin + topic_length
        props_length_pos = self.topic_end - starts
        if ((topic_length < 0) | (props_length_pos + 2 > sizes)).any():
            raise NotColumnar
        props_length = _int16(u8, self.topic_end)
        if (props_length_pos + 2 + props_length.clip(0) != sizes).any():
            raise NotColumnar
        self.props_begin = self.topic_end + 2

    def int(self, name: str, kind: type | None = None) -> np.ndarray:
        """The header field `name` of each record, in native order (or as `kind`)."""
        values = self.header[name]
        return values.astype(kind or values.dtype.newbyteorder("="))

    def array(self, name: str) -> pa.Array:
        return from_numpy(self.int(name))


def _columnar_py(data: Any, starts: np.ndarray, sizes: np.ndarray, broker: str,
                 built: frozenset[str] | None = None) -> pa.RecordBatch:
    """`_columnar` with numpy and Arrow compute (the twin of the compiled `record_columns`), making only
    the columns `built` (every column for None)."""
    u8 = np.frombuffer(data, dtype=np.uint8)
    buf = pa.py_buffer(data)
    at = RecordLayout(u8, starts, sizes)

    @cache
    def parsed() -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
        return _properties(_utf8(_slices(buf, at.props_begin, starts + sizes)))

    makers: dict[str, Callable[[], pa.Array]] = {
        "topic": lambda: _utf8(_slices(buf, at.topic_begin, at.topic_end)),
        "storeSize": lambda: from_numpy(sizes.astype(np.int32)),
        "msgId": lambda: _msg_ids(at.raw),
        "uniqKey": lambda: parsed()[2],
        "tags": lambda: parsed()[1],
        "keys": lambda: parsed()[3],
        "properties": lambda: parsed()[0],
        "body": lambda: _slices(buf, at.body_begin, at.body_end),
        "bornHost": lambda: _hosts(at.header["bornHost"]),
        "storeHost": lambda: _hosts(at.header["storeHost"]),
        "broker": lambda: _same(broker, len(starts)),
    }
    for name in ("queueId", "queueOffset", "commitLogOffset", "flag", "sysFlag", "bornTimestamp", "storeTimestamp",
                 "reconsumeTimes", "bodyCRC"):
        makers[name] = lambda name=name: at.array(name)  # type: ignore[misc]
    schema = _schema_of(built)
    arrays = [makers[field.name]() for field in schema]
    typed = [a if a.type == f.type else a.cast(f.type) for a, f in zip(arrays, schema, strict=True)]
    return pa.RecordBatch.from_arrays(typed, schema=schema)
