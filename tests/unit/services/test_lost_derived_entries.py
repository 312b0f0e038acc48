"""Consume queues and index files that lost entries are rebuilt from the log at the next open: no
queue offset is given out twice, no key is lost (docs/recovery.md, "Lost entries").

Each test is one reported case; tests/adversarial/test_damage_invariant.py holds the same invariant
over generated damage.
"""

from __future__ import annotations

import os
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import IndexDamagedError
from rocketstore.format.consume_queue import UNIT_SIZE
from rocketstore.format.store_dirs import CONFIG_DIR, DERIVED_ENDS_FILE
from rocketstore.report.verify import verify_store

CONFIG = StoreConfig(commitlog_file_size=1 << 20)


def _write(root: Path) -> None:
    with MessageStore.open(root, CONFIG) as store:
        for i in range(10):
            store.put(Message("T", b"old-%d" % i))
        store.put(Message("Other", b"other"))


def _queue_file(root: Path) -> Path:
    return root / "consumequeue" / "T" / "0" / f"{0:020d}"


def _zero_fill(path: Path) -> None:
    path.write_bytes(bytes(path.stat().st_size))


LOSSES: dict[str, Callable[[Path], None]] = {
    "directory removed": lambda root: shutil.rmtree(root / "consumequeue" / "T"),
    "file removed": lambda root: _queue_file(root).unlink(),
    "file truncated to 0": lambda root: os.truncate(_queue_file(root), 0),
    "file zero-filled": lambda root: _zero_fill(_queue_file(root)),
    "file cut mid-entry": lambda root: os.truncate(_queue_file(root), 4 * UNIT_SIZE + 7),
}


@pytest.mark.parametrize("loss", LOSSES)
def test_a_queue_that_lost_entries_is_rebuilt_and_its_offsets_are_not_reused(tmp_path, loss):
    root = tmp_path / "store"
    _write(root)
    LOSSES[loss](root)
    with MessageStore.open(root, CONFIG) as store:
        assert not store.recovery.clean
        assert [(q.topic, q.queue_id) for q in store.recovery.queues_rebuilt] == [("T", 0)]
        assert store.max_offset("T", 0) == 10
        assert [m.body for m in store.iter_queue("T", 0)] == [b"old-%d" % i for i in range(10)]
        assert store.put(Message("T", b"new")).queue_offset == 10
    assert verify_store(root, CONFIG).ok
    with MessageStore.open(root, CONFIG) as store:
        assert store.recovery.clean, "the next open finds nothing more to do"


@pytest.mark.parametrize("backup", [False, True])
def test_without_the_record_the_walked_records_are_checked(tmp_path, backup):
    """A store with no record of its queue ends (written by RocketMQ, or the record lost, its older
    backup kept or not) checks its queues against the records of the files recovery walks."""
    root = tmp_path / "store"
    _write(root)
    if not backup:
        (root / CONFIG_DIR / (DERIVED_ENDS_FILE + ".bak")).unlink()
    (root / CONFIG_DIR / DERIVED_ENDS_FILE).unlink()
    shutil.rmtree(root / "consumequeue" / "T")
    with MessageStore.open(root, CONFIG) as store:
        assert store.max_offset("T", 0) == 10
        assert store.put(Message("T", b"new")).queue_offset == 10
    assert (root / CONFIG_DIR / DERIVED_ENDS_FILE).exists(), "the open records the ends it found"


def test_a_last_entry_pointing_past_the_log_end_is_written_again(tmp_path):
    root = tmp_path / "store"
    _write(root)
    with _queue_file(root).open("r+b") as f:
        f.seek(9 * UNIT_SIZE)
        f.write(struct.pack(">q", 1 << 19))  # inside the file, past the log's end
    with MessageStore.open(root, CONFIG) as store:
        assert store.max_offset("T", 0) == 10
        assert store.get("T", 0, 9, 1).messages[0].body == b"old-9"
        assert store.put(Message("T", b"new")).queue_offset == 10
    assert verify_store(root, CONFIG).ok


