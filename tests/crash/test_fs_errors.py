"""EIO and ENOSPC at every call through the storage/fs.py seam during puts and flushes.

A dry run lists every seam call the scenario makes (record writes, file allocation, msync, fsync,
file replacement); then each call in turn fails, with EIO, with ENOSPC, and (for writes) after part
of its bytes reached the file (a torn write). Each time: the store turns read-only with
StoreReadOnlyError, nothing it acknowledged is lost after a reopen, and recovery accepts no half record.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from rocketstore import FlushMode, MessageStore, PutStatus, RecoveryMode, StoreReadOnlyError
from rocketstore._types import Buffer
from rocketstore.storage import fs

from .faults import DiskFaults
from .workload import Ack, check_store, crash_config, message_for

pytestmark = pytest.mark.crash

# CQ files of 4 entries and a commitlog filled close to its end: the scenario allocates new files.
CONFIG = crash_config(FlushMode.SYNC, consume_queue_file_entries=4, index_max_entries=8,
                      flush_consume_queue_interval_ms=3_600_000, clean_interval_ms=3_600_000)
SETUP_BYTES = CONFIG.commitlog_file_size - 700
SCENARIO_PUTS = 5


def _setup(store: MessageStore, acked: dict[int, Ack]) -> int:
    seq = 0
    while store.max_phy_offset < SETUP_BYTES:
        r = store.put(message_for(seq))
        assert r.ok
        acked[seq] = Ack(seq, r.phy_offset, r.queue_offset, r.size)
        seq += 1
    return seq


def _scenario(store: MessageStore, first: int, acked: dict[int, Ack]) -> list[PutStatus | str]:
    """Puts that roll commitlog and queue files, then a full flush; what each step answered."""
    outcome: list[PutStatus | str] = []
    try:
        for seq in range(first, first + SCENARIO_PUTS):
            r = store.put(message_for(seq))
            outcome.append(r.status)
            if r.ok:
                acked[seq] = Ack(seq, r.phy_offset, r.queue_offset, r.size)
        store.commit_offset("G", "CrashA", 0, first)  # the flush also replaces consumerOffset.json
        store.flush()
        outcome.append("flushed")
    except StoreReadOnlyError:
        outcome.append("read-only")
    return outcome


def _template(root: Path) -> tuple[dict[int, Ack], int]:
    """The store every case starts from (written once, copied per case): acknowledged puts, next seq."""
    acked: dict[int, Ack] = {}
    with MessageStore.open(root, CONFIG) as store:
        first = _setup(store, acked)
    return acked, first


def _dry_run(root: Path, first: int, faults: DiskFaults) -> Counter[str]:
    acked: dict[int, Ack] = {}
    with MessageStore.open(root, CONFIG) as store:
        faults.calls.clear()
        assert _scenario(store, first, acked)[-1] == "flushed"
        counts = Counter(faults.calls)
        assert store.max_phy_offset > CONFIG.commitlog_file_size, "the scenario must roll a commitlog file"
    return counts


def _cases(counts: Counter[str]) -> list[tuple[str, int, int, int | None]]:
    """(seam function, call number, errno, bytes a torn write keeps) for every call of the dry run."""
    cases: list[tuple[str, int, int, int | None]] = []
    for name, total in sorted(counts.items()):
        for nth in range(total):
            cases.append((name, nth, errno.EIO, None))
            cases.append((name, nth, errno.ENOSPC, None))
            if name == "write_mapped":
                cases += [(name, nth, errno.EIO, keep) for keep in (8, -1)]
    return cases


def test_every_seam_call_of_put_and_flush_can_fail_without_losing_what_was_acknowledged(tmp_path, monkeypatch):
    template = tmp_path / "template"
    setup_acks, first = _template(template)
    faults = DiskFaults(monkeypatch)
    counts = _dry_run(shutil.copytree(template, tmp_path / "dry"), first, faults)
    assert set(counts) == {"write_mapped", "allocate", "msync", "fsync_fd", "write_file"}, counts
    cases = _cases(counts)
    for i, (name, nth, code, torn_keep) in enumerate(cases):
        root = shutil.copytree(template, tmp_path / f"case-{i}")
        acked = dict(setup_acks)
        faults.fired = False
        faults.target = None
        store = MessageStore.open(root, CONFIG)
        faults.fail(name, nth, code, torn_keep=torn_keep)
        outcome = _scenario(store, first, acked)
        label = f"{name}#{nth} errno={code} torn_keep={torn_keep}: {outcome}"
        assert faults.fired, label
        assert outcome[-1] == "read-only" or PutStatus.FLUSH_DISK_TIMEOUT in outcome, label
        with pytest.raises(StoreReadOnlyError):
            store.put(message_for(10_000))
        store.close()
        assert (root / "abort").exists(), f"{label}: a store that turned read-only must not look clean"
        faults.target = None
        with MessageStore.open(root, CONFIG) as reopened:
            assert reopened.recovery.mode is RecoveryMode.ABNORMAL, label
            check_store(reopened, acked)  # a torn record is never taken for a message
            assert reopened.put(message_for(20_000)).ok, label


def test_a_failed_file_allocation_leaves_no_empty_file_behind(tmp_path, monkeypatch):
    faults = DiskFaults(monkeypatch)
    acked: dict[int, Ack] = {}
    store = MessageStore.open(tmp_path, CONFIG)
    first = _setup(store, acked)
    faults.fail("allocate", 0, errno.ENOSPC)
    outcome = _scenario(store, first, acked)
    assert outcome[-1] == "read-only"
    store.close()
    for path in (tmp_path / "commitlog").iterdir():
        assert path.stat().st_size == CONFIG.commitlog_file_size
    faults.target = None
    with MessageStore.open(tmp_path, CONFIG) as reopened:
        check_store(reopened, acked)


# Files large enough for a batch run of more than fs.PWRITE_MIN bytes: written through the file, not the mapping.
BATCH_CONFIG = crash_config(FlushMode.SYNC, commitlog_file_size=256 * 1024, consume_queue_file_entries=400,
                            index_max_entries=1024, flush_consume_queue_interval_ms=3_600_000,
                            clean_interval_ms=3_600_000)


@pytest.mark.parametrize(("code", "torn_keep"), [(errno.EIO, None), (errno.ENOSPC, None), (errno.EIO, 8),
                                                 (errno.EIO, 20_000), (errno.EIO, -1)])
def test_a_failed_batch_write_through_the_file_keeps_what_was_acknowledged(tmp_path, monkeypatch, code, torn_keep):
    acked: dict[int, Ack] = {}
    with MessageStore.open(tmp_path, BATCH_CONFIG) as store:
        for seq in range(20):
            r = store.put(message_for(seq))
            acked[seq] = Ack(seq, r.phy_offset, r.queue_offset, r.size)
    pwrites: list[int] = []
    real_pwrite = os.pwrite

    def counted_pwrite(fd: int, data: Buffer, pos: int) -> int:
        if "/commitlog/" in os.readlink(f"/proc/self/fd/{fd}"):
            pwrites.append(len(memoryview(data)))
        return real_pwrite(fd, data, pos)

    monkeypatch.setattr(os, "pwrite", counted_pwrite)
    faults = DiskFaults(monkeypatch)
    batch = [message_for(seq) for seq in range(20, 220)]
    store = MessageStore.open(tmp_path, BATCH_CONFIG)
    faults.fail("write_mapped", 0, code, torn_keep=torn_keep)
    with pytest.raises(StoreReadOnlyError):
        store.put_batch(batch)
    assert faults.fired
    store.close()
    faults.target = None
    if torn_keep is not None and (torn_keep < 0 or torn_keep >= fs.PWRITE_MIN):
        assert len(pwrites) == 1 and pwrites[0] >= fs.PWRITE_MIN, pwrites  # the torn part went in by pwrite
    with MessageStore.open(tmp_path, BATCH_CONFIG) as reopened:
        assert reopened.recovery.mode is RecoveryMode.ABNORMAL
        kept = check_store(reopened, acked)  # whole records of the batch may stay; a torn one never
        assert len(kept) >= len(acked)
        pwrites.clear()
        more = [message_for(seq) for seq in range(300, 400)]
        results = reopened.put_batch(more)
        assert len(pwrites) == 1 and pwrites[0] >= fs.PWRITE_MIN, pwrites  # one run, by pwrite
        assert reopened.message_at(results[-1].phy_offset).body == more[-1].body  # the mapping shows it at once
    with MessageStore.open(tmp_path, BATCH_CONFIG) as reopened:
        acked.update((300 + i, Ack(300 + i, r.phy_offset, r.queue_offset, r.size)) for i, r in enumerate(results))
        assert check_store(reopened, acked)[-1].body == more[-1].body  # read back through the mapping


# An ASYNC store whose plain puts leave their dispatch behind: the catch-up writes the queues and the index.
BEHIND_CONFIG = crash_config(FlushMode.ASYNC, consume_queue_file_entries=4, index_max_entries=8,
                             flush_consume_queue_interval_ms=3_600_000, clean_interval_ms=3_600_000)
BEHIND_PUTS = 12


def _put_behind(store: MessageStore, first: int, acked: dict[int, Ack]) -> None:
    for seq in range(first, first + BEHIND_PUTS):
        r = store.put(message_for(seq))
        assert r.ok
        acked[seq] = Ack(seq, r.phy_offset, r.queue_offset, r.size)
    assert store._writes.behind_to > store._writes.dispatched_to, "the puts did not leave their dispatch behind"


def test_every_seam_call_of_a_catch_up_can_fail_without_losing_a_put(tmp_path, monkeypatch):
    """Plain ASYNC puts leave their queue entries and index keys to the catch-up that the next read runs.
    Each seam call of that catch-up fails in turn: the read raises StoreReadOnlyError, and after a
    reopen every put is in its queue and found by its keys."""
    template = tmp_path / "template"
    setup_acks: dict[int, Ack] = {}
    with MessageStore.open(template, BEHIND_CONFIG) as store:
        _put_behind(store, 0, setup_acks)
    dry = shutil.copytree(template, tmp_path / "dry")
    with MessageStore.open(dry, BEHIND_CONFIG) as store:
        _put_behind(store, BEHIND_PUTS, {})
        faults = DiskFaults(monkeypatch)
        store.max_offset("CrashA", 0)  # the catch-up
        counts = Counter(faults.calls)
        monkeypatch.undo()
    assert counts["write_mapped"] >= 2, counts  # queue entries and index keys
    for i, (name, nth, code, torn_keep) in enumerate(_cases(counts)):
        root = shutil.copytree(template, tmp_path / f"case-{i}")
        acked = dict(setup_acks)
        store = MessageStore.open(root, BEHIND_CONFIG)
        _put_behind(store, BEHIND_PUTS, acked)
        faults = DiskFaults(monkeypatch)
        faults.fail(name, nth, code, torn_keep=torn_keep)
        label = f"{name}#{nth} errno={code} torn_keep={torn_keep}"
        with pytest.raises(StoreReadOnlyError, match="dispatch failed"):
            store.max_offset("CrashA", 0)
        assert faults.fired, label
        store.get("CrashA", 0, 0)  # what was dispatched still reads
        store.close()
        monkeypatch.undo()
        assert (root / "abort").exists(), f"{label}: a store that turned read-only must not look clean"
        with MessageStore.open(root, BEHIND_CONFIG) as reopened:
            assert reopened.recovery.mode is RecoveryMode.ABNORMAL, label
            check_store(reopened, acked)
