"""Torn tails and bit flips: recovery stops at the last whole record, moves the rest aside byte for byte,
and the store goes on at the right offsets."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from rocketstore import FlushMode, MessageStore, RecoveryMode
from rocketstore.format.message import StoredMessage
from rocketstore.format.properties import encode_properties
from rocketstore.format.store_dirs import QUARANTINE_DIR
from rocketstore.storage import fs

from .faults import commitlog_files, cut_at, flip_bit, make_abort
from .workload import Ack, body_for, check_store, crash_config, message_for, seq_of

pytestmark = pytest.mark.crash

CONFIG = crash_config(FlushMode.ASYNC)
TORN_RECORDS = 2
FLIPS = 80


@pytest.fixture(autouse=True)
def _page_cache_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests damage files themselves; forcing bytes to the disk would only make them slow."""
    monkeypatch.setattr(fs, "fsync_fd", lambda fd: None)
    monkeypatch.setattr(fs, "msync", lambda mm, start, end: None)


@pytest.fixture(scope="module")
def base_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[StoredMessage]]:
    """A cleanly closed store whose last records sit in its second commitlog file."""
    root = tmp_path_factory.mktemp("torn") / "base"
    with MessageStore.open(root, CONFIG) as store:
        seq = 0
        while store.max_phy_offset < CONFIG.commitlog_file_size + 3000:
            assert store.put(message_for(seq)).ok
            seq += 1
        for _ in range(TORN_RECORDS):  # short last records keep the number of cut points small
            while len(body_for(seq)) > 40:
                seq += 1
            assert store.put(message_for(seq)).ok
            seq += 1
        records = list(store.scan())
    assert len(commitlog_files(root)) == 2
    return root, records


def _copy(base: Path, dest: Path) -> Path:
    shutil.copytree(base, dest)
    return dest


def _acks(records: list[StoredMessage]) -> dict[int, Ack]:
    return {seq_of(m): Ack(seq_of(m), m.phy_offset, m.queue_offset, m.size) for m in records}


def _check_goes_on(store: MessageStore, end: int) -> None:
    """New puts land at the recovered end with the next queue offset."""
    msg = message_for(100_000)
    expected_queue_offset = store.max_offset(msg.topic, msg.queue_id)
    result = store.put(msg)
    assert result.ok and result.phy_offset == end
    assert result.queue_offset == expected_queue_offset
    assert store.message_at(end).body == msg.body


def _restored(root: Path, store: MessageStore, path: Path) -> bytes:
    """The commitlog file as recovery left it, with every quarantined range put back."""
    data = bytearray(path.read_bytes())
    for q in store.recovery.quarantined:
        if q.source == path.name:
            saved = Path(q.saved_to).read_bytes()
            assert len(saved) == q.length and Path(q.saved_to).parent == root / QUARANTINE_DIR
            data[q.position:q.position + q.length] = saved
    return bytes(data)


@pytest.mark.parametrize("abnormal", [True, False], ids=["abort-file", "clean-marker"])
def test_every_cut_point_in_the_last_records_recovers_to_the_last_whole_record(base_store, tmp_path, abnormal):
    base, records = base_store
    last_file = commitlog_files(base)[-1]
    file_from = int(last_file.name)
    original = last_file.read_bytes()
    torn = records[-TORN_RECORDS:]
    cuts = range(torn[0].phy_offset, torn[-1].phy_offset + torn[-1].size)
    if not abnormal:
        cuts = cuts[::5]
    for cut in cuts:
        k = next(i for i, m in enumerate(records) if m.phy_offset + m.size > cut)
        start = records[k].phy_offset
        root = _copy(base, tmp_path / f"cut-{cut}")
        path = commitlog_files(root)[-1]
        cut_at(path, cut - file_from)
        if abnormal:
            make_abort(root)
        with MessageStore.open(root, CONFIG) as store:
            report = store.recovery
            assert report.mode is (RecoveryMode.ABNORMAL if abnormal else RecoveryMode.NORMAL)
            assert report.end_offset == start == store.max_phy_offset, f"cut at {cut}"
            assert report.queues_truncated, "the queue entry of the torn record pointed past the end"
            kept = original[start - file_from:cut - file_from].rstrip(b"\0")
            if kept:
                (q,) = report.quarantined
                assert (q.source, q.position, Path(q.saved_to).read_bytes()) == (path.name, start - file_from, kept)
            else:
                assert report.quarantined == []
            assert path.read_bytes()[start - file_from:] == bytes(len(original) - (start - file_from))
            check_store(store, _acks(records[:k]))
            _check_goes_on(store, start)