def test_the_keys_of_the_record_across_an_index_file_boundary_survive_a_dropped_file(tmp_path):
    """13 records of two keys each fill index files of 23 entries: record 11's keys straddle the
    boundary. The last record is torn, its index file dropped: record 11 keeps both keys."""
    root = tmp_path / "store"
    config = StoreConfig(commitlog_file_size=1 << 20, index_hash_slots=8, index_max_entries=24)
    with MessageStore.open(root, config) as store:
        results = [store.put(Message("T", b"body-%d" % i, keys=("common", f"k{i}"))) for i in range(13)]
    last = results[-1]
    with (root / "commitlog" / f"{0:020d}").open("r+b") as f:
        f.seek(last.phy_offset + last.size - 10)
        f.write(bytes(10))
    with MessageStore.open(root, config) as store:
        assert store.recovery.index_files_dropped
        assert sorted(m.queue_offset for m in store.query("T", "common")) == list(range(12))
        for i in range(12):
            assert [m.queue_offset for m in store.query("T", f"k{i}")] == [i]
    assert verify_store(root, config).ok


def test_a_clean_reopen_adds_no_index_entry(tmp_path):
    """The catch-up starts at the record the index ends with and adds only the keys it lacks."""
    root = tmp_path / "store"
    config = StoreConfig(commitlog_file_size=1 << 20, index_hash_slots=8, index_max_entries=24)
    with MessageStore.open(root, config) as store:
        for i in range(13):
            store.put(Message("T", b"body-%d" % i, keys=("common", f"k{i}")))
    before = {p.name: p.read_bytes() for p in (root / "index").iterdir()}
    for _ in range(2):
        with MessageStore.open(root, config) as store:
            assert store.recovery.index_records_dispatched == 0
    assert {p.name: p.read_bytes() for p in (root / "index").iterdir()} == before


def test_an_index_file_that_lost_entries_is_indexed_again(tmp_path):
    root = tmp_path / "store"
    config = StoreConfig(commitlog_file_size=1 << 20, index_hash_slots=8, index_max_entries=24)
    with MessageStore.open(root, config) as store:
        for i in range(30):
            store.put(Message("T", b"body-%d" % i, keys=("common", f"k{i}")))
    oldest = sorted((root / "index").iterdir())[0]
    oldest.unlink()
    with MessageStore.open(root, config) as store:
        assert oldest.name in store.recovery.index_files_dropped or store.recovery.index_records_dispatched
        for i in range(30):
            assert [m.queue_offset for m in store.query("T", f"k{i}")] == [i]
    assert verify_store(root, config).ok


INDEX_LOSSES: dict[str, Callable[[Path], None]] = {
    "removed": lambda path: path.unlink(),
    "truncated to 0": lambda path: os.truncate(path, 0),
    "zero-filled": _zero_fill,
}


@pytest.mark.parametrize("loss", INDEX_LOSSES)
@pytest.mark.parametrize("record", ["none", "backup only"])
def test_without_the_record_an_index_file_lost_between_others_is_indexed_again(tmp_path, loss, record):
    """With no record of the index files' ends (a store RocketMQ wrote, one that crashed before its
    first flush wrote the record, or only the record's older backup left), a lost index file leaves
    keys between two files' entries that no file holds: the open finds them in the log, drops the
    files from there on, and indexes their records again. Each file in turn, the oldest included."""
    config = StoreConfig(commitlog_file_size=1 << 20, index_hash_slots=8, index_max_entries=24)
    written = tmp_path / "written"
    with MessageStore.open(written, config) as store:
        for i in range(80):
            store.put(Message("T", b"body-%d" % i, keys=(f"k{i}",)))
    if record == "backup only":
        (written / CONFIG_DIR / DERIVED_ENDS_FILE).write_text("{not json")
    else:
        for name in (DERIVED_ENDS_FILE, DERIVED_ENDS_FILE + ".bak"):
            (written / CONFIG_DIR / name).unlink(missing_ok=True)
    files = sorted((written / "index").iterdir())
    assert len(files) >= 3
    for n in range(len(files)):
        root = tmp_path / f"lost{n}"
        shutil.copytree(written, root)
        INDEX_LOSSES[loss](root / "index" / files[n].name)
        with MessageStore.open(root, config) as store:
            assert store.recovery.index_files_dropped or store.recovery.index_records_dispatched
            missed = [i for i in range(80) if [m.queue_offset for m in store.query("T", f"k{i}")] != [i]]
            assert not missed, f"file {n} of {len(files)} {loss}: keys of records {missed} not found"
        assert verify_store(root, config).ok


