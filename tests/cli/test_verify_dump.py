"""`verify` finds damage with its file and byte position; `dump` decodes every kind of store file."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from rocketstore.format import consume_queue as cq_format
from rocketstore.format import index as index_format
from rocketstore.format.message import header_struct

from .cliharness import assert_one_line_error, tree_digest

FIRST_FILE = "commitlog/00000000000000000000"


def _flip(path: Path, pos: int) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= 0x5A
    path.write_bytes(bytes(data))


def _write_at(path: Path, pos: int, raw: bytes) -> None:
    data = bytearray(path.read_bytes())
    data[pos:pos + len(raw)] = raw
    path.write_bytes(bytes(data))


def test_verify_passes_the_golden_store(cli, golden_store, golden_flags, golden_expected):
    document = cli("verify", golden_store, *golden_flags, "--json").json()
    assert document["ok"] is True and document["problems"] == []
    walk = golden_expected["commitlog_walk"]
    assert document["records"] == sum(f["records"] for f in walk) == len(golden_expected["messages_in_commitlog_order"])
    assert document["blank_records"] == sum(f["endReason"] == "blank" for f in walk)
    assert document["max_phy_offset"] == golden_expected["commitlog"]["maxPhyOffset"]
    assert document["index_files"] == len(golden_expected["index_headers"])
    assert document["index_entries"] == sum(h["indexCount"] - 1 for h in golden_expected["index_headers"].values())
    table = cli("verify", golden_store, *golden_flags)
    assert table.tsv() == [] and "the store is consistent" in table.err


def test_verify_reports_a_body_crc_mismatch_at_its_record(cli, golden_store, golden_flags, golden_expected):
    victim = next(m for m in golden_expected["messages_in_commitlog_order"]
                  if m["commitLogOffset"] < 65536 and m["bodyLength"] > 0 and m["commitLogOffset"] > 1000)
    body_pos = victim["commitLogOffset"] + header_struct(4, 4).size
    _flip(golden_store / FIRST_FILE, body_pos)
    result = cli("verify", golden_store, *golden_flags, "--json")
    problems = result.json(code=1)["problems"]
    assert result.err.strip().startswith("rocketstore: error: ") and "problem(s) found" in result.err
    assert {"file": FIRST_FILE, "pos": victim["commitLogOffset"], "message": "body CRC mismatch"} in problems


def test_verify_reports_consume_queue_and_index_damage(cli, golden_store, golden_flags, golden_expected):
    entries = golden_expected["queues"]["TopicB"]["1"]["cqEntries_queueOffset_commitLogOffset_size_tagsCode"]
    queue_file = "consumequeue/TopicB/1/00000000000000000000"
    size_pos = 3 * cq_format.UNIT_SIZE + struct.calcsize(">q")
    _write_at(golden_store / queue_file, size_pos, struct.pack(">i", entries[3][2] + 1))
    index_name = sorted(golden_expected["index_headers"])[1]
    entry_pos = index_format.entry_pos(5, int(golden_flags[golden_flags.index("--index-hash-slots") + 1]))
    _write_at(golden_store / "index" / index_name, entry_pos + struct.calcsize(">i"), struct.pack(">q", 12345))
    problems = cli("verify", golden_store, *golden_flags, "--json").json(code=1)["problems"]
    where = {(p["file"], p["pos"]) for p in problems}
    assert (queue_file, 3 * cq_format.UNIT_SIZE) in where
    assert (f"index/{index_name}", entry_pos) in where
    table = cli("verify", golden_store, *golden_flags)
    assert (queue_file, str(3 * cq_format.UNIT_SIZE)) in {(row["file"], row["pos"]) for row in table.tsv(code=1)}


def test_verify_reports_garbage_after_the_end_of_the_log(cli, golden_store, golden_flags, golden_expected):
    last = golden_expected["commitlog_walk"][-1]
    path = golden_store / "commitlog" / last["name"]
    _write_at(path, last["dataEndPosition"] + 100, b"\x01\x02garbage")
    problems = cli("verify", golden_store, *golden_flags, "--json").json(code=1)["problems"]
    assert problems == [{"file": f"commitlog/{last['name']}", "pos": last["dataEndPosition"] + 100,
                         "message": f"non-zero bytes after the end of the written data at {last['dataEndPosition']}"}]


def test_a_torn_last_record_of_a_stopped_store_and_the_entries_pointing_at_it_are_problems(
        cli, golden_store, golden_flags, golden_expected):
    """Nothing was appended past the snapshot's end (no writer): the log past it is checked, and the
    entries pointing at the torn record are problems, not newer than the snapshot."""
    last = golden_expected["messages_in_commitlog_order"][-1]
    walk = golden_expected["commitlog_walk"][-1]
    pos = last["commitLogOffset"] - int(walk["name"])
    _write_at(golden_store / "commitlog" / walk["name"], pos + 8, bytes(last["storeSize"] - 8))  # all but the prefix
    document = cli("verify", golden_store, *golden_flags, "--json").json(code=1)
    assert (document["snapshot_end"], document["log_grew"]) == (last["commitLogOffset"], False)
    assert document["newer_queue_entries"] == document["newer_index_entries"] == 0
    problems = [(p["file"], p["message"]) for p in document["problems"]]
    keys = len(last["keys"].split()) + 1  # and the UNIQ_KEY
    end = f"points at {last['commitLogOffset']}, past the end of the commitlog"
    assert problems[0] == (f"commitlog/{walk['name']}", f"lengths add up to 91, total size says {last['storeSize']}")
    assert problems[1] == (f"consumequeue/{last['topic']}/{last['queueId']}/00000000000000000000",
                           f"queue offset {last['queueOffset']} {end}")
    assert [m.split(" ", 2)[2] for _, m in problems[2:]] == [end] * keys and len(problems) == 2 + keys


def test_dump_commitlog_decodes_records_and_the_blank(cli, golden_store, golden_flags, golden_expected):
    walk = golden_expected["commitlog_walk"][0]
    messages = [m for m in golden_expected["messages_in_commitlog_order"] if m["commitLogOffset"] < 65536]
    result = cli("dump", golden_store, *golden_flags, FIRST_FILE, "--count", "1000", "--json")
    *records, blank = result.json_lines()
    assert "more from byte" not in result.err
    assert [(r["pos"], r["size"], r["topic"], r["queue_offset"], r["msg_id"]) for r in records] == [
        (m["commitLogOffset"], m["storeSize"], m["topic"], m["queueOffset"], m["msgId"]) for m in messages]
    assert all(r["body_crc_ok"] and r["phy_offset_ok"] and r["magic"] == "MESSAGE_V1" for r in records)
    assert (blank["kind"], blank["pos"], blank["size"], blank["size_ok"]) == (
        "blank", walk["blankRecordPosition"], walk["blankRecordTotalSize"], True)


def test_dump_at_a_position_pages_through_the_file(cli, golden_store, golden_flags, golden_expected):
    messages = golden_expected["messages_in_commitlog_order"]
    first = cli("dump", golden_store, *golden_flags, FIRST_FILE, "--count", "2", "--json")
    assert len(first.json_lines()) == 2
    next_pos = messages[2]["commitLogOffset"]
    assert f"more from byte {next_pos} (--at {next_pos})" in first.err
    page = cli("dump", golden_store, *golden_flags, FIRST_FILE, "--at", str(next_pos), "--count", "2",
               "--json").json_lines()
    assert [i["pos"] for i in page] == [m["commitLogOffset"] for m in messages[2:4]]
    inside = cli("dump", golden_store, *golden_flags, FIRST_FILE, "--at", str(messages[2]["commitLogOffset"] + 1),
                 "--json").json_lines()
    assert [i["kind"] for i in inside] == ["corrupt"]


def test_dump_consume_queue_index_and_checkpoint(cli, golden_store, golden_flags, golden_expected):
    queue = golden_expected["queues"]["TopicA"]["0"]
    cq = cli("dump", golden_store, *golden_flags, golden_store / "consumequeue/TopicA/0/00000000000000002000",
             "--count", "200", "--json").json_lines()
    entries = [i for i in cq if i["kind"] == "entry"]
    assert [[i["queue_offset"], i["phy_offset"], i["size"], i["tags_code"]] for i in entries] == [
        e for e in queue["cqEntries_queueOffset_commitLogOffset_size_tagsCode"] if e[0] >= 100]
    assert cq[-1]["kind"] == "empty"

    name, header = sorted(golden_expected["index_headers"].items())[0]
    index_header, *items = cli("dump", golden_store, *golden_flags, f"index/{name}", "--count", "100000",
                               "--json").json_lines()
    assert (index_header["kind"], index_header["pos"]) == ("header", 0)
    assert index_header["index_count"] == header["indexCount"]
    assert index_header["begin_phy_offset"] == header["beginPhyOffset"]
    assert index_header["end_timestamp"] == header["endTimestamp"]
    dumped = [i for i in items if i["kind"] == "entry"]
    assert [i["entry"] for i in dumped] == list(range(1, header["indexCount"]))
    slots = [i for i in items if i["kind"] == "slot"]
    assert len(slots) == header["hashSlotCount"]

    (checkpoint,) = cli("dump", golden_store, *golden_flags, "checkpoint", "--json").json_lines()
    expected = golden_expected["checkpoint"]
    assert checkpoint["physic_msg_timestamp"] == expected["physicMsgTimestamp"]
    assert checkpoint["logics_msg_timestamp"] == expected["logicsMsgTimestamp"]
    assert checkpoint["index_msg_timestamp"] == expected["indexMsgTimestamp"]


@pytest.mark.parametrize("verbose", [[], ["--verbose"]])
def test_dump_tables_show_positions(cli, golden_store, golden_flags, golden_expected, verbose):
    second = golden_expected["messages_in_commitlog_order"][1]
    result = cli("dump", golden_store, *golden_flags, FIRST_FILE, "--count", "2", *verbose)
    rows = result.tsv()
    assert [row["pos"] for row in rows][1] == str(second["commitLogOffset"])
    if verbose:  # every field of every record
        assert rows[1]["msg_id"] == second["msgId"] and rows[1]["body_crc_ok"] == "True"
    assert f"--at {golden_expected['messages_in_commitlog_order'][2]['commitLogOffset']}" in result.err


def test_dump_of_a_file_outside_the_store_is_refused(cli, golden_store, golden_flags, tmp_path: Path):
    outside = tmp_path / "00000000000000000000"
    outside.write_bytes(bytes(64))
    before = tree_digest(tmp_path)
    line = assert_one_line_error(cli("dump", golden_store, *golden_flags, outside))
    assert "not inside the store" in line
    assert tree_digest(tmp_path) == before