def _body_range(msg: StoredMessage) -> range:
    """Positions of the body inside the record, derived from the record's own fields."""
    props_len = len(encode_properties(msg.properties).encode("utf-8")) if msg.properties_string else 0
    body_end = msg.size - 2 - props_len - 1 - len(msg.topic.encode("utf-8"))
    return range(body_end - len(msg.body), body_end)


def test_random_bit_flips_stop_recovery_at_the_damaged_record_or_keep_every_record(base_store, tmp_path):
    """A flip the format can detect (size, magic, body CRC, offsets, a torn end) ends the log at the
    damaged record; one it cannot (RocketMQ 4.9.8 has no header CRC) changes one field of one record.
    Either way no byte is lost and every other record is intact."""
    base, records = base_store
    rng = random.Random(7)
    files = {int(p.name): p.name for p in commitlog_files(base)}
    original_end = records[-1].phy_offset + records[-1].size
    candidates = range(len(records) - 6, len(records))
    detected = 0
    for trial in range(FLIPS):
        k = rng.choice(candidates)
        victim = records[k]
        offset_in_record = rng.randrange(victim.size)
        phy = victim.phy_offset + offset_in_record
        file_from = max(f for f in files if f <= phy)
        root = _copy(base, tmp_path / f"flip-{trial}")
        path = root / "commitlog" / files[file_from]
        flip_bit(path, phy - file_from, rng.randrange(8))
        damaged = path.read_bytes()
        make_abort(root)
        with MessageStore.open(root, CONFIG) as store:
            end = store.recovery.end_offset
            assert end in (victim.phy_offset, original_end), f"flip at {phy}: recovery ended at {end}"
            if offset_in_record in _body_range(victim):
                assert end == victim.phy_offset, "a body flip must fail the CRC check"
            assert _restored(root, store, path) == damaged, "recovery destroyed bytes"
            if end == victim.phy_offset:
                detected += 1
                check_store(store, _acks(records[:k]))
            else:
                stored = list(store.scan())
                assert [m.phy_offset for m in stored] == [m.phy_offset for m in records]
                assert [m.raw for m in stored if m.phy_offset != victim.phy_offset] == \
                    [m.raw for m in records if m.phy_offset != victim.phy_offset]
            _check_goes_on(store, store.max_phy_offset)
    assert detected > FLIPS // 2, "most random flips hit the body or a checked field"


def test_a_second_crash_at_the_same_place_keeps_both_quarantined_copies(base_store, tmp_path):
    base, records = base_store
    root = _copy(base, tmp_path / "twice")
    path = commitlog_files(root)[-1]
    file_from = int(path.name)
    last = records[-1]
    cut_at(path, last.phy_offset + last.size // 2 - file_from)
    first_tail = path.read_bytes()[last.phy_offset - file_from:].rstrip(b"\0")
    make_abort(root)
    with MessageStore.open(root, CONFIG) as store:
        assert len(store.recovery.quarantined) == 1
        store.put(message_for(500_000))
        raw = store.message_at(last.phy_offset).raw
    cut_at(path, last.phy_offset + len(raw) // 3 - file_from)
    second_tail = path.read_bytes()[last.phy_offset - file_from:].rstrip(b"\0")
    make_abort(root)
    with MessageStore.open(root, CONFIG) as store:
        (q,) = store.recovery.quarantined
        assert Path(q.saved_to).read_bytes() == second_tail
    saved = {p.name: p.read_bytes() for p in (root / QUARANTINE_DIR).iterdir()}
    position = last.phy_offset - file_from
    assert saved == {f"{path.name}.{position}.bin": first_tail, f"{path.name}.{position}.1.bin": second_tail}


def test_records_moved_aside_never_come_back_after_a_later_crash(base_store, tmp_path):
    """A damaged first record of a file: the whole rest of the file is quarantined and cleared, so a
    new record of the same size at the same place cannot make the old ones after it valid again."""
    base, records = base_store
    root = _copy(base, tmp_path / "resurrect")
    path = commitlog_files(root)[-1]
    file_from = int(path.name)
    first = next(m for m in records if m.phy_offset == file_from)
    later = [m for m in records if m.phy_offset > file_from]
    assert later, "the last file must hold more than its first record"
    flip_bit(path, _body_range(first)[0], 0)
    make_abort(root)
    with MessageStore.open(root, CONFIG) as store:
        assert store.recovery.end_offset == file_from
        again = store.put(message_for(seq_of(first)))  # same message, same size, same place
        assert (again.phy_offset, again.size) == (file_from, first.size)
    make_abort(root)  # crash after the put
    with MessageStore.open(root, CONFIG) as store:
        assert store.recovery.end_offset == file_from + first.size
        assert [m.phy_offset for m in store.scan(file_from)] == [file_from]