def test_a_damaged_geometry_record_is_set_aside_when_the_geometry_is_given(tmp_path):
    root = tmp_path / "store"
    _write(root)
    (root / CONFIG_DIR / "rocketstore.json").write_bytes(b"\x00garbage")
    with MessageStore.open(root, CONFIG) as store:
        assert [p.file for p in store.recovery.state_files] == ["config/rocketstore.json"]
        assert store.max_offset("T", 0) == 10
    assert list((root / "quarantine" / CONFIG_DIR).glob("rocketstore.json.damaged*"))
    with MessageStore.open(root) as store:  # the record is whole again
        assert store.recovery.clean and store.config.commitlog_file_size == 1 << 20


def test_recover_sets_aside_the_commitlog_files_after_a_missing_one(tmp_path):
    root = tmp_path / "store"
    config = StoreConfig(commitlog_file_size=4096)
    with MessageStore.open(root, config) as store:
        for i in range(100):
            store.put(Message("T", b"x" * 100, keys=(f"k{i}",)))
    files = sorted((root / "commitlog").iterdir())
    assert len(files) >= 4
    files[1].unlink()
    with MessageStore.open(root, config, repair=True) as store:
        assert [f.file for f in store.recovery.odd_files] == [f"commitlog/{p.name}" for p in files[2:]]
        assert store.max_phy_offset == 4096 and store.max_offset("T", 0) == store.put(Message("T", b"n")).queue_offset
    assert all((root / "quarantine" / "commitlog-files" / p.name).exists() for p in files[2:])


def test_a_rewritten_store_time_does_not_hide_the_keys_of_its_index_file(tmp_path):
    """No CRC covers a record's store time: one rewritten to a negative time is the begin time of its
    index file, and every key there would read as stored before 1970. A query without a time range
    filters nothing by time."""
    root = tmp_path / "store"
    config = StoreConfig(commitlog_file_size=1 << 20, index_hash_slots=8, index_max_entries=24)
    with MessageStore.open(root, config) as store:
        for i in range(5):
            store.put(Message("T", b"body-%d" % i, keys=(f"k{i}",)))
    with (root / "commitlog" / f"{0:020d}").open("r+b") as f:
        f.seek(56)  # the first record's STORETIMESTAMP (v1 layout)
        f.write(struct.pack(">q", -1_795_761_980_768))
    for name in ("index", "consumequeue"):
        shutil.rmtree(root / name)  # built again from the log, the damaged time first
    (root / CONFIG_DIR / DERIVED_ENDS_FILE).unlink()
    with MessageStore.open(root, config) as store:
        for i in range(5):
            assert [m.queue_offset for m in store.query("T", f"k{i}")] == [i]


def test_a_damaged_index_file_is_dropped_and_indexed_again_by_a_writable_open(tmp_path):
    """A hash slot naming an entry past the file's count: the lookup raises IndexDamagedError (never a
    bare error), and the next writable open drops the file with the newer ones and indexes them again."""
    root = tmp_path / "store"
    config = StoreConfig(commitlog_file_size=1 << 20, index_hash_slots=8, index_max_entries=24)
    with MessageStore.open(root, config) as store:
        for i in range(30):
            store.put(Message("T", b"body-%d" % i, keys=(f"k{i}",)))
    oldest = sorted((root / "index").iterdir())[0]
    data = bytearray(oldest.read_bytes())
    count = struct.unpack_from(">i", data, 36)[0]
    for slot in range(8):
        struct.pack_into(">i", data, 40 + 4 * slot, count + 1)
    oldest.write_bytes(bytes(data))
    with MessageStore.open(root, config, read_only=True) as store, pytest.raises(IndexDamagedError):
        store.query("T", "k0")
    with MessageStore.open(root, config) as store:
        assert oldest.name in store.recovery.index_files_dropped
        for i in range(30):
            assert [m.queue_offset for m in store.query("T", f"k{i}")] == [i]
    assert verify_store(root, config).ok


