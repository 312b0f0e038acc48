"""Feeding a store from the shell (`put`) and reading it back (`get`, `--follow`, `topics`, `progress`)."""

from __future__ import annotations

import base64
import json
import selectors
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cliharness import ORDERS_LINES, SMALL_GEOMETRY, assert_one_line_error, command_env, tree_digest


def test_put_body_then_get_returns_it(cli, tmp_path: Path):
    store = tmp_path / "store"
    put = cli("put", store, *SMALL_GEOMETRY, "--topic", "Greetings", "--queue", "2", "--tags", "Hello",
              "--keys", "k1,k2", "--property", "lang=en", "--property", "x=a=b", "--body", "héllo wörld",
              "--json").json()
    assert put["status"] == "PUT_OK"
    assert (put["topic"], put["queue_id"], put["queue_offset"], put["phy_offset"]) == ("Greetings", 2, 0, 0)
    got = cli("get", store, "--topic", "Greetings", "--queue", "2", "--json")
    assert "status FOUND, next offset 1," in got.err
    (message,) = got.json_lines()
    assert (message["body"], message["body_encoding"]) == ("héllo wörld", "utf-8")
    assert message["tags"] == "Hello" and message["keys"] == ["k1", "k2"]
    assert message["properties"]["lang"] == "en" and message["properties"]["x"] == "a=b"
    assert message["msg_id"] == put["msg_id"] and message["size"] == put["size"]
    assert message["store_timestamp"] == put["store_timestamp"]


def test_put_file_keeps_binary_bodies(cli, tmp_path: Path):
    payload = bytes(range(256)) * 3
    body = tmp_path / "payload.bin"
    body.write_bytes(payload)
    store = tmp_path / "store"
    assert cli("put", store, *SMALL_GEOMETRY, "--topic", "Blobs", "--file", body).code == 0
    assert cli("put", store, "--topic", "Blobs", "--file", "-", stdin=b"\xff\xfe from stdin").code == 0
    got = cli("get", store, "--topic", "Blobs", "--queue", "0", "--json").json_lines()
    bodies = [(m["body"], m["body_encoding"]) for m in got]
    assert bodies[0] == (base64.b64encode(payload).decode("ascii"), "base64")
    assert base64.b64decode(bodies[1][0]) == b"\xff\xfe from stdin"


def test_put_lines_puts_one_message_per_line_in_order(cli, small_store: Path):
    got = cli("get", small_store, "--topic", "Orders", "--queue", "1", "--count", "100", "--json").json_lines()
    assert [m["body"] for m in got] == ORDERS_LINES[1::2]
    assert [m["queue_offset"] for m in got] == list(range(20))
    assert all(m["keys"] == ["batch-1", "orders"] and m["tags"] == "Created" for m in got)
    more = cli("put", small_store, "--topic", "Orders", "--queue", "1", "--lines", "--json",
               stdin="one\ntwo\n\nthree\r\n").json_lines()
    assert [r["queue_offset"] for r in more] == [20, 21, 22]
    tail = cli("get", small_store, "--topic", "Orders", "--queue", "1", "--offset", "20", "--json").json_lines()
    assert [m["body"] for m in tail] == ["one", "two", "three"]
    assert all(r["status"] == "PUT_OK" for r in more)


def test_put_table_output_names_the_status(cli, tmp_path: Path):
    result = cli("put", tmp_path / "store", *SMALL_GEOMETRY, "--topic", "T", "--body", "x")
    assert result.code == 0, result.err
    assert "PUT_OK" in result.out and "T" in result.out


def test_get_count_crosses_the_per_call_cap(cli, small_store: Path):
    got = cli("get", small_store, "--topic", "Orders", "--queue", "0", "--offset", "3", "--count", "15", "--json")
    assert [m["queue_offset"] for m in got.json_lines()] == list(range(3, 18))
    assert "next offset 18," in got.err


def test_topics_and_query_key_on_a_store_made_with_put(cli, small_store: Path):
    topics = cli("topics", small_store, "--json").json()
    counts = {(q["topic"], q["queue_id"]): q["message_count"] for q in topics["queues"]}
    assert counts == {("Audit", 0): 1, ("Orders", 0): 20, ("Orders", 1): 20}
    found = cli("query-key", small_store, "--topic", "Audit", "--key", "audit-1", "--json").json_lines()
    assert [m["body"] for m in found] == ["store created"]
    assert found[0]["properties"]["who"] == "tests"


