"""Retention with an injected clock and an injected disk-usage reading: no sleeping, no full disks."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore import GetStatus, Message, MessageStore, StoreClosedError, StoreConfig, StoreReadOnlyError
from rocketstore.format.consume_queue import UNIT, UNIT_SIZE
from rocketstore.services.cleanup import MAX_FILES_PER_PASS, local_hour, parse_delete_when
from rocketstore.storage import fs

HOUR = 3_600_000
T0 = 1_800_000_000_000
TOPIC = "Ret"


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def config(delete_hour: int, **kw: object) -> StoreConfig:
    values: dict[str, object] = dict(
        commitlog_file_size=4096, consume_queue_file_entries=4, index_hash_slots=8, index_max_entries=8,
        file_reserved_hours=1, delete_when=f"{delete_hour:02d}", flush_consume_queue_interval_ms=3_600_000,
        clean_interval_ms=3_600_000, deliver_delayed_messages=False,
        disk_clean_forcibly_ratio=0.85, disk_full_ratio=0.90)  # RocketMQ's levels (the suite sets 1.0)
    values.update(kw)
    return StoreConfig(**values)  # type: ignore[arg-type]


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    usage = {"ratio": 0.5}
    monkeypatch.setattr(fs, "disk_used_ratio", lambda path: usage["ratio"])
    return usage


def fill(store: MessageStore, clock: Clock, files: int, start: int = 0) -> int:
    """Put messages (queues 0 and 1, one key each) until the commitlog has `files` more files."""
    target = len(store.commitlog.queue.files) + files
    seq = start
    while len(store.commitlog.queue.files) < target:
        store.put(Message(TOPIC, b"m" * 200, queue_id=seq % 2, keys=[f"k{seq}"]))
        seq += 1
        clock.now += 1
    return seq


def first_store_time(store: MessageStore, file_index: int) -> int:
    mf = store.commitlog.queue.files[file_index]
    return next(store.scan(mf.file_from_offset)).store_timestamp


def test_delete_when_parses_one_or_more_hours():
    assert parse_delete_when("04") == {4}
    assert parse_delete_when("03;04; 23") == {3, 4, 23}
    with pytest.raises(ValueError):
        parse_delete_when("24")


def test_nothing_is_deleted_outside_the_delete_hour_when_the_disk_has_room(tmp_path, disk):
    clock = Clock(T0)
    other_hour = (local_hour(T0 + 3 * HOUR) + 12) % 24
    with MessageStore.open(tmp_path, config(other_hour), clock=clock) as store:
        fill(store, clock, 4)
        report = store.clean_expired(now_ms=T0 + 3 * HOUR)
        assert not report.by_time and not report.by_space
        assert report.commitlog_files_deleted == [] and store.min_phy_offset == 0


def test_old_files_go_at_the_delete_hour_and_queues_index_and_min_offsets_follow(tmp_path, disk):
    clock = Clock(T0)
    now = T0 + 2 * HOUR + 30 * 60_000
    with MessageStore.open(tmp_path, config(local_hour(now)), clock=clock) as store:
        seq = fill(store, clock, 3)
        clock.now = T0 + 2 * HOUR
        fill(store, clock, 2, start=seq)
        files = store.commitlog.queue.files
        expired = 0
        while expired < len(files) - 1 and first_store_time(store, expired + 1) + HOUR <= now:
            expired += 1
        assert 0 < expired < len(files) - 1
        names = [mf.path.name for mf in files[:expired]]
        new_min = files[expired].file_from_offset

        report = store.clean_expired(now_ms=now)

        assert report.by_time and report.commitlog_files_deleted == names
        assert store.min_phy_offset == new_min == report.min_phy_offset
        on_disk = sorted(p.name for p in (tmp_path / "commitlog").iterdir())
        assert on_disk == [mf.path.name for mf in files[expired:]]
        for queue_id in (0, 1):
            cq = store._queues.by_key[(TOPIC, queue_id)]
            for mf in cq.queue.files[:-1]:
                assert UNIT.unpack_from(mf.mm, mf.file_size - UNIT_SIZE)[0] >= new_min
            lo = store.min_offset(TOPIC, queue_id)
            assert cq.unit_at(lo).phy_offset >= new_min
            if lo > 0:
                assert store.get(TOPIC, queue_id, lo - 1).status is GetStatus.OFFSET_TOO_SMALL
                assert store.get(TOPIC, queue_id, 0).status is GetStatus.OFFSET_TOO_SMALL
            assert store.get(TOPIC, queue_id, lo).status is GetStatus.FOUND
        assert report.queue_files_deleted, "whole consume-queue files pointed only at deleted messages"
        for f in store.index.files[:-1]:
            assert f.header.end_phy_offset >= new_min
        gone = [m for m in store.query(TOPIC, "k0")]
        assert gone == []
        kept_key = f"k{seq}"
        assert [m.phy_offset for m in store.query(TOPIC, kept_key)]
    with MessageStore.open(tmp_path, config(local_hour(now)), clock=clock) as again:
        assert again.min_phy_offset == new_min
        assert again.get(TOPIC, 0, 0).status is GetStatus.OFFSET_TOO_SMALL


def test_disk_above_the_ratio_deletes_expired_files_at_any_hour(tmp_path, disk):
    clock = Clock(T0)
    now = T0 + 3 * HOUR
    other_hour = (local_hour(now) + 12) % 24
    with MessageStore.open(tmp_path, config(other_hour), clock=clock) as store:
        seq = fill(store, clock, 2)
        clock.now = now - 10 * 60_000
        fill(store, clock, 2, start=seq)
        disk["ratio"] = 0.80
        report = store.clean_expired(now_ms=now)
        assert report.by_space and not report.at_once
        assert len(report.commitlog_files_deleted) == 1  # the second file's newest message is recent
        assert store.min_phy_offset == 4096


def test_disk_above_85_percent_deletes_all_but_the_file_being_written_ten_per_pass(tmp_path, disk):
    clock = Clock(T0)
    with MessageStore.open(tmp_path, config((local_hour(T0) + 12) % 24), clock=clock) as store:
        fill(store, clock, MAX_FILES_PER_PASS + 3)
        count = len(store.commitlog.queue.files)
        disk["ratio"] = 0.86
        first = store.clean_expired(now_ms=T0)
        assert first.at_once and len(first.commitlog_files_deleted) == MAX_FILES_PER_PASS
        second = store.clean_expired(now_ms=T0)
        assert len(second.commitlog_files_deleted) == count - MAX_FILES_PER_PASS - 1
        assert len(store.commitlog.queue.files) == 1
        assert store.clean_expired(now_ms=T0).commitlog_files_deleted == []
        assert store.put(Message(TOPIC, b"still writable")).ok


def test_a_full_disk_refuses_puts_until_space_returns(tmp_path, disk):
    clock = Clock(T0)
    with MessageStore.open(tmp_path, config((local_hour(T0) + 12) % 24), clock=clock) as store:
        assert store.put(Message(TOPIC, b"before")).ok
        disk["ratio"] = 0.95
        assert store.clean_expired(now_ms=T0).disk_full
        with pytest.raises(StoreReadOnlyError, match="disk full"):
            store.put(Message(TOPIC, b"refused"))
        disk["ratio"] = 0.5
        store.clean_expired(now_ms=T0)
        assert store.put(Message(TOPIC, b"after")).ok
        assert [m.body for m in store.get(TOPIC, 0, 0).messages] == [b"before", b"after"]


def test_clean_expired_refuses_a_read_only_store(tmp_path, disk):
    clock = Clock(T0)
    with MessageStore.open(tmp_path, config(4), clock=clock) as store:
        store.put(Message(TOPIC, b"x"))
    with MessageStore.open(tmp_path, read_only=True) as reader, pytest.raises(StoreReadOnlyError):
        reader.clean_expired(now_ms=T0)


def test_disk_used_ratio_reads_the_file_system(tmp_path: Path):
    ratio = fs.disk_used_ratio(tmp_path)
    assert 0.0 <= ratio <= 1.0


def test_a_deleted_file_stays_readable_until_the_next_pass(tmp_path, disk):
    clock = Clock(T0)
    with MessageStore.open(tmp_path, config((local_hour(T0) + 12) % 24), clock=clock) as store:
        fill(store, clock, 3)
        oldest = store.commitlog.queue.files[0]
        head = oldest.read(0, 64)
        disk["ratio"] = 0.86
        report = store.clean_expired(now_ms=T0)
        assert oldest.path.name in report.commitlog_files_deleted and not oldest.path.exists()
        assert oldest.read(0, 64) == head, "a read begun before the deletion still sees the bytes"
        disk["ratio"] = 0.5
        store.clean_expired(now_ms=T0)
        with pytest.raises(StoreClosedError):
            oldest.read(0, 64)


def test_a_store_refusing_puts_for_a_full_disk_still_closes_cleanly(tmp_path, disk):
    clock = Clock(T0)
    store = MessageStore.open(tmp_path, config((local_hour(T0) + 12) % 24), clock=clock)
    store.put(Message(TOPIC, b"x"))
    disk["ratio"] = 0.95
    store.clean_expired(now_ms=T0)
    store.close()
    assert not (tmp_path / "abort").exists(), "a full disk is no disk error: everything was flushed"