def test_a_record_with_a_negative_queue_offset_is_left_out_of_its_rebuilt_queue(tmp_path):
    """No CRC covers QUEUEOFFSET: a record whose field reads negative is listed in `dispatch_skipped`
    when its queue is rebuilt, never given a queue file named by a negative offset."""
    root = tmp_path / "store"
    _write(root)
    with (root / "commitlog" / f"{0:020d}").open("r+b") as f:
        f.seek(20)  # the first record's QUEUEOFFSET (v1 layout)
        f.write(struct.pack(">q", -(1 << 40)))
    shutil.rmtree(root / "consumequeue" / "T")
    with MessageStore.open(root, CONFIG) as store:
        assert [s.split(":")[0] for s in store.recovery.dispatch_skipped] == ["0"]
        assert store.max_offset("T", 0) == 10 and store.put(Message("T", b"new")).queue_offset == 10
    assert all(p.name.isdigit() for p in (root / "consumequeue" / "T" / "0").iterdir())
    problems = verify_store(root, CONFIG).problems
    assert problems and all("record at 0" in p.message or p.pos == 0 for p in problems), problems


def _rewrite_field(root: Path, phy_offset: int, field_pos: int, fmt: str, value: int) -> None:
    with (root / "commitlog" / f"{0:020d}").open("r+b") as f:
        f.seek(phy_offset + field_pos)
        f.write(struct.pack(fmt, value))


def test_a_record_moved_to_another_queue_leaves_a_hole_its_queue_keeps(tmp_path):
    """No CRC covers QUEUEID: record 4 of T/0 rewritten to queue 7 leaves T/0 without an offset 4. A
    rebuild of T/0 (`recover` checks every entry) writes a filler there, read as a removed message, and
    records 5 to 9 keep their offsets; the next put gets 10."""
    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as store:
        results = [store.put(Message("T", b"old-%d" % i)) for i in range(10)]
    _rewrite_field(root, results[4].phy_offset, 12, ">i", 7)  # QUEUEID
    with MessageStore.open(root, CONFIG, repair=True) as store:
        assert [(q.topic, q.queue_id) for q in store.recovery.queues_rebuilt] == [("T", 0)]
        assert [m.queue_offset for m in store.iter_queue("T", 0)] == [0, 1, 2, 3, 5, 6, 7, 8, 9]
        assert [m.body for m in store.get("T", 0, 4, 1).messages] == [b"old-5"]  # passed over, as a removed one
        assert store.put(Message("T", b"new")).queue_offset == 10
    with MessageStore.open(root, CONFIG) as store:
        assert not store.recovery.queues_rebuilt, "a hole is no damage to the next open"


def test_a_record_with_a_damaged_queue_offset_is_skipped_and_the_rest_keep_theirs(tmp_path):
    """No CRC covers QUEUEOFFSET: record 4's rewritten to 1,000. A catch-up from the oldest record (the
    queue lost its files, the record of queue ends with them) leaves record 4 out (listed in
    dispatch_skipped), puts a filler at 4 and keeps 5 to 9; the next put gets 10, not 5."""
    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as store:
        results = [store.put(Message("T", b"old-%d" % i)) for i in range(10)]
    _rewrite_field(root, results[4].phy_offset, 20, ">q", 1000)  # QUEUEOFFSET
    shutil.rmtree(root / "consumequeue")
    for name in (DERIVED_ENDS_FILE, DERIVED_ENDS_FILE + ".bak"):
        (root / CONFIG_DIR / name).unlink(missing_ok=True)
    with MessageStore.open(root, CONFIG) as store:
        assert [s.split(":")[0] for s in store.recovery.dispatch_skipped] == [str(results[4].phy_offset)]
        assert [m.queue_offset for m in store.iter_queue("T", 0)] == [0, 1, 2, 3, 5, 6, 7, 8, 9]
        assert store.put(Message("T", b"new")).queue_offset == 10


