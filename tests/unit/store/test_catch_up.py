"""Recovery's catch-up rebuilds the consume queues and the index a store wrote, byte for byte, through the
compiled request builder and through its Python twin alike: several topics and queues, delayed messages
(SCHEDULE_TOPIC_XXXX, whose requests the twin builds), transactions, keys, UNIQ_KEY, text beyond ASCII,
files rolled over."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.store_dirs import CONSUME_QUEUE_DIR, INDEX_DIR
from rocketstore.format.sysflag import SysFlag
from rocketstore.native import speedups
from rocketstore.services import dispatch

CONFIG = StoreConfig(commitlog_file_size=64 * 1024, consume_queue_file_entries=64, index_hash_slots=13,
                     index_max_entries=300, deliver_delayed_messages=False)


def _files(root: Path, name: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / name).rglob("*")) if p.is_file()}


def _index(root: Path) -> list[bytes]:
    """The index files' bytes in name order (their names are the times they were created)."""
    return [p.read_bytes() for p in sorted((root / INDEX_DIR).iterdir())]


def _written(root: Path) -> None:
    with MessageStore.open(root, CONFIG) as store:
        for i in range(900):
            kind = i % 6
            if kind == 0:
                message = Message("SCHEDULE_SOURCE", b"later %d" % i, properties={"DELAY": str(1 + i % 18)},
                                  keys=(f"d{i}",))
            elif kind == 1:
                message = Message("Orders", b"o" * (i % 50), queue_id=i % 4, tags="TagA",
                                  keys=(f"order-{i}", "", f"c{i % 7}"), properties={"UNIQ_KEY": f"U{i:08X}"})
            elif kind == 2:
                message = Message("Pay_ments", b"p", queue_id=i % 2, tags="é€😀", keys=("ü key",))
            elif kind == 3:
                message = Message("Orders", b"half", queue_id=1, keys=(f"t{i}",),
                                  sys_flag=int(SysFlag.TRANSACTION_PREPARED))
            elif kind == 4:
                message = Message("Orders", b"", queue_id=2, properties={"KEYS": "  spaced   keys "})
            else:
                message = Message("Plain", b"x" * 200)
            if i % 3:
                store.put(message)
            else:
                store.put_batch([message, Message("Plain", b"batch %d" % i, tags="B")])


@pytest.mark.parametrize("builder", ["compiled", "twin"])
def test_the_catch_up_rebuilds_what_the_store_wrote(tmp_path, monkeypatch, builder):
    if builder == "compiled" and (speedups is None or dispatch._dispatch_packed is dispatch.dispatch_packed_py):
        pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
    if builder == "twin":
        monkeypatch.setattr(dispatch, "_dispatch_packed", dispatch.dispatch_packed_py)
        monkeypatch.setattr(dispatch, "_dispatch_requests", dispatch.dispatch_requests_py)
        monkeypatch.setattr(dispatch, "_pack_requests", dispatch.pack_requests_py)
    original = tmp_path / "original"
    _written(original)
    queues, index = _files(original, CONSUME_QUEUE_DIR), _index(original)
    assert len(list((original / "commitlog").iterdir())) > 2 and any("SCHEDULE_TOPIC_XXXX" in p for p in queues)
    copy = tmp_path / "copy"
    shutil.copytree(original, copy)
    shutil.rmtree(copy / CONSUME_QUEUE_DIR)
    shutil.rmtree(copy / INDEX_DIR)
    with MessageStore.open(copy, CONFIG) as store:
        report = store.recovery
    assert report.queue_entries_dispatched > 0 and report.index_records_dispatched > 0
    assert _files(copy, CONSUME_QUEUE_DIR) == queues
    assert len(index) > 2 and _index(copy) == index


def _ranges(commitlog: Any) -> list[tuple[int, int]]:
    """(start, end) pairs of a written log: starts at records, ends at a record start, inside a record,
    just before one, at and past a file's end, at the last record, at and past the log's end."""
    starts = [m.phy_offset for m in commitlog.scan()]
    ends = [starts[40], starts[40] + 3, starts[300] - 1, CONFIG.commitlog_file_size,
            CONFIG.commitlog_file_size + 17, starts[-1], commitlog.max_offset, commitlog.max_offset + 100]
    return [(start, end) for start in (starts[0], starts[7], starts[250]) for end in ends if end > start]


def test_the_requests_of_a_range_are_those_of_the_records_scan_gives(tmp_path):
    """`requests_from(..., end)` (the Spark rebuild's ranges) gives the requests of exactly the records
    `CommitLog.scan(start, end)` gives: those starting before `end`, also when `end` falls inside a
    record or past a file's data, and when the compiled run goes past `end`."""
    root = tmp_path / "store"
    _written(root)
    delays = CONFIG.delay_level_millis()
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        commitlog = store.commitlog
        for start, end in _ranges(commitlog):
            for batch in (3, 1024):
                got = [r for run in dispatch.requests_from(commitlog, start, delays, batch, end) for r in run]
                expected = [dispatch.request_from_message(m, delays) for m in commitlog.scan(start, end)]
                assert got == expected, (start, end, batch)


Flat = tuple[dict[tuple[str, int], list[tuple[int, bytes]]], list[tuple[int, bytes]], list[bool]]


def _flat(packs: list[tuple[list, list]]) -> Flat:
    """Per queue its (queue offset, unit) entries, the (store time, key) index keys and each group's
    `ends_keyless` (the last only), from packed runs and groups in log order, however they were cut into batches."""
    queues: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    keys: list[tuple[int, bytes]] = []
    keyless: list[bool] = []
    for runs, groups in packs:
        for key, first, units, _, _ in runs:
            queues.setdefault(key, []).extend((first + i, bytes(units[20 * i:20 * i + 20]))
                                              for i in range(len(units) // 20))
        for store_timestamp, packed_keys, ends_keyless, _ in groups:
            keys.extend((store_timestamp, bytes(packed_keys[i:i + 16])) for i in range(0, len(packed_keys), 16))
            keyless.append(ends_keyless)
    return queues, keys, keyless[-1:]


def test_the_packed_dispatch_of_a_range_is_that_of_the_records_ending_by_its_end(tmp_path):
    """`packed_from(..., end)` (the Spark rebuild's ranges) packs exactly the records that end by `end`
    (a range cut at a record start: those starting before it), whatever the batch and wherever `end`
    falls: at a record start, inside a record, past a file's data, past the log's end."""
    root = tmp_path / "store"
    _written(root)
    delays = CONFIG.delay_level_millis()
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        commitlog = store.commitlog
        for start, end in _ranges(commitlog):
            records = [m for m in commitlog.scan(start, end) if m.phy_offset + m.size <= end]
            assert records
            expected = _flat([dispatch.pack_requests_py(
                [dispatch.request_from_message(m, delays) for m in records], 0, 0, True)])
            for batch in (3, 1024):
                got = _flat([(p.runs, p.groups)
                             for p in dispatch.packed_from(commitlog, start, delays, batch, 0, 0, True, end)])
                assert got == expected, (start, end, batch)
