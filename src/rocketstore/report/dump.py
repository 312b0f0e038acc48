"""Annotated decode of one store file: commitlog records, consume-queue entries, index header, slots and
entries, or the checkpoint; every item with its byte position in the file.

Read-only (the file is mapped with `mmap.ACCESS_READ`) and decoded only with `rocketstore.format`.
The kind of file is told by where it lies in the store: `commitlog/`, `consumequeue/<topic>/<queue>/`,
`index/` or `checkpoint`.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rocketstore.errors import CorruptRecordError
from rocketstore.format import consume_queue as cq_format
from rocketstore.format import index as index_format
from rocketstore.format.checkpoint import Checkpoint
from rocketstore.format.filenames import name_to_offset
from rocketstore.format.message import (
    BLANK_MAGIC,
    END_OF_FILE,
    MAGIC_V1,
    MAGIC_V2,
    NEED_DATA,
    StoredMessage,
    body_crc,
    decode_message,
    peek_prefix,
)
from rocketstore.format.store_dirs import CHECKPOINT_FILE, COMMITLOG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR, queue_id_of
from rocketstore.format.sysflag import SysFlag
from rocketstore.report._files import mapped as _mapped

MAGIC_NAMES = {MAGIC_V1: "MESSAGE_V1", MAGIC_V2: "MESSAGE_V2", BLANK_MAGIC: "BLANK"}


class FileKind(str, enum.Enum):
    COMMITLOG = COMMITLOG_DIR
    CONSUME_QUEUE = CONSUME_QUEUE_DIR
    INDEX = INDEX_DIR
    CHECKPOINT = CHECKPOINT_FILE


class DumpError(ValueError):
    """The file is not a store file this dump understands, or the position is outside it."""


def file_kind(store: Path, file: Path) -> tuple[FileKind, str]:
    """The kind of `file` and its path relative to `store`.

    Raises:
        DumpError: the file is not inside the store, or is not a store data file.
    """
    try:
        rel = file.resolve().relative_to(store.resolve())
    except ValueError:
        raise DumpError(f"{file} is not inside the store {store}") from None
    parts = rel.parts
    if parts == (CHECKPOINT_FILE,):
        return FileKind.CHECKPOINT, rel.as_posix()
    if len(parts) == 2 and parts[0] == COMMITLOG_DIR and name_to_offset(parts[1]) is not None:
        return FileKind.COMMITLOG, rel.as_posix()
    if (len(parts) == 4 and parts[0] == CONSUME_QUEUE_DIR and queue_id_of(parts[2]) is not None
            and name_to_offset(parts[3]) is not None):
        return FileKind.CONSUME_QUEUE, rel.as_posix()
    if len(parts) == 2 and parts[0] == INDEX_DIR and parts[1].isdigit():
        return FileKind.INDEX, rel.as_posix()
    raise DumpError(f"{rel.as_posix()} is not a commitlog, consume-queue, index or checkpoint file")


def _sys_flag_names(sys_flag: int) -> list[str]:
    names = []
    transaction = sys_flag & SysFlag.TRANSACTION_ROLLBACK
    if transaction:
        names.append(SysFlag(transaction).name or hex(transaction))
    for bit in (SysFlag.COMPRESSED, SysFlag.MULTI_TAGS, SysFlag.BORNHOST_V6, SysFlag.STOREHOST_V6,
                SysFlag.NEED_UNWRAP, SysFlag.INNER_BATCH):
        if sys_flag & bit:
            names.append(bit.name or hex(bit))
    return names


def _message_item(message: StoredMessage, pos: int, file_start: int) -> dict[str, Any]:
    body = message.body
    return {
        "pos": pos, "kind": "message", "size": message.size, "magic": MAGIC_NAMES[message.magic],
        "phy_offset": message.phy_offset, "phy_offset_ok": message.phy_offset == file_start + pos,
        "body_crc": message.body_crc, "body_crc_ok": body_crc(body) == message.body_crc,
        "queue_id": message.queue_id, "flag": message.flag, "queue_offset": message.queue_offset,
        "sys_flag": message.sys_flag, "sys_flag_names": _sys_flag_names(message.sys_flag),
        "born_timestamp": message.born_timestamp, "born_host": message.born_host,
        "store_timestamp": message.store_timestamp, "store_host": message.store_host,
        "reconsume_times": message.reconsume_times,
        "prepared_transaction_offset": message.prepared_transaction_offset,
        "body_length": len(body), "topic": message.topic, "properties": message.properties,
        "msg_id": message.msg_id,
    }


def _commitlog_items(buf: Any, pos: int, file_start: int) -> Iterator[dict[str, Any]]:
    while True:
        prefix = peek_prefix(buf, pos)
        if prefix is None or prefix == (0, 0):
            yield {"pos": pos, "kind": "end", "reason": "end of the written data (zero bytes)"}
            return
        try:
            result = decode_message(buf, pos)
        except CorruptRecordError as exc:
            yield {"pos": pos, "kind": "corrupt", "size": prefix[0], "reason": exc.reason}
            return
        if result is END_OF_FILE:
            yield {"pos": pos, "kind": "blank", "size": prefix[0], "magic": MAGIC_NAMES[BLANK_MAGIC],
                   "size_ok": prefix[0] == len(buf) - pos}
            return
        if result is NEED_DATA:
            yield {"pos": pos, "kind": "corrupt", "size": prefix[0], "reason": "record runs past the end of the file"}
            return
        yield _message_item(result, pos, file_start)
        pos += result.size


def _unit_state(unit: cq_format.CqUnit) -> str:
    if unit == (0, 0, 0):
        return "empty"
    return "filler" if unit.filler else "entry"


def _cq_items(buf: Any, pos: int, file_start: int) -> Iterator[dict[str, Any]]:
    for item_pos in range(pos, len(buf) - cq_format.UNIT_SIZE + 1, cq_format.UNIT_SIZE):
        unit = cq_format.unpack_unit(buf, item_pos)
        state = _unit_state(unit)
        yield {"pos": item_pos, "kind": state, "queue_offset": (file_start + item_pos) // cq_format.UNIT_SIZE,
               "phy_offset": unit.phy_offset, "size": unit.size, "tags_code": unit.tags_code}
        if state == "empty":
            return


def _index_items(buf: Any, pos: int, slots: int, header: index_format.IndexHeader) -> Iterator[dict[str, Any]]:
    """Non-empty slots from `pos` on, then entries (entries only when `pos` is in the entry area)."""
    entries_start = index_format.entry_pos(0, slots)
    first_slot = max(0, -(-(pos - index_format.HEADER_SIZE) // index_format.SLOT_SIZE))
    for slot in range(first_slot, slots if pos < entries_start else 0):
        slot_pos = index_format.HEADER_SIZE + slot * index_format.SLOT_SIZE
        (head,) = index_format.SLOT.unpack_from(buf, slot_pos)
        if head:
            yield {"pos": slot_pos, "kind": "slot", "slot": slot, "entry": head}
    first = max(index_format.FIRST_ENTRY, -(-(pos - entries_start) // index_format.ENTRY_SIZE))
    for n in range(first, header.index_count):
        entry_pos = index_format.entry_pos(n, slots)
        if entry_pos + index_format.ENTRY_SIZE > len(buf):
            return
        key_hash, phy_offset, time_diff, prev = index_format.ENTRY.unpack_from(buf, entry_pos)
        yield {"pos": entry_pos, "kind": "entry", "entry": n, "key_hash": key_hash, "slot": key_hash % slots,
               "phy_offset": phy_offset, "time_diff_s": time_diff,
               "timestamp": header.begin_timestamp + time_diff * 1000, "prev_entry": prev}


def _take(items: Iterator[dict[str, Any]], count: int | None) -> tuple[list[dict[str, Any]], int | None]:
    """Up to `count` items, and the position of the next one (None when the items ran out)."""
    taken: list[dict[str, Any]] = []
    for item in items:
        if count is not None and len(taken) == count:
            return taken, item["pos"]
        taken.append(item)
    return taken, None


def dump_file(store: Path, file: Path, *, at: int = 0, count: int | None = 50,
              index_hash_slots: int | None = None) -> dict[str, Any]:
    """Decode `file` of the store at `store` from byte `at`, at most `count` items.

    Args:
        index_hash_slots: slots per index file (needed for index files; the store's geometry).

    Returns:
        {"file", "kind", "file_size", "at", "header" (index, checkpoint), "items", "next_pos"}.

    Raises:
        DumpError: not a store file, or `at` outside the file.
        OSError: the file cannot be read.
    """
    kind, rel = file_kind(store, file)
    size = file.stat().st_size
    if not 0 <= at <= size:
        raise DumpError(f"--at {at} is outside {rel} ({size} bytes)")
    document: dict[str, Any] = {"file": rel, "kind": kind.value, "file_size": size, "at": at}
    with _mapped(file) as buf:
        if kind is FileKind.CHECKPOINT:
            document["header"] = _checkpoint_fields(buf)
            items: Iterator[dict[str, Any]] = iter(())
        elif kind is FileKind.COMMITLOG:
            items = _commitlog_items(buf, at, name_to_offset(file.name) or 0)
        elif kind is FileKind.CONSUME_QUEUE:
            if at % cq_format.UNIT_SIZE:
                raise DumpError(f"--at {at} is not a multiple of the {cq_format.UNIT_SIZE}-byte entry size")
            items = _cq_items(buf, at, name_to_offset(file.name) or 0)
        else:
            items = _index_document(buf, at, index_hash_slots, document)
        document["items"], document["next_pos"] = _take(items, count)
    return document


def _index_document(buf: Any, at: int, slots: int | None, document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    if len(buf) < index_format.HEADER_SIZE:
        raise DumpError(f"{document['file']} is shorter than an index header")
    header = index_format.IndexHeader.unpack(buf)
    document["header"] = {
        "begin_timestamp": header.begin_timestamp, "end_timestamp": header.end_timestamp,
        "begin_phy_offset": header.begin_phy_offset, "end_phy_offset": header.end_phy_offset,
        "hash_slot_count": header.hash_slot_count, "index_count": header.index_count,
    }
    if slots is None:
        raise DumpError("index files need the store's index geometry (--index-hash-slots)")
    document["header"]["hash_slots"] = slots
    return _index_items(buf, at, slots, header)


def _checkpoint_fields(buf: Any) -> dict[str, Any]:
    checkpoint = Checkpoint.unpack(bytes(buf[:64]))
    return {
        "physic_msg_timestamp": checkpoint.physic_msg_timestamp,
        "logics_msg_timestamp": checkpoint.logics_msg_timestamp,
        "index_msg_timestamp": checkpoint.index_msg_timestamp,
        "master_flushed_offset": checkpoint.master_flushed_offset,
        "confirm_phy_offset": checkpoint.confirm_phy_offset,
    }