def test_recover_rebuilds_a_queue_whose_oldest_file_is_missing_without_a_record(tmp_path):
    """The record of queue ends is what tells a plain open that a queue lost its oldest file (which
    otherwise looks like a queue retention shortened); without it, `recover` finds it in one pass over
    the log: the queue starts above the first of its records there."""
    root = tmp_path / "store"
    config = StoreConfig(commitlog_file_size=1 << 20, consume_queue_file_entries=8)
    with MessageStore.open(root, config) as store:
        for i in range(20):
            store.put(Message("T", b"old-%d" % i))
    for name in (DERIVED_ENDS_FILE, DERIVED_ENDS_FILE + ".bak"):
        (root / CONFIG_DIR / name).unlink(missing_ok=True)
    (root / "consumequeue" / "T" / "0" / f"{0:020d}").unlink()
    with MessageStore.open(root, config) as store:
        assert store.min_offset("T", 0) == 8  # read as retention would leave it
    assert not verify_store(root, config).ok
    with MessageStore.open(root, config, repair=True) as store:
        assert [(q.topic, q.queue_id) for q in store.recovery.queues_rebuilt] == [("T", 0)]
        assert [m.queue_offset for m in store.iter_queue("T", 0)] == list(range(20))
    assert verify_store(root, config).ok


def test_a_snapshot_taken_before_a_topic_was_deleted_is_not_written_after_it(tmp_path):
    """The queue flush samples the queue ends under the store lock and writes them after its syncs: a
    topic deleted in between must not come back in the record (the next open would rebuild it)."""
    from rocketstore.log.derived_ends import snapshot

    root = tmp_path / "store"
    with MessageStore.open(root, CONFIG) as store:
        store.put(Message("T", b"t"))
        store.put(Message("U", b"u"))
        store.flush()
        generation = store._derived_ends.generation
        stale = snapshot(store._queues.all(), store.index, store.commitlog.min_offset,
                         store.commitlog.queue.flushed_offset)
        assert store.delete_topic("T")
        store._derived_ends.persist(stale, generation)  # the queue flush's write, after the delete
        recorded, _ = store._derived_ends.load(quarantine=None)
        assert recorded is not None and ("T", 0) not in recorded.queues and ("U", 0) in recorded.queues
    with MessageStore.open(root, CONFIG) as store:
        assert not store.recovery.queues_rebuilt and store.max_offset("T", 0) == 0


def test_a_damaged_queue_offset_on_the_last_record_opens_no_hole(tmp_path):
    """The last record of a queue whose QUEUEOFFSET reads 2**30: no record after it agrees, so it is
    left out, and no filler run of a billion entries is written to reach it."""
    root = tmp_path / "store"
    config = StoreConfig(commitlog_file_size=1 << 20, consume_queue_file_entries=8)
    with MessageStore.open(root, config) as store:
        results = [store.put(Message("T", b"old-%d" % i)) for i in range(10)]
    _rewrite_field(root, results[-1].phy_offset, 20, ">q", 1 << 30)  # QUEUEOFFSET
    shutil.rmtree(root / "consumequeue")
    for name in (DERIVED_ENDS_FILE, DERIVED_ENDS_FILE + ".bak"):
        (root / CONFIG_DIR / name).unlink(missing_ok=True)
    with MessageStore.open(root, config) as store:
        assert [s.split(":")[0] for s in store.recovery.dispatch_skipped] == [str(results[-1].phy_offset)]
        assert store.put(Message("T", b"new")).queue_offset == 9
    assert len(list((root / "consumequeue" / "T" / "0").iterdir())) == 2
