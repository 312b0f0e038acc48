"""A seeded generator of damaged stores, and the invariant recovery must hold on each.

A case is a store written with a small geometry (every file kind rolls over), left closed, killed
(copied while open: the kernel's view a kill -9 leaves) or copied while a writer goes on, then damaged
in one file of one kind. `check_case` opens it read-only and writable and asserts the invariant of
docs/recovery.md: every record in the log's valid range is reachable through its queue at its offset
and through each of its keys, or the recovery report names what was set aside; the next put to every
queue gets that queue's true next offset; `verify` finds nothing the report did not name; and nothing
raises but a `RocketStoreError`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import RocketStoreError
from rocketstore.format.consume_queue import UNIT_SIZE
from rocketstore.format.index import ENTRY_SIZE, HEADER_SIZE, SLOT_SIZE
from rocketstore.format.json_text import quote_integer_keys
from rocketstore.format.store_dirs import CONFIG_DIR, DERIVED_ENDS_FILE
from rocketstore.report.verify import verify_store

CONFIG = StoreConfig(commitlog_file_size=8 * 1024, consume_queue_file_entries=8, index_hash_slots=8,
                     index_max_entries=24)
QUEUES = (("A", 0), ("A", 1), ("B", 0), ("B", 1), ("C", 0))
MESSAGES = 90
STATE_FILES = ("consumerOffset.json", "topics.json", "delayOffset.json", "queueEnds.json", "rocketstore.json")
LEFT = ("closed", "killed", "copied")
UNRECORDED = 0.25
"""The share of cases whose record of queue and index ends is deleted (`Case.recorded`)."""
KINDS = ("commitlog", "consumequeue", "index", "checkpoint", "abort", "state")
DAMAGES = ("delete", "truncate0", "truncate_mid", "zero_fill", "flip", "wrong_size", "past_end", "other_record",
           "other_topic", "index_loop", "topic_bytes")


@dataclass(frozen=True)
class Acked:
    """A message whose put was acknowledged."""

    topic: str
    queue_id: int
    queue_offset: int
    phy_offset: int
    size: int
    body: bytes
    keys: tuple[str, ...]


@dataclass
class Case:
    seed: int
    left: str
    kind: str
    damage: str
    target: str = ""
    damaged_log: list[tuple[str, int, int]] = field(default_factory=list)
    """(commitlog file, start, end) of bytes changed in place in the log."""
    durable_end: int = 0
    """How far the log was on disk by the store's own record (config/derivedEnds.json) before the
    damage: a crash may lose what lies past it without a trace, as a power cut would."""
    recorded: bool = True
    """False: the store's record of its queue and index ends is deleted before the damage (a store
    RocketMQ wrote, or one that crashed before its first flush wrote the record)."""


def _message(rng: random.Random, i: int) -> tuple[str, int, Message]:
    topic, queue_id = QUEUES[rng.randrange(len(QUEUES))]
    body = b"m%04d-" % i + bytes(rng.randrange(256) for _ in range(rng.randrange(20, 220)))
    keys = (f"k{i}", f"g{i % 7}")
    return topic, queue_id, Message(topic, body, queue_id=queue_id, keys=keys, tags=f"t{i % 3}")


def _put(store: MessageStore, rng: random.Random, i: int, acked: list[Acked]) -> None:
    topic, queue_id, msg = _message(rng, i)
    r = store.put(msg)
    assert r.ok, r
    acked.append(Acked(topic, queue_id, r.queue_offset, r.phy_offset, r.size, msg.body, msg.keys))


def _copy_if_there(src: str, dst: str) -> None:
    """Copy a file of a store being written, as `cp -r` does: one gone since the listing (a new file
    staged in the root and linked in meanwhile) is left out."""
    with contextlib.suppress(FileNotFoundError):
        shutil.copy2(src, dst)


def write_store(root: Path, scratch: Path, case: Case, rng: random.Random) -> list[Acked]:
    """Write the store at `root` and leave it as `case.left` says; the acknowledged messages."""
    acked: list[Acked] = []
    live = scratch / "live"
    store = MessageStore.open(live, CONFIG)
    for i in range(MESSAGES):
        _put(store, rng, i, acked)
    store.commit_offset("G", "A", 0, 3)
    if case.left == "closed":
        store.close()
        shutil.copytree(live, root)
    elif case.left == "killed":
        shutil.copytree(live, root, ignore=shutil.ignore_patterns("lock"))
        store.close()
    else:
        stop = threading.Event()
        more: list[Acked] = []

        def writer() -> None:
            n = MESSAGES
            wrng = random.Random(case.seed + 1)
            while not stop.is_set() and n < MESSAGES + 400:
                _put(store, wrng, n, more)
                n += 1

        thread = threading.Thread(target=writer)
        thread.start()
        time.sleep(0.002)
        copied_from = len(more)
        shutil.copytree(live, root, ignore=shutil.ignore_patterns("lock"), copy_function=_copy_if_there)
        stop.set()
        thread.join()
        acked += more[:copied_from]  # acknowledged before the copy began
        store.close()
    shutil.rmtree(live)
    return acked


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name.isdigit()) if directory.is_dir() else []


def _rewrite(path: Path, change: Callable[[bytearray], bytearray | bytes]) -> None:
    path.write_bytes(bytes(change(bytearray(path.read_bytes()))))


def damage(root: Path, case: Case, rng: random.Random, acked: list[Acked]) -> None:
    """Apply `case.damage` to one file of `case.kind` (a damage that does not fit the kind falls back
    to flipped bytes)."""
    kind, how = case.kind, case.damage
    record = root / CONFIG_DIR / DERIVED_ENDS_FILE
    if not case.recorded:
        for path in (record, record.with_name(record.name + ".bak")):
            path.unlink(missing_ok=True)
    if record.exists():
        case.durable_end = int(json.loads(quote_integer_keys(record.read_text()))["logFlushed"])
    if kind == "abort":
        path = root / "abort"
        if path.exists() and how in ("delete", "truncate0"):
            path.unlink()
        else:
            path.write_bytes(b"")
        case.target = "abort"
        return
    if kind == "checkpoint":
        paths = [root / "checkpoint"]
    elif kind == "state":
        paths = [p for p in (root / CONFIG_DIR).glob("*.json")] if (root / CONFIG_DIR).is_dir() else []
    else:
        paths = _files(root / kind)
    if not paths:
        return
    path = paths[rng.randrange(len(paths))]
    case.target = str(path.relative_to(root))
    size = path.stat().st_size
    if how == "delete":
        path.unlink()
    elif how == "truncate0":
        os.truncate(path, 0)
    elif how == "truncate_mid":
        os.truncate(path, rng.randrange(1, max(2, size)))
    elif how == "zero_fill":
        start = rng.randrange(size) if size else 0
        _rewrite(path, lambda b: b[:start] + bytes(len(b) - start))
        _note_log(case, path, start, size)
    elif how == "wrong_size":
        with path.open("ab") as f:
            f.write(b"\x01" * rng.randrange(1, 100))
    elif how == "past_end" and kind == "consumequeue":
        _set_entry(path, rng, lambda unit: struct.pack(">q", 1 << 40) + unit[8:])
    elif how == "other_record" and kind == "consumequeue" and acked:
        other = acked[rng.randrange(len(acked))]
        _set_entry(path, rng, lambda unit: struct.pack(">qi", other.phy_offset, other.size) + unit[12:])
    elif how == "other_topic" and kind == "consumequeue" and acked:
        other = next((a for a in acked if a.topic not in case.target), acked[0])
        _set_entry(path, rng, lambda unit: struct.pack(">qi", other.phy_offset, other.size) + unit[12:])
    elif how == "index_loop" and kind == "index":
        _index_loop(path, rng)
    elif how == "topic_bytes" and kind == "commitlog" and acked:
        _topic_bytes(root, path, case, acked)
    elif how == "past_end" and kind == "index":
        _rewrite(path, lambda b: _slot_past(b, rng))
    else:
        start = rng.randrange(size) if size else 0
        length = min(size - start, rng.randrange(1, 16))
        _rewrite(path, lambda b: b[:start] + bytes(x ^ 0xFF for x in b[start:start + length]) + b[start + length:])
        _note_log(case, path, start, start + length)


def _note_log(case: Case, path: Path, start: int, end: int) -> None:
    if case.kind == "commitlog" and end > start:
        case.damaged_log.append((path.name, start, end))


def _set_entry(path: Path, rng: random.Random, change: Callable[[bytes], bytes]) -> None:
    data = bytearray(path.read_bytes())
    written = [n for n in range(len(data) // UNIT_SIZE) if any(data[n * UNIT_SIZE:(n + 1) * UNIT_SIZE])]
    if not written:
        return
    n = written[-1] if rng.random() < 0.5 else written[rng.randrange(len(written))]
    data[n * UNIT_SIZE:(n + 1) * UNIT_SIZE] = change(bytes(data[n * UNIT_SIZE:(n + 1) * UNIT_SIZE]))
    path.write_bytes(bytes(data))


def _slot_past(data: bytearray, rng: random.Random) -> bytearray:
    """A hash slot pointing one past the last entry."""
    count = struct.unpack_from(">i", data, 36)[0]
    pos = HEADER_SIZE + rng.randrange(CONFIG.index_hash_slots) * SLOT_SIZE
    struct.pack_into(">i", data, pos, count)
    return data


def _index_loop(path: Path, rng: random.Random) -> None:
    """An entry whose prev link points at itself or forward (a chain that would loop)."""
    data = bytearray(path.read_bytes())
    count = struct.unpack_from(">i", data, 36)[0]
    if count <= 2:
        return
    n = rng.randrange(1, count)
    base = HEADER_SIZE + CONFIG.index_hash_slots * SLOT_SIZE + n * ENTRY_SIZE
    struct.pack_into(">i", data, base + 16, rng.choice((n, count - 1)))
    path.write_bytes(bytes(data))


def _topic_bytes(root: Path, path: Path, case: Case, acked: list[Acked]) -> None:
    """Rewrite a record's topic in place (the CRC covers the body only) to another topic's name."""
    start = int(path.name)
    inside = [a for a in acked if start <= a.phy_offset < start + CONFIG.commitlog_file_size]
    if not inside:
        return
    a = inside[len(inside) // 2]
    pos = a.phy_offset - start
    data = bytearray(path.read_bytes())
    body_len_pos = pos + 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 8 + 4 + 8 + 4  # RocketMQ v1 header
    body_len = struct.unpack_from(">i", data, body_len_pos)[0]
    topic_pos = body_len_pos + 4 + body_len + 1
    other = "B" if a.topic != "B" else "C"
    data[topic_pos:topic_pos + 1] = other.encode()
    path.write_bytes(bytes(data))
    case.damaged_log.append((path.name, pos, pos + a.size))


def make_case(seed: int) -> Case:
    rng = random.Random(seed)
    left, kind, how = rng.choice(LEFT), rng.choice(KINDS), rng.choice(DAMAGES)
    return Case(seed, left, kind, how, recorded=rng.random() >= UNRECORDED)


def _guard(case: Case, what: str, call: Callable[[], object]) -> object:
    """`call()`, which may refuse with a RocketStoreError (returned) but raise nothing else."""
    try:
        return call()
    except RocketStoreError as exc:
        return exc
    except Exception as exc:
        raise AssertionError(f"{case}: {what} raised a bare {type(exc).__name__}: {exc}") from exc


def check_case(root: Path, case: Case, acked: list[Acked]) -> None:
    """Open the damaged store read-only, then writable (with `repair` when a plain open refuses), and
    assert the invariant: the next put to every queue gets its true next offset; every acknowledged
    record is served, or set aside by the report, or `verify` says the store is damaged, and then
    `rocketstore recover` (a repairing open) restores the whole invariant."""
    ro = _guard(case, "read-only open", lambda: MessageStore.open(root, CONFIG, read_only=True))
    if isinstance(ro, MessageStore):
        for a in acked[:: max(1, len(acked) // 10)]:
            _guard(case, "read-only get", lambda a=a: ro.get(a.topic, a.queue_id, a.queue_offset, 1))
            _guard(case, "read-only query", lambda a=a: ro.query(a.topic, a.keys[0]))
        ro.close()
    opened = _guard(case, "writable open", lambda: MessageStore.open(root, CONFIG))
    repaired = not isinstance(opened, MessageStore)
    if repaired:
        opened = _guard(case, "repairing open", lambda: MessageStore.open(root, CONFIG, repair=True))
        assert isinstance(opened, MessageStore), f"{case}: recover refused: {opened}"
    assert isinstance(opened, MessageStore)
    missed = _check_store(opened, case, acked, after=0)
    problems = _unexplained(root, case, acked)
    if (missed or problems) and not repaired:
        assert problems, f"{case}: verify reports clean, but {missed[0]}"
        store = _guard(case, "repairing open", lambda: MessageStore.open(root, CONFIG, repair=True))
        assert isinstance(store, MessageStore), f"{case}: recover refused: {store}"
        missed = _check_store(store, case, acked, after=1)
        problems = _unexplained(root, case, acked)
    assert not missed, missed[0]
    assert not problems, f"{case}: verify found {problems[:5]} after recover"


def _unexplained(root: Path, case: Case, acked: list[Acked]) -> list[object]:
    """What `verify` finds that the case's damage does not explain: bytes changed in place in a record
    of the log (a field no CRC covers, or a record in a file before the ones recovery walks) are for
    verify to find, in the record and in the queue and index entries that point at it."""
    result = _guard(case, "verify", lambda: verify_store(root, CONFIG))
    assert not isinstance(result, Exception), f"{case}: verify refused: {result}"
    damaged = _damaged_records(case, acked)
    holes = {(a.topic, a.queue_id, a.queue_offset) for a in acked if a.phy_offset in damaged}
    times_damaged = any(int(name) + start < a.phy_offset + STORE_TIME_END and a.phy_offset + STORE_TIME_POS
                        < int(name) + end for a in acked for name, start, end in case.damaged_log)
    return [p for p in result.problems if not _in_damaged_log(case, p.file, p.pos)
            and not any(f"record at {phy}" in p.message or f"at {phy}:" in p.message for phy in damaged)
            and not _around_hole(p.message, holes)
            and not (times_damaged and p.file.startswith("index/")
                     and ("begins after it ends" in p.message or "time" in p.message))]


STORE_TIME_POS, STORE_TIME_END = 56, 64
"""A v1 record's STORETIMESTAMP (no CRC covers it): a rewritten one puts its index file's header
times out of order, or its entries outside them, which `verify` names."""


def _around_hole(message: str, holes: set[tuple[str, int, int]]) -> bool:
    """A finding that a queue's offsets in the log skip the offset of a record whose queue fields were
    damaged ("T/0 queue offset 13 follows 11"): the log itself has the hole."""
    found = re.match(r"(\S+)/(-?\d+) queue offset (-?\d+) follows (-?\d+)", message)
    if found is None:
        return False
    topic, queue_id, offset, before = found[1], int(found[2]), int(found[3]), int(found[4])
    return any((topic, queue_id, q) in holes for q in range(before + 1, offset)) or \
        any(t == topic and qid == queue_id for t, qid, _ in holes) and (offset < 0 or before < 0)


def _damaged_records(case: Case, acked: list[Acked]) -> set[int]:
    return {a.phy_offset for a in acked for name, start, end in case.damaged_log
            if int(name) + start < a.phy_offset + a.size and a.phy_offset < int(name) + end}


def _in_damaged_log(case: Case, file: str, pos: int) -> bool:
    """A verify finding at bytes the case changed in place in the log."""
    return any(file.endswith(name) and start - 4096 <= pos < end for name, start, end in case.damaged_log)


def _set_aside(store: MessageStore, case: Case, a: Acked) -> bool:
    """The report names where the record went: past the recovered end (quarantined or removed with
    its file), or left out of its queue."""
    report = store.recovery
    if a.phy_offset + a.size > report.end_offset:
        if case.left != "closed" and a.phy_offset + a.size > case.durable_end:
            return True  # never on disk by the store's word: a crash may lose it as a power cut would
        # the log lost it: the report shows the cut (after a clean close, a queue cut back is a loss the
        # report is not clean about; after a crash it is what a power cut leaves)
        return bool(report.quarantined or report.commitlog_files_removed or report.odd_files or report.lost
                    or report.queues_truncated) and not (report.mode.value == "normal" and report.clean)
    return any(s.startswith(f"{a.phy_offset}:") for s in report.dispatch_skipped)


def _check_store(store: MessageStore, case: Case, acked: list[Acked], *, after: int) -> list[str]:
    """Check the open store, then close it: the next put to every queue must get its true next offset
    (asserted); the acknowledged records neither served nor set aside by the report are returned.
    `after`: how many puts earlier checks made on each queue."""
    try:
        report = store.recovery
        truth: dict[tuple[str, int], int] = {}
        damaged = _damaged_records(case, acked)
        by_phy = {a.phy_offset: a for a in acked}
        skipped = {int(s.split(":", 1)[0]) for s in report.dispatch_skipped}
        for msg in store.scan():
            a = by_phy.get(msg.phy_offset)
            if a is not None and msg.phy_offset in damaged and (msg.topic, msg.queue_id, msg.queue_offset) != (
                    a.topic, a.queue_id, a.queue_offset):
                continue  # its queue fields were damaged (no CRC covers them)
            if msg.phy_offset not in skipped and msg.topic in {t for t, _ in QUEUES}:
                key = (msg.topic, msg.queue_id)
                truth[key] = max(truth.get(key, -1), msg.queue_offset)
        missed = [m for a in acked if a.phy_offset >= store.min_phy_offset and a.phy_offset not in damaged
                  and not _set_aside(store, case, a) for m in _missed(store, case, a)]
        for topic, queue_id in QUEUES:
            expected = truth.get((topic, queue_id), -1) + 1
            assert store.max_offset(topic, queue_id) == expected, (
                f"{case}: {topic}/{queue_id} max offset {store.max_offset(topic, queue_id)}, the log says {expected}; "
                f"recovery said {report.to_dict()}")
            r = store.put(Message(topic, b"after", queue_id=queue_id, keys=("after",)))
            assert r.ok and r.queue_offset == expected, f"{case}: the next put to {topic}/{queue_id} got {r}"
        return [f"{m}; recovery said {report.to_dict()}" for m in missed]
    finally:
        store.close()


def _missed(store: MessageStore, case: Case, a: Acked) -> list[str]:
    """What of an acknowledged record the store does not serve."""
    missed = []
    got = _guard(case, "get", lambda: store.get(a.topic, a.queue_id, a.queue_offset, 1))
    if isinstance(got, Exception) or not (got.messages and got.messages[0].phy_offset == a.phy_offset
                                          and got.messages[0].body == a.body):
        missed.append(f"{case}: {a.topic}/{a.queue_id} offset {a.queue_offset} (log {a.phy_offset}) not served: "
                      f"{got if isinstance(got, Exception) else got.status}")
    for key in a.keys:
        found = _guard(case, "query", lambda key=key: store.query(a.topic, key, max_count=64))
        if isinstance(found, Exception) or a.phy_offset not in {m.phy_offset for m in found}:
            missed.append(f"{case}: key {key} of log {a.phy_offset} not found ({found})")
    return missed
