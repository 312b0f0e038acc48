"""Read commands on the store real RocketMQ 4.9.8 wrote, checked against its `expected.json`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .cliharness import assert_one_line_error, tree_digest


def _by_offset(golden_expected) -> dict[int, dict]:
    return {m["commitLogOffset"]: m for m in golden_expected["messages_in_commitlog_order"]}


def _assert_same_message(record: dict, expected: dict) -> None:
    assert record["phy_offset"] == expected["commitLogOffset"]
    assert record["size"] == expected["storeSize"]
    assert (record["topic"], record["queue_id"], record["queue_offset"]) == (
        expected["topic"], expected["queueId"], expected["queueOffset"])
    assert record["msg_id"] == expected["msgId"]
    assert record["uniq_key"] == expected["uniqKey"]
    assert record["tags"] == expected["tags"]
    assert record["keys"] == [k for k in (expected["keys"] or "").split(" ") if k]
    assert record["store_timestamp"] == expected["storeTimestamp"]
    assert record["born_host"] == expected["bornHost"]
    assert record["store_host"] == expected["storeHost"]
    assert record["body_crc"] == expected["bodyCRC"]
    assert record["properties"] == dict(expected["properties"])
    if expected["bodyUtf8"] is not None:
        assert (record["body"], record["body_encoding"]) == (expected["bodyUtf8"], "utf-8")


def _get_footer(result) -> tuple[str, int, int, int]:
    """(status, next offset, min offset, max offset) from the line `get` prints beside its messages."""
    found = re.search(r"status (\w+), next offset (\d+), queue offsets \[(\d+), (\d+)\)", result.err)
    assert found, result.err
    return found[1], int(found[2]), int(found[3]), int(found[4])


def test_topics_lists_every_queue_with_offsets_counts_and_times(cli, golden_store, golden_flags, golden_expected):
    document = cli("topics", golden_store, *golden_flags, "--json").json()
    by_offset = _by_offset(golden_expected)
    rows = {(r["topic"], r["queue_id"]): r for r in document["queues"]}
    expected_queues = {(t, int(q)): v for t, qs in golden_expected["queues"].items() for q, v in qs.items()}
    assert set(rows) == set(expected_queues)
    for key, expected in expected_queues.items():
        row = rows[key]
        assert (row["min_offset"], row["max_offset"]) == (expected["minOffset"], expected["maxOffset"])
        assert row["message_count"] == expected["messageTotalInQueue"]
        entries = expected["cqEntries_queueOffset_commitLogOffset_size_tagsCode"]
        assert row["first_store_timestamp"] == by_offset[entries[0][1]]["storeTimestamp"]
        assert row["last_store_timestamp"] == by_offset[entries[-1][1]]["storeTimestamp"]
    assert document["max_phy_offset"] == golden_expected["commitlog"]["maxPhyOffset"]
    assert document["message_count"] == sum(q["messageTotalInQueue"] for q in expected_queues.values())


def test_topics_table_names_every_topic(cli, golden_store, golden_flags):
    result = cli("topics", golden_store, *golden_flags)
    rows = result.tsv()
    assert {row["topic"] for row in rows} == {"TopicA", "TopicB", "TopicC"} and len(rows) == 12
    assert rows[0]["first stored (UTC)"] == "2026-11-22T03:53:36.598Z"
    assert "3 topic(s), 12 queue(s), 520 message(s)" in result.err, "the footer goes beside the data"


@pytest.mark.parametrize("offset,count", [(0, 32), (100, 5), (95, 10), (150, 40)])
def test_get_returns_the_queue_messages_rocketmq_stored(cli, golden_store, golden_flags, golden_expected,
                                                        offset, count):
    result = cli("get", golden_store, *golden_flags, "--topic", "TopicA", "--queue", "0",
                 "--offset", str(offset), "--count", str(count), "--json")
    messages = result.json_lines()
    queue = golden_expected["queues"]["TopicA"]["0"]
    want = [e for e in queue["cqEntries_queueOffset_commitLogOffset_size_tagsCode"]
            if offset <= e[0] < offset + count]
    assert [m["queue_offset"] for m in messages] == [e[0] for e in want]
    _status, next_offset, low, high = _get_footer(result)
    assert next_offset == offset + len(want)
    assert (low, high) == (queue["minOffset"], queue["maxOffset"])
    by_offset = _by_offset(golden_expected)
    for record, entry in zip(messages, want, strict=True):
        _assert_same_message(record, by_offset[entry[1]])


def test_get_as_rocketmq_gives_rocketmqs_own_answer(cli, golden_store, golden_flags, golden_expected):
    cases = [q for q in golden_expected["queries"]["getMessage"] if q["offset"] >= 0 and q["result"]["maxOffset"]]
    assert len(cases) > 10
    for query in cases:
        args = ["--topic", query["topic"], "--queue", str(query["queueId"]), "--offset", str(query["offset"]),
                "--count", str(query["maxMsgNums"])]
        if query["subExpression"] is not None:
            args += ["--tags", query["subExpression"]]
        result = cli("get", golden_store, *golden_flags, *args, "--as-rocketmq", "--json")
        want = query["result"]
        got = (*_get_footer(result), [m["queue_offset"] for m in result.json_lines()])
        assert got == (want["status"], want["nextBeginOffset"], want["minOffset"], want["maxOffset"],
                       [m["queueOffset"] for m in want["messages"]]), query


def test_get_with_a_tag_filter_returns_only_that_tag(cli, golden_store, golden_flags, golden_expected):
    messages = cli("get", golden_store, *golden_flags, "--topic", "TopicB", "--queue", "1",
                   "--tags", "TagA", "--json").json_lines()
    expected = next(q for q in golden_expected["queries"]["getMessage"]
                    if (q["topic"], q["queueId"], q["subExpression"]) == ("TopicB", 1, "TagA"))
    assert [m["queue_offset"] for m in messages] == [m["queueOffset"] for m in expected["result"]["messages"]]
    assert {m["tags"] for m in messages} == {"TagA"}


@pytest.mark.parametrize("topic,key", [("TopicA", "hot"), ("TopicA", "order-3"), ("TopicC", "AaAa"),
                                       ("TopicB", "nope")])
def test_query_key_finds_the_messages_carrying_the_key(cli, golden_store, golden_flags, golden_expected,
                                                       topic, key):
    messages = cli("query-key", golden_store, *golden_flags, "--topic", topic, "--key", key,
                   "--count", "64", "--json").json_lines()
    expected = next(q for q in golden_expected["queries"]["queryMessage"]
                    if (q["topic"], q["key"], q["maxNum"]) == (topic, key, 64)) \
        if key == "hot" else None
    by_offset = _by_offset(golden_expected)
    carriers = [o for o, m in by_offset.items() if m["topic"] == topic
                and (key in (m["keys"] or "").split(" ") or m["uniqKey"] == key)]
    got = [m["phy_offset"] for m in messages]
    assert got == sorted(carriers)
    if expected is not None:
        assert got == [m["commitLogOffset"] for m in expected["result"]["messages"]]
    for record in messages:
        _assert_same_message(record, by_offset[record["phy_offset"]])


@pytest.mark.parametrize("case", range(8))
def test_query_key_as_rocketmq_gives_rocketmqs_own_answer(cli, golden_store, golden_flags, golden_expected, case):
    queries = [q for q in golden_expected["queries"]["queryMessage"] if q["key"] in ("Aa", "BB", "hot", "even")]
    query = queries[case * len(queries) // 8]
    args = ["--topic", query["topic"], "--key", query["key"], "--count", str(query["maxNum"]),
            "--begin", str(query["begin"])]
    if query["end"] < 2**63 - 1:
        args += ["--end", str(query["end"])]
    messages = cli("query-key", golden_store, *golden_flags, *args, "--as-rocketmq", "--json").json_lines()
    assert [m["phy_offset"] for m in messages] == [m["commitLogOffset"] for m in query["result"]["messages"]]


def test_query_key_time_window_bounds_the_result(cli, golden_store, golden_flags, golden_expected):
    by_offset = _by_offset(golden_expected)
    hot = sorted(o for o, m in by_offset.items() if m["topic"] == "TopicA" and "hot" in (m["keys"] or "").split())
    begin, end = by_offset[hot[5]]["storeTimestamp"], by_offset[hot[9]]["storeTimestamp"]
    messages = cli("query-key", golden_store, *golden_flags, "--topic", "TopicA", "--key", "hot",
                   "--begin", str(begin), "--end", str(end), "--json").json_lines()
    assert [m["phy_offset"] for m in messages] == hot[5:10]


def test_query_id_and_query_offset_return_the_record(cli, golden_store, golden_flags, golden_expected):
    expected = golden_expected["messages_in_commitlog_order"][7]
    by_id = cli("query-id", golden_store, *golden_flags, expected["msgId"], "--json").json()
    _assert_same_message(by_id, expected)
    by_offset = cli("query-offset", golden_store, *golden_flags, str(expected["commitLogOffset"]), "--json").json()
    assert by_offset == by_id
    table = cli("query-id", golden_store, *golden_flags, expected["msgId"].lower())
    assert table.code == 0 and expected["msgId"] in table.out


@pytest.mark.parametrize("form", ["epoch", "utc", "offset", "naive"])
def test_offset_by_time_gives_the_first_message_stored_at_or_after(cli, golden_store, golden_flags,
                                                                   golden_expected, form):
    from datetime import datetime, timedelta, timezone

    by_offset = _by_offset(golden_expected)
    entries = golden_expected["queues"]["TopicA"]["0"]["cqEntries_queueOffset_commitLogOffset_size_tagsCode"]
    times = [by_offset[e[1]]["storeTimestamp"] for e in entries]
    probe = times[120] - 1 if times[119] < times[120] - 1 else times[120]
    moment = datetime.fromtimestamp(probe / 1000, tz=timezone.utc)
    when = {
        "epoch": str(probe),
        "utc": moment.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "offset": moment.astimezone(timezone(timedelta(hours=1))).isoformat(timespec="milliseconds"),
        "naive": moment.replace(tzinfo=None).isoformat(timespec="milliseconds"),
    }[form]
    document = cli("offset-by-time", golden_store, *golden_flags, "--topic", "TopicA", "--queue", "0",
                   "--time", when, "--json").json()
    want = next(i for i, t in enumerate(times) if t >= probe)
    assert document["queue_offset"] == want
    assert document["store_timestamp"] == times[want]
    assert document["timestamp_ms"] == probe


def test_progress_on_a_store_without_consumers_is_empty(cli, golden_store, golden_flags):
    document = cli("progress", golden_store, *golden_flags, "--json").json()
    assert document == {"groups": [], "total_lag": 0}


def test_global_options_work_before_the_subcommand_too(cli, golden_store, golden_flags):
    after = cli("topics", golden_store, *golden_flags, "--json").json()
    before = cli("--json", *golden_flags, "topics", golden_store).json()
    assert before == after


@pytest.mark.parametrize("kind", ["broker.conf", "rocketmq.json", "rocketstore.json"])
def test_config_file_gives_the_geometry(cli, golden_store, golden_flags, golden_expected, golden_config,
                                        tmp_path: Path, kind):
    import json

    rocketmq = {k: golden_expected["store_config"][k] for k in
                ("mappedFileSizeCommitLog", "mappedFileSizeConsumeQueue", "maxHashSlotNum", "maxIndexNum")}
    config = tmp_path / kind
    if kind == "broker.conf":
        config.write_text("# a comment\nbrokerName=b\n" + "".join(f"{k}={v}\n" for k, v in rocketmq.items()))
    elif kind == "rocketmq.json":
        config.write_text(json.dumps({**rocketmq, "brokerName": "b"}))
    else:
        config.write_text(json.dumps({"geometry": golden_config.geometry(), "store_host": "127.0.0.1:10911"}))
    via_config = cli("--config", config, "topics", golden_store, "--json").json()
    assert via_config == cli("topics", golden_store, *golden_flags, "--json").json()


def test_read_commands_never_write(cli, golden_store, golden_flags, golden_expected):
    before = tree_digest(golden_store)
    msg = golden_expected["messages_in_commitlog_order"][3]
    for args in (["topics"], ["progress"], ["verify"],
                 ["get", "--topic", "TopicC", "--queue", "2"],
                 ["query-key", "--topic", "TopicA", "--key", "even"],
                 ["query-id", msg["msgId"]], ["query-offset", str(msg["commitLogOffset"])],
                 ["offset-by-time", "--topic", "TopicA", "--queue", "1", "--time", "2026-11-22"],
                 ["dump", "commitlog/00000000000000065536"], ["dump", "checkpoint"]):
        result = cli(args[0], golden_store, *args[1:], *golden_flags)
        assert result.code == 0, result.err
    assert tree_digest(golden_store) == before


def test_read_only_commands_infer_the_geometry_of_a_store_rocketmq_wrote(cli, golden_store, golden_expected):
    result = cli("topics", golden_store, "--json")
    assert result.code == 0, result.err
    assert ("note: geometry inferred from the files: commitlog files of 65536 bytes, consume-queue files of 100 "
            "entries, index files of 100 hash slots, 400 entries (RocketMQ's ratio of 4 entries per slot)"
            ) in result.err
    assert result.json()["message_count"] == len(golden_expected["messages_in_commitlog_order"])
    assert not (golden_store / "config" / "rocketstore.json").exists(), "a read-only command records nothing"


def test_flags_win_and_the_files_fill_in_the_rest(cli, golden_store, golden_expected):
    before = tree_digest(golden_store)
    partial = cli("topics", golden_store, "--json", "--commitlog-file-size", "65536")
    assert partial.code == 0, partial.err
    assert "commitlog files" not in partial.err and "consume-queue files of 100 entries" in partial.err
    assert partial.json()["message_count"] == len(golden_expected["messages_in_commitlog_order"])
    # the index size fits 200 slots x 380 entries as well as RocketMQ's 100 x 400: given flags win
    other = cli("topics", golden_store, "--json", "--index-hash-slots", "200", "--index-max-entries", "380")
    assert other.code == 0, other.err
    assert "index files" not in other.err
    assert tree_digest(golden_store) == before


def test_a_flag_the_files_contradict_is_one_line(cli, golden_store):
    line = assert_one_line_error(cli("topics", golden_store, "--consume-queue-file-entries", "300"))
    assert line.endswith("--consume-queue-file-entries 300 does not match the geometry of the store's files: "
                         "consume-queue files of 100 entries"), line


def test_writable_commands_take_no_geometry_from_the_files(cli, golden_store):
    before = tree_digest(golden_store)
    line = assert_one_line_error(cli("put", golden_store, "--topic", "TopicA", "--body", "x",
                                     "--commitlog-file-size", "65536"))
    assert "give --consume-queue-file-entries 100 --index-hash-slots 100 --index-max-entries 400" in line, line
    assert tree_digest(golden_store) == before, "refused before the store was opened for writing"