def _read_lines(proc: subprocess.Popen, want: int, timeout_s: float) -> list[str]:
    lines: list[str] = []
    selector = selectors.DefaultSelector()
    assert proc.stdout is not None
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout_s
    buffered = b""
    while len(lines) < want and time.monotonic() < deadline:
        if not selector.select(timeout=0.2):
            continue
        chunk = proc.stdout.read1(65536)  # type: ignore[attr-defined]
        if not chunk:
            break
        buffered += chunk
        *complete, buffered = buffered.split(b"\n")
        lines += [line.decode("utf-8") for line in complete if line.strip()]
    return lines


def test_get_follow_prints_new_messages_as_they_arrive(cli, small_store: Path):
    argv = [sys.executable, "-m", "rocketstore.cli", "get", str(small_store), "--topic", "Orders", "--queue",
            "0", "--offset", "18", "--follow", "--interval", "0.1", "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=command_env())
    try:
        first = _read_lines(proc, 2, 30)
        assert [json.loads(line)["queue_offset"] for line in first] == [18, 19]
        put = cli("put", small_store, "--topic", "Orders", "--queue", "0", "--lines", stdin="new-1\nnew-2\n")
        assert put.code == 0, put.err
        later = [json.loads(line) for line in _read_lines(proc, 2, 30)]
        assert [(m["queue_offset"], m["body"]) for m in later] == [(20, "new-1"), (21, "new-2")]
        assert proc.poll() is None  # still following
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_progress_shows_committed_offsets_and_lag(cli, small_store: Path):
    from rocketstore import MessageStore

    with MessageStore.open(small_store) as store:
        store.commit_offset("billing", "Orders", 0, 5)
        store.commit_offset("billing", "Orders", 1, 20)
        store.commit_offset("audit", "Audit", 0, 0)
    document = cli("progress", small_store, "--json").json()
    rows = {(r["group"], r["topic"], r["queue_id"]): (r["committed_offset"], r["max_offset"], r["lag"])
            for r in document["groups"]}
    assert rows == {("billing", "Orders", 0): (5, 20, 15), ("billing", "Orders", 1): (20, 20, 0),
                    ("audit", "Audit", 0): (0, 1, 1)}
    assert document["total_lag"] == 16
    only = cli("progress", small_store, "--group", "audit", "--json").json()
    assert [(r["group"], r["lag"]) for r in only["groups"]] == [("audit", 1)]
    table = cli("progress", small_store)
    assert {row["group"] for row in table.tsv()} == {"billing", "audit"} and "total lag 16" in table.err


def test_writers_fail_in_one_line_while_another_process_holds_the_store(cli, small_store: Path):
    from rocketstore import MessageStore

    with MessageStore.open(small_store):
        # not reading `lock` here: closing any descriptor of it would drop this process's POSIX lock
        before = tree_digest(small_store, skip=("lock",))
        for args in (["put", small_store, "--topic", "Orders", "--body", "x"], ["recover", small_store]):
            line = assert_one_line_error(cli(*args), code=1)
            assert "locked" in line
        reader = cli("topics", small_store, "--json")  # readers take no lock
        assert reader.code == 0, reader.err
        assert tree_digest(small_store, skip=("lock",)) == before


@pytest.mark.parametrize("interval", ["0.1", "600"])  # Ctrl-C does not wait for the next poll
def test_get_follow_ends_quietly_on_ctrl_c(small_store: Path, interval: str):
    import signal

    argv = [sys.executable, "-m", "rocketstore.cli", "get", str(small_store), "--topic", "Audit", "--queue", "0",
            "--offset", "0", "--follow", "--interval", interval, "--json"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=command_env())
    try:
        assert [json.loads(line)["body"] for line in _read_lines(proc, 1, 30)] == ["store created"]
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and err == b""


def test_put_to_the_schedule_topic_is_refused_with_one_line(cli, small_store: Path):
    before = tree_digest(small_store)
    result = cli("put", small_store, "--topic", "SCHEDULE_TOPIC_XXXX", "--property", "DELAY=1", "--body", "x")
    line = assert_one_line_error(result)
    assert "SCHEDULE_TOPIC_XXXX" in line and "system topic" in line
    assert tree_digest(small_store) == before
