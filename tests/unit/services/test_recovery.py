"""Recovery pieces on stores the tests write: queue truncation, index pruning, reports, read-only opens."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rocketstore import Message, MessageStore, RecoveryMode, StoreConfig
from rocketstore.format.store_dirs import QUARANTINE_DIR
from rocketstore.log.consume_queue import ConsumeQueue

T0 = 1_800_000_000_000
CFG = StoreConfig(commitlog_file_size=8192, consume_queue_file_entries=4, index_hash_slots=8, index_max_entries=6,
                  deliver_delayed_messages=False)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> int:
        self.now += 3
        return self.now


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_truncating_a_queue_looks_past_an_empty_last_file(tmp_path):
    cq = ConsumeQueue(tmp_path, "T", 0, 4)
    for i in range(4):
        cq.put(100 * i, 50, 0, i)
    cq.queue.create_file(80)  # the next file exists but holds nothing yet
    cq.truncate_to_phy(250)
    assert [u.phy_offset for u in cq.units(0, 10)] == [0, 100, 200]
    assert cq.max_offset == 3 and cq.max_physic_offset == 250


def _torn_store(root: Path) -> tuple[int, int]:
    """A store whose last record is cut and whose abort file says it crashed; (end, torn size)."""
    with MessageStore.open(root, CFG, clock=Clock()) as store:
        for i in range(12):
            store.put(Message("T", f"body-{i}".encode() * 5, queue_id=i % 2, keys=[f"k{i}"]))
        last = store.put(Message("T", b"last" * 10, queue_id=0, keys=["k-last"]))
    path = root / "commitlog" / "00000000000000000000"
    data = bytearray(path.read_bytes())
    cut = last.phy_offset + last.size // 2
    data[cut:last.phy_offset + last.size] = bytes(last.phy_offset + last.size - cut)
    path.write_bytes(bytes(data))
    (root / "abort").touch()
    return last.phy_offset, cut - last.phy_offset


def test_recovery_report_says_what_ran_and_what_moved_aside(tmp_path):
    end, torn = _torn_store(tmp_path)
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        report = store.recovery
        assert report.mode is RecoveryMode.ABNORMAL and report.end_offset == end
        assert report.records_scanned == 12
        assert report.stop_reason.endswith(f"at 00000000000000000000+{end}")
        (q,) = report.quarantined
        assert (q.source, q.position, q.length) == ("00000000000000000000", end, torn)
        assert Path(q.saved_to) == tmp_path / QUARANTINE_DIR / f"00000000000000000000.{end}.bin"
        assert report.queues_truncated == ["T/0"]
        assert store.query("T", "k-last") == []
        assert json.loads(json.dumps(report.to_dict()))["quarantined"][0]["length"] == torn
        assert not report.clean


def test_a_clean_reopen_reports_normal_mode_and_moves_nothing(tmp_path):
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        store.put(Message("T", b"x"))
        end = store.max_phy_offset
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        assert store.recovery.mode is RecoveryMode.NORMAL and store.recovery.clean
        assert store.recovery.end_offset == end


def test_a_read_only_open_of_a_crashed_store_repairs_nothing(tmp_path):
    end, _ = _torn_store(tmp_path)
    before = digests(tmp_path)
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert reader.recovery.mode is RecoveryMode.READ_ONLY
        assert reader.max_phy_offset == end
        assert reader.max_offset("T", 0) == 6
        assert [m.body for m in reader.get("T", 0, 5).messages] == [b"body-10" * 5]
    assert digests(tmp_path) == before
    assert not (tmp_path / QUARANTINE_DIR).exists()


def test_a_read_only_open_ends_where_recovery_would_before_an_empty_pre_allocated_file(tmp_path):
    # RocketMQ pre-allocates the next commitlog file; a crash leaves it empty beside the last record
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        for i in range(3):
            store.put(Message("T", f"m{i}".encode()))
        end = store.max_phy_offset
    assert end < CFG.commitlog_file_size
    (tmp_path / "commitlog" / f"{CFG.commitlog_file_size:020d}").write_bytes(bytes(CFG.commitlog_file_size))
    (tmp_path / "abort").touch()
    before = digests(tmp_path)
    with MessageStore.open(tmp_path, CFG, read_only=True) as reader:
        assert reader.max_phy_offset == end
        assert [m.body for m in reader.scan()] == [b"m0", b"m1", b"m2"]
    assert digests(tmp_path) == before
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        assert store.max_phy_offset == end


def test_a_read_only_open_beside_a_live_writer_writes_nothing(tmp_path):
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as writer:
        for i in range(5):
            writer.put(Message("T", f"m{i}".encode()))
        writer.flush()
        before = digests(tmp_path)
        with MessageStore.open(tmp_path, read_only=True) as reader:
            assert [m.body for m in reader.get("T", 0, 0).messages] == [f"m{i}".encode() for i in range(5)]
        assert digests(tmp_path) == before


def test_index_entries_past_the_recovered_end_are_rebuilt_so_every_key_finds_its_message(tmp_path):
    end, _ = _torn_store(tmp_path)
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        for msg in store.scan():
            assert [m.phy_offset for m in store.query("T", msg.keys[0])] == [msg.phy_offset]
        after = store.put(Message("T", b"new", keys=["k-new"]))
        assert after.phy_offset == end
        assert [m.phy_offset for m in store.query("T", "k-new")] == [end]


def test_a_crash_between_creating_and_sizing_a_file_leaves_nothing_that_blocks_the_next_open(tmp_path):
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        store.put(Message("T", b"x", keys=["k"]))
    empty = [tmp_path / "commitlog" / "00000000000000008192", tmp_path / "index" / "99999999999999999",
             tmp_path / "consumequeue" / "T" / "0" / "00000000000000000080"]
    for path in empty:
        path.touch()
    (tmp_path / "abort").touch()
    with MessageStore.open(tmp_path, read_only=True) as reader:
        assert reader.get("T", 0, 0).messages[0].body == b"x"
    assert all(path.exists() for path in empty), "a reader removes nothing"
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        assert [m.body for m in store.query("T", "k")] == [b"x"]
        assert store.put(Message("T", b"y")).queue_offset == 1
    assert not any(path.exists() and path.stat().st_size == 0 for path in empty)


def test_a_damaged_queue_offset_field_leaves_the_record_out_of_its_queue_but_the_store_opens(tmp_path):
    from rocketstore.format.consume_queue import UNIT_SIZE
    from rocketstore.format.message import QUEUE_OFFSET_POS

    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        for i in range(3):
            store.put(Message("T", f"m{i}".encode(), keys=[f"k{i}"]))
        last = store.put(Message("T", b"damaged", keys=["k-damaged"]))
    log = tmp_path / "commitlog" / "00000000000000000000"
    data = bytearray(log.read_bytes())
    data[last.phy_offset + QUEUE_OFFSET_POS] ^= 0x40  # no CRC covers the header
    log.write_bytes(bytes(data))
    cq = tmp_path / "consumequeue" / "T" / "0" / "00000000000000000000"
    entries = bytearray(cq.read_bytes())
    entries[3 * UNIT_SIZE:4 * UNIT_SIZE] = bytes(UNIT_SIZE)  # the queue lost its newest entry: re-dispatch it
    cq.write_bytes(bytes(entries))
    (tmp_path / "abort").touch()
    with MessageStore.open(tmp_path, CFG, clock=Clock()) as store:
        report = store.recovery
        assert [s.split(":")[0] for s in report.dispatch_skipped] == [str(last.phy_offset)]
        assert not report.clean
        assert store.max_offset("T", 0) == 3
        assert [m.phy_offset for m in store.query("T", "k-damaged")] == [last.phy_offset]
        assert store.put(Message("T", b"next")).queue_offset == 3
