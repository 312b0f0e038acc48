"""`recover` prints the RecoveryReport; `--dry-run` works on a scratch copy and leaves the store alone."""

from __future__ import annotations

import shutil
from pathlib import Path

from .cliharness import tree_digest


def _tear_the_tail(store: Path, expected: dict) -> tuple[str, int, int]:
    """Cut the last record short and leave garbage behind it, as a crash can; mark the crash (abort).

    Returns the last file's name, the position and the length of the torn bytes.
    """
    last = expected["commitlog_walk"][-1]
    path = store / "commitlog" / last["name"]
    start = int(last["name"])
    record = expected["messages_in_commitlog_order"][-1]
    pos, end = record["commitLogOffset"] - start, last["dataEndPosition"]
    data = bytearray(path.read_bytes())
    data[pos + 30:end] = bytes(end - pos - 30)
    data[end + 50:end + 60] = b"garbage!!!"
    path.write_bytes(bytes(data))
    (store / "abort").touch()
    return last["name"], pos, end + 60 - pos


def test_recover_of_a_cleanly_closed_store_is_clean(cli, golden_store, golden_flags, golden_expected):
    document = cli("recover", golden_store, *golden_flags, "--json").json()
    assert (document["mode"], document["clean"], document["dry_run"]) == ("normal", True, False)
    assert document["end_offset"] == golden_expected["commitlog"]["maxPhyOffset"]
    assert document["quarantined"] == []


def test_dry_run_reports_the_torn_tail_and_changes_nothing(cli, golden_store, golden_flags, golden_expected):
    name, pos, length = _tear_the_tail(golden_store, golden_expected)
    before = tree_digest(golden_store)
    result = cli("recover", golden_store, *golden_flags, "--dry-run", "--json")
    document = result.json(code=1)
    assert "dry run: the store was not changed" in result.err
    assert tree_digest(golden_store) == before
    assert (document["mode"], document["clean"], document["dry_run"]) == ("abnormal", False, True)
    last = golden_expected["messages_in_commitlog_order"][-1]
    assert document["end_offset"] == last["commitLogOffset"]
    (moved,) = document["quarantined"]
    assert (moved["source"], moved["position"], moved["length"]) == (name, pos, length)
    assert moved["saved_to"] == str(golden_store / "quarantine" / f"{name}.{pos}.bin")


def test_recover_quarantines_the_tail_then_the_store_verifies(cli, golden_store, golden_flags, golden_expected):
    name, pos, length = _tear_the_tail(golden_store, golden_expected)
    damaged = cli("verify", golden_store, *golden_flags, "--json").json(code=1)
    assert any(p["file"] == f"commitlog/{name}" and p["pos"] == pos for p in damaged["problems"])
    torn = (golden_store / "commitlog" / name).read_bytes()[pos:pos + length]
    result = cli("recover", golden_store, *golden_flags)
    assert result.code == 1 and "moved 1 range(s)" in result.err
    assert "abnormal" in result.out
    assert (golden_store / "quarantine" / f"{name}.{pos}.bin").read_bytes() == torn
    healed = cli("verify", golden_store, *golden_flags, "--json").json()
    assert healed["ok"] and healed["records"] == len(golden_expected["messages_in_commitlog_order"]) - 1
    again = cli("recover", golden_store, *golden_flags, "--json").json()
    assert (again["mode"], again["clean"]) == ("normal", True)


