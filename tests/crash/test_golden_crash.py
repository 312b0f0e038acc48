"""A store written by RocketMQ 4.9.8 itself, crashed: abort file present and its last record torn."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, RecoveryMode
from rocketstore.format.sysflag import gets_index_entry, gets_queue_entry

from .faults import commitlog_files, cut_at, make_abort
from .workload import file_digests

pytestmark = pytest.mark.crash


def _tear_last_record(store_dir: Path, last: dict) -> tuple[Path, int]:
    path = commitlog_files(store_dir)[-1]
    file_from = int(path.name)
    cut = last["commitLogOffset"] + last["storeSize"] // 2
    cut_at(path, cut - file_from, fill=b"\xa5\x5a")  # garbage, not zeros, after the cut
    make_abort(store_dir)
    return path, file_from


def test_golden_store_with_abort_file_and_torn_tail_recovers_to_the_last_whole_record(
        golden_store, golden_config, golden_expected):
    messages = golden_expected["messages_in_commitlog_order"]
    last = messages[-1]
    path, file_from = _tear_last_record(golden_store, last)
    damaged = path.read_bytes()
    with MessageStore.open(golden_store, golden_config) as store:
        report = store.recovery
        assert report.mode is RecoveryMode.ABNORMAL
        assert report.end_offset == last["commitLogOffset"] == store.max_phy_offset
        (q,) = report.quarantined
        assert q.source == path.name and q.position == last["commitLogOffset"] - file_from
        assert Path(q.saved_to).read_bytes() == damaged[q.position:q.position + q.length]
        assert q.position + q.length == len(damaged), "the garbage runs to the end of the file"
        survivors = messages[:-1]
        for m in survivors:
            stored = store.message_at(m["commitLogOffset"])
            assert stored.body.hex().upper() == m["bodyHex"].upper() and stored.queue_offset == m["queueOffset"]
        in_queue = Counter((m["topic"], m["queueId"]) for m in survivors if gets_queue_entry(m["sysFlag"]))
        for (topic, queue_id), count in in_queue.items():
            assert store.max_offset(topic, queue_id) == count
            assert [u.phy_offset for u in store.queue_entries(topic, queue_id)] == [
                m["commitLogOffset"] for m in survivors
                if (m["topic"], m["queueId"]) == (topic, queue_id) and gets_queue_entry(m["sysFlag"])]
        assert store.max_offset(last["topic"], last["queueId"]) == last["queueOffset"]
        for m in survivors:
            if not gets_index_entry(m["sysFlag"]):
                continue
            keys = [k for k in (m["keys"] or "").split(" ") if k] + ([m["uniqKey"]] if m["uniqKey"] else [])
            for key in keys:
                found = store.query(m["topic"], key, begin_ms=m["storeTimestamp"], end_ms=m["storeTimestamp"])
                assert m["commitLogOffset"] in [f.phy_offset for f in found], f"{m['topic']}/{key} lost"
        again = store.put(Message(last["topic"], b"after the crash", queue_id=last["queueId"]))
        assert (again.phy_offset, again.queue_offset) == (last["commitLogOffset"], last["queueOffset"])
        assert store.message_at(again.phy_offset).body == b"after the crash"


def test_a_read_only_open_of_the_crashed_golden_store_changes_nothing(golden_store, golden_config,
                                                                     golden_expected):
    last = golden_expected["messages_in_commitlog_order"][-1]
    _tear_last_record(golden_store, last)
    before = file_digests(golden_store)
    with MessageStore.open(golden_store, golden_config, read_only=True) as reader:
        assert reader.recovery.mode is RecoveryMode.READ_ONLY
        assert reader.max_phy_offset == last["commitLogOffset"]
        assert reader.max_offset(last["topic"], last["queueId"]) == last["queueOffset"]
        with pytest.raises(Exception, match="no whole record|not in the commitlog"):
            reader.message_at(last["commitLogOffset"])
    assert file_digests(golden_store) == before
    assert not (golden_store / "quarantine").exists()
