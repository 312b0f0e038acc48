"""The write loop of a batch put: prepared messages turned into commitlog records for one file.

`pack_run(prepared, i, stop, phy, room, store_ts, queue_table, store_ip, store_port, per_queue,
index_keys, placed)` takes the messages `prepared[i:stop]` in order while their records fit in
`room` bytes (the free bytes of the commitlog file less the room its closing blank record needs), the
first starting at physical offset `phy`, all with store timestamp `store_ts` (a batch takes one, as
RocketMQ's putMessages gives a batch one). For each message it:

- takes the next queue offset of its (topic, queue id) from `queue_table` when it gets a queue entry,
  and appends the entry's 20-byte unit (phy, size, tags code) to `per_queue[queue_key]`, a pair
  (the queue offset of the queue's first entry in the batch, bytearray of units) started when the
  batch meets the queue: the batch's entries of a queue have consecutive queue offsets and records
  that follow one another in the log, which `ConsumeQueue.put_units` takes in one write per file;
- appends its index keys (`log.index_service.index_keys_of`: UNIQ_KEY and KEYS with their index
  hashes, as `IndexFile.put_keys` takes them) to the bytearray `index_keys` when it gets index entries
  (the twin hashes the keys of its messages together at the end);
- appends (phy, queue offset, store_ts) to `placed`;
- encodes its record: the header (MAGIC_V1, the born timestamp or else `store_ts`, the store host),
  the body, and the prepared tail.

It returns `(next, records)`: the index of the first message not taken and the records' bytes. The
compiled `rocketstore._speedups.pack_run` runs the same loop; it stops before a message it does not
take (a delayed message, whose tags code is its delivery time, or a value outside its header field),
and then this twin runs for that message (and raises the encoder's error for a value out of range). It
also stops before the first message of a seventeenth queue (it keeps the queues of a call in a small
table and writes their next offsets back at the end); the next call goes on from there.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketstore import kernels
from rocketstore.format.consume_queue import pack_unit
from rocketstore.format.message import MAGIC_V1
from rocketstore.log.index_service import index_keys_of
from rocketstore.services.dispatch import delivery_tags_code
from rocketstore.store.prepare import Prepared

__all__ = ["BatchRun", "PerQueue", "encode_record", "pack_run", "pack_run_py"]

PerQueue = dict[tuple[str, int], tuple[int, bytearray]]
"""Each queue's entries of a batch: the queue offset of the first, their 20-byte units."""


def encode_record(p: Prepared, phy: int, queue_offset: int, store_ts: int, store_ip: bytes, store_port: int) -> bytes:
    """The commitlog record of the prepared message `p` at physical offset `phy`, in one copy: the header
    (MAGIC_V1, the born timestamp or else `store_ts`, the store host), the body, the prepared tail. The
    one encoder of a record in Python (the compiled loop writes the same fields from the generated layout)."""
    (_, queue_id, _, body, body_crc, head, tail, flag, _, record_sys_flag, born_timestamp, born_ip, born_port,
     reconsume_times, prepared_offset, size, _, _, _, _, _, _, _) = p  # Prepared's fields in order
    return b"".join((head.pack(  # `+` would copy the body twice
        size, MAGIC_V1, body_crc, queue_id, flag, queue_offset, phy, record_sys_flag,
        store_ts if born_timestamp is None else born_timestamp, born_ip, born_port, store_ts,
        store_ip, store_port, reconsume_times, prepared_offset, len(body)), body, tail))


def pack_run_py(prepared: list[Prepared], i: int, stop: int, phy: int, room: int, store_ts: int,
                queue_table: dict[tuple[str, int], int], store_ip: bytes, store_port: int, per_queue: PerQueue,
                index_keys: bytearray, placed: list[tuple[int, int, int]],
                delay_millis: list[int] | None = None) -> tuple[int, bytes]:
    """The loop in pure Python (see the module's text); `delay_millis` gives a delayed message's
    delivery time (required when one is among the messages)."""
    parts: list[bytes] = []
    keyed: list[tuple[str, int, tuple[str, ...], str | None]] = []
    used = 0
    while i < stop:
        p = prepared[i]
        (topic, _, queue_key, _, _, _, _, _, _, _, _, _, _, _, _, size, _, in_queue, indexed, delay_level,
         tags_code, keys, uniq_key) = p  # Prepared's fields in order (test_prepared_order.py)
        if used + size > room:
            break
        if in_queue:
            queue_offset = queue_table.get(queue_key, 0)
            queue_table[queue_key] = queue_offset + 1
            if delay_level:
                assert delay_millis is not None, "a delayed message needs the delay levels"
                tags_code = delivery_tags_code(store_ts, delay_level, delay_millis)
            run = per_queue.get(queue_key)
            if run is None:
                run = per_queue[queue_key] = (queue_offset, bytearray())
            run[1].extend(pack_unit(phy, size, tags_code))
        else:
            queue_offset = 0
        if indexed:
            keyed.append((topic, phy, keys, uniq_key))
        parts.append(encode_record(p, phy, queue_offset, store_ts, store_ip, store_port))
        placed.append((phy, queue_offset, store_ts))
        phy += size
        used += size
        i += 1
    index_keys.extend(index_keys_of(keyed))  # hashed in one go: numpy's batch where nothing is compiled
    return i, b"".join(parts)


pack_run: Callable[..., tuple[int, bytes]] | None = kernels.pack_run
"""The compiled loop, None without the compiled module (callers then run `pack_run_py`)."""


class BatchRun:
    """The runs of one batch: what each run needs (the batch's store timestamp, the store's queue table,
    host and delay levels) and what the runs made (each queue's entries, the packed index keys, and
    where each record went: (phy, queue offset, store timestamp))."""

    __slots__ = ("delay_millis", "index_keys", "per_queue", "placed", "queue_table", "store_ip", "store_port",
                 "store_ts")

    def __init__(self, store_ts: int, queue_table: dict[tuple[str, int], int], store_ip: bytes, store_port: int,
                 delay_millis: list[int]) -> None:
        self.store_ts = store_ts
        self.queue_table = queue_table
        self.store_ip = store_ip
        self.store_port = store_port
        self.delay_millis = delay_millis
        self.per_queue: PerQueue = {}
        self.index_keys = bytearray()
        self.placed: list[tuple[int, int, int]] = []

    def fill(self, prepared: list[Prepared], i: int, stop: int, phy: int, room: int) -> tuple[int, bytes]:
        """Pack `prepared[i:stop]` while the records fit `room` bytes from physical offset `phy`: the
        compiled loop, and the twin for each message it declines. Returns the index of the first message
        not taken (`i`: the first does not fit) and the records' bytes, for one write."""
        args = (self.store_ts, self.queue_table, self.store_ip, self.store_port, self.per_queue, self.index_keys,
                self.placed)
        if pack_run is None:
            return pack_run_py(prepared, i, stop, phy, room, *args, self.delay_millis)
        parts: list[bytes] = []
        while True:
            i, records = pack_run(prepared, i, stop, phy, room, *args)
            if i == stop and not parts:
                return i, records  # the usual: the compiled loop took them all
            parts.append(records)
            phy, room = phy + len(records), room - len(records)
            if i == stop or prepared[i].size > room:
                return i, b"".join(parts)
            kernels.declined("pack_run")
            i, records = pack_run_py(prepared, i, i + 1, phy, room, *args, self.delay_millis)  # one it declined
            parts.append(records)
            phy, room = phy + len(records), room - len(records)
            if i == stop:
                return i, b"".join(parts)