def test_recover_rebuilds_a_damaged_queue_and_says_so(cli, golden_store, golden_flags, golden_expected):
    queue_file = golden_store / "consumequeue" / "TopicA" / "0" / "00000000000000000000"
    data = bytearray(queue_file.read_bytes())
    data[:40] = bytes(b ^ 0xFF for b in data[:40])
    queue_file.write_bytes(bytes(data))
    before = tree_digest(golden_store)
    dry = cli("recover", golden_store, *golden_flags, "--dry-run", "--json")
    assert "would rebuild 1 damaged consume queue(s)" in dry.err
    (planned,) = dry.json(code=1)["queues_rebuilt"]
    assert (planned["topic"], planned["queue_id"]) == ("TopicA", 0)
    assert planned["saved_to"] == str(golden_store / "quarantine" / "consumequeue" / "TopicA" / "0")
    assert tree_digest(golden_store) == before
    result = cli("recover", golden_store, *golden_flags)
    assert result.code == 1 and "rebuilt 1 damaged consume queue(s)" in result.err
    assert (golden_store / "quarantine" / "consumequeue" / "TopicA" / "0" / f"{queue_file.name}.0.bin"
            ).read_bytes() == bytes(data)
    assert queue_file.read_bytes()[:2000] == bytes(
        _original_queue_bytes(golden_expected, "TopicA", 0, 100))
    assert cli("verify", golden_store, *golden_flags, "--json").json()["ok"]


def _original_queue_bytes(expected: dict, topic: str, queue_id: int, entries: int) -> bytes:
    """The first file of a queue as RocketMQ wrote it, from expected.json's entries."""
    import struct

    rows = expected["queues"][topic][str(queue_id)]["cqEntries_queueOffset_commitLogOffset_size_tagsCode"]
    data = b"".join(struct.pack(">qiq", phy, size, code) for _, phy, size, code in rows[:entries])
    return data + bytes(entries * 20 - len(data))


def test_recover_of_a_clean_store_ending_in_keyless_messages_reports_no_work(cli, tmp_path):
    from rocketstore import Message, MessageStore, StoreConfig

    store = tmp_path / "store"
    with MessageStore.open(store, StoreConfig(index_hash_slots=50, index_max_entries=200)) as opened:
        opened.put_batch([Message("T", b"keyed", keys=(f"k{i}",)) for i in range(500)])  # index files roll
        opened.put_batch([Message("T", b"no key") for _ in range(30)])  # after the last indexed record
    document = cli("recover", store, "--dry-run", "--json").json()
    assert (document["clean"], document["queue_entries_dispatched"], document["index_records_dispatched"]) == (
        True, 0, 0), "a store closed cleanly has nothing to dispatch"


def test_dry_run_on_a_cleanly_closed_store_reports_no_work(cli, golden_store, golden_flags):
    """Messages without KEYS or UNIQ_KEY after the last indexed one give the index nothing: a recovery
    after a clean close writes no index entry for them, and says so."""
    lines = "".join(f"line {n}\n" for n in range(300))
    put = cli("put", golden_store, *golden_flags, "--topic", "TopicA", "--lines", "--json", stdin=lines)
    assert put.code == 0, put.err
    index_before = tree_digest(golden_store / "index")
    document = cli("recover", golden_store, *golden_flags, "--dry-run", "--json").json()
    assert (document["mode"], document["clean"]) == ("normal", True)
    assert document["queue_entries_dispatched"] == 0
    assert document["index_records_dispatched"] == 0
    done = cli("recover", golden_store, *golden_flags, "--json").json()
    assert done["index_records_dispatched"] == 0
    assert tree_digest(golden_store / "index") == index_before, "recovery wrote no index entry"


def test_verify_counts_the_records_a_live_writer_had_not_dispatched(cli, tmp_path):
    from rocketstore import Message, MessageStore, StoreConfig

    root, copy = tmp_path / "live", tmp_path / "copy"
    # no queue flush pass while the directory is copied: it would dispatch the puts behind mid-copy
    with MessageStore.open(root, StoreConfig(commitlog_file_size=1 << 20,
                                             flush_consume_queue_interval_ms=3_600_000)) as store:
        store.put(Message("T", b"dispatched", keys=("d",)))
        store.max_offset("T", 0)
        store.put(Message("T", b"behind", keys=("b",)))
        shutil.copytree(root, copy)
    out = cli("verify", str(copy), "--commitlog-file-size", str(1 << 20))
    assert out.code == 0, out.err
    assert "1 record(s) at the end of the log, from " in out.err and "not dispatched yet" in out.err  # the summary
    document = cli("verify", str(copy), "--commitlog-file-size", str(1 << 20), "--json").json()
    assert document["ok"] and document["undispatched"] == 1 and document["problems"] == []
