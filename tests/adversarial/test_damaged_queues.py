"""Damaged consume queues are rebuilt from the commitlog, their bytes quarantined, and reported.

A queue whose first 40 bytes were flipped was once "recovered" into an empty queue: the next put took
queue offset 0 again (two records then claimed T/0 offset 0) and recovery reported clean.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import StoreLayoutError
from rocketstore.format.consume_queue import UNIT_SIZE
from rocketstore.format.store_dirs import CONFIG_DIR, DERIVED_ENDS_FILE, QUARANTINE_DIR
from rocketstore.report.verify import verify_store

ENTRIES = 10  # per consume-queue file
CONFIG = StoreConfig(commitlog_file_size=64 * 1024, consume_queue_file_entries=ENTRIES, index_hash_slots=64,
                     index_max_entries=256)
PER_QUEUE = 35  # four files in T/0, the last one half full


def _write(root: Path) -> dict[tuple[str, int], list[bytes]]:
    bodies: dict[tuple[str, int], list[bytes]] = {}
    with MessageStore.open(root, CONFIG) as store:
        for i in range(PER_QUEUE * 3):
            topic, queue_id = ("T", i % 2) if i % 3 else ("U", 0)
            body = b"m%04d-" % i + b"x" * (i % 50)
            assert store.put(Message(topic, body, queue_id=queue_id, tags=f"t{i % 3}", keys=(f"k{i}",))).ok
            bodies.setdefault((topic, queue_id), []).append(body)
    return bodies


def _queue_file(root: Path, n: int, topic: str = "T", queue_id: int = 0) -> Path:
    return root / "consumequeue" / topic / str(queue_id) / f"{n * ENTRIES * UNIT_SIZE:020d}"


def _flip(path: Path, start: int, length: int) -> None:
    data = bytearray(path.read_bytes())
    for i in range(start, start + length):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _zero(path: Path, start: int, length: int) -> None:
    data = bytearray(path.read_bytes())
    data[start:start + length] = bytes(length)
    path.write_bytes(bytes(data))


def _set_phy(path: Path, entry: int, phy: int) -> None:
    data = bytearray(path.read_bytes())
    data[entry * UNIT_SIZE:entry * UNIT_SIZE + 8] = phy.to_bytes(8, "big", signed=True)
    path.write_bytes(bytes(data))


def _swap_entries(path: Path, a: int, b: int) -> None:
    data = bytearray(path.read_bytes())
    ea, eb = data[a * UNIT_SIZE:(a + 1) * UNIT_SIZE], data[b * UNIT_SIZE:(b + 1) * UNIT_SIZE]
    data[a * UNIT_SIZE:(a + 1) * UNIT_SIZE], data[b * UNIT_SIZE:(b + 1) * UNIT_SIZE] = eb, ea
    path.write_bytes(bytes(data))


DAMAGES: dict[str, Callable[[Path], list[Path]]] = {
    "first 40 bytes flipped": lambda r: (_flip(_queue_file(r, 0), 0, 40), [_queue_file(r, 0)])[1],
    "middle of a middle file flipped": lambda r: (_flip(_queue_file(r, 1), 95, 30), [_queue_file(r, 1)])[1],
    "last file's first entry flipped": lambda r: (_flip(_queue_file(r, 3), 0, 20), [_queue_file(r, 3)])[1],
    "zeroed hole": lambda r: (_zero(_queue_file(r, 0), 3 * UNIT_SIZE, 2 * UNIT_SIZE), [_queue_file(r, 0)])[1],
    "entry past the log end mid-queue": lambda r: (_set_phy(_queue_file(r, 1), 4, 1 << 40), [_queue_file(r, 1)])[1],
    "two entries swapped": lambda r: (_swap_entries(_queue_file(r, 2), 0, 9), [_queue_file(r, 2)])[1],
    "first entry of a file points at another record": lambda r: (
        _set_phy(_queue_file(r, 2), 0, int.from_bytes(_queue_file(r, 1).read_bytes()[-20:-12], "big")),
        [_queue_file(r, 2)])[1],
    "a middle file deleted": lambda r: (_queue_file(r, 1).unlink(), [])[1],
    "a file truncated": lambda r: (_queue_file(r, 2).write_bytes(_queue_file(r, 2).read_bytes()[:77]),
                                   [_queue_file(r, 2)])[1],
    "a file extended": lambda r: (_queue_file(r, 1).write_bytes(_queue_file(r, 1).read_bytes() + b"\0" * 20),
                                  [_queue_file(r, 1)])[1],
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_damaged_queue_is_rebuilt_from_the_log(tmp_path, damage):
    root = tmp_path / "store"
    bodies = _write(root)
    damaged = {p.name: p.read_bytes() for p in DAMAGES[damage](root)}

    with MessageStore.open(root, CONFIG) as store:
        rebuilt = store.recovery.queues_rebuilt
        assert [(q.topic, q.queue_id) for q in rebuilt] == [("T", 0)], store.recovery.to_dict()
        assert not store.recovery.clean
        for (topic, queue_id), expected in bodies.items():
            assert (store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)) == (0, len(expected))
            got = [m.body for m in store.iter_queue(topic, queue_id)]
            assert got == expected, (topic, queue_id)
            assert [m.queue_offset for m in store.iter_queue(topic, queue_id)] == list(range(len(expected)))
        after = store.put(Message("T", b"after", queue_id=0))
        assert after.queue_offset == len(bodies[("T", 0)])
        saved = Path(rebuilt[0].saved_to)
    assert verify_store(root, CONFIG).ok
    quarantined = {p.name.split(".")[0]: p.read_bytes() for p in saved.iterdir()}
    for name, data in damaged.items():
        assert quarantined[name] == data
    with MessageStore.open(root, CONFIG) as store:  # the next open finds nothing more to do
        assert store.recovery.clean and not store.recovery.queues_rebuilt


def test_a_torn_last_entry_is_not_damage(tmp_path):
    """An entry crossing a page boundary may be half on disk after a power cut: the queue ends there
    and the catch-up writes the entry again. (Such an entry was written after the last flush, so the
    record of queue ends, config/derivedEnds.json, does not vouch for it: here the store is left as a
    crash before any flush leaves it, with no record.)"""
    root = tmp_path / "store"
    bodies = _write(root)
    for name in (DERIVED_ENDS_FILE, DERIVED_ENDS_FILE + ".bak"):
        (root / CONFIG_DIR / name).unlink(missing_ok=True)
    last = _queue_file(root, 3)
    entries = len(bodies[("T", 0)]) - 3 * ENTRIES
    _zero(last, (entries - 1) * UNIT_SIZE + 8, 12)  # the last entry's size and tags code lost
    with MessageStore.open(root, CONFIG) as store:
        assert store.recovery.clean, store.recovery.to_dict()
        assert [m.body for m in store.iter_queue("T", 0)] == bodies[("T", 0)]


def test_a_read_only_open_of_a_queue_with_a_missing_file_names_recover(tmp_path):
    root = tmp_path / "store"
    _write(root)
    _queue_file(root, 1).unlink()
    with pytest.raises(StoreLayoutError, match="rocketstore recover"):
        MessageStore.open(root, CONFIG, read_only=True)


def test_quarantine_keeps_earlier_copies(tmp_path):
    root = tmp_path / "store"
    _write(root)
    first = _queue_file(root, 0)
    _flip(first, 0, 40)
    MessageStore.open(root, CONFIG).close()
    _flip(first, 0, 40)
    MessageStore.open(root, CONFIG).close()
    folder = root / QUARANTINE_DIR / "consumequeue" / "T" / "0"
    assert len([p for p in folder.iterdir() if p.name.startswith(first.name)]) == 2
    shutil.rmtree(folder)


def test_verify_tells_puts_left_behind_their_dispatch_from_queues_that_lost_entries(tmp_path):
    """A copy of an ASYNC store taken while puts were ahead of the dispatch (as a crash leaves it): the
    tail of records in no queue and no index is `undispatched`, not a problem; the same records missing
    from their queue before an indexed, queued record are problems."""
    root, copy = tmp_path / "live", tmp_path / "copy"
    # no queue flush pass while the directory is copied: it would dispatch the puts behind mid-copy
    with MessageStore.open(root, dataclasses.replace(CONFIG, flush_consume_queue_interval_ms=3_600_000)) as store:
        for i in range(20):
            assert store.put(Message("T", b"m%d" % i, keys=(f"k{i}",))).ok
        store.max_offset("T", 0)  # the first 20 dispatched
        behind = [store.put(Message("T", b"b%d" % i, keys=(f"b{i}",))) for i in range(5)]
        assert store._writes.behind_to > store._writes.dispatched_to
        shutil.copytree(root, copy)
    result = verify_store(copy, CONFIG)
    assert result.ok, result.problems
    assert (result.undispatched, result.undispatched_from) == (5, behind[0].phy_offset)
    assert verify_store(root, CONFIG).undispatched == 0  # closed: dispatched
    with MessageStore.open(copy, CONFIG) as reopened:  # the copy's open dispatches them
        assert [m.body for m in reopened.query("T", "b4")] == [b"b4"]
    assert verify_store(copy, CONFIG).undispatched == 0
    middle = _queue_file(root, 1)  # entries 10-19 of T/0: lost, with records after them in the queue
    middle.write_bytes(bytes(middle.stat().st_size))
    damaged = verify_store(root, CONFIG)
    assert not damaged.ok and damaged.undispatched == 0
    assert sum("is in no consume queue" in p.message for p in damaged.problems) == 15  # and 20-24, after the gap
