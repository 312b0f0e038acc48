"""`rocketstore admin` against `rocketstore serve` and against the real RocketMQ 4.9.8 name server and
broker: the same commands, in the same order, against both, and their JSON Lines compared with what
differs by nature (addresses, times, message ids, versions) masked. Skipped where the Java broker is
absent (tests/broker/differential.py)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient
from tests.broker.broker_support import BrokerProcess, create_store
from tests.broker.differential import LAUNCHER, JavaBroker, require_java_broker, run_tool
from tests.cli.cliharness import CliResult, run_cli

pytestmark = pytest.mark.broker

TOPIC = "AdminDiff"
QUEUES = 4
GROUP = "GAdminDiff"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"  # the Java broker registers it a minute after start
# Fields that differ between two brokers by nature: where they are, when they wrote, how they number.
MASKED = {"broker_addr", "addr", "msg_id", "offset_msg_id", "uniq_key", "phy_offset", "born_host", "store_host",
          "born_timestamp", "store_timestamp", "last_update_timestamp", "last_timestamp", "version", "put_tps",
          "get_tps", "put_today", "get_today", "disk_ratio", "body_crc", "properties", "size"}
# properties and size: RocketMQ 4.9.8's SendMessageProcessor re-writes the properties in its map's order,
# serve keeps the producer's order (both leave WAIT=true out).


@dataclass
class Side:
    name: str
    namesrv: str
    addr: str

    def admin(self, *args: str) -> CliResult:
        return run_cli("admin", *(a.format(broker=self.addr) for a in args), "-n", self.namesrv, "--timeout", "10")

    def lines(self, *args: str) -> list[dict[str, Any]]:
        """The records of `admin ARGS --json`: JSON Lines, or the one document of a one-record command."""
        result = self.admin(*args, "--json")
        records = [result.json()] if result.out.startswith("{\n") else result.json_lines()
        return [_masked(r) for r in records]


def _masked(record: dict[str, Any]) -> dict[str, Any]:
    return {k: ("<masked>" if k in MASKED and v is not None else v) for k, v in record.items()}


@dataclass
class Pair:
    ours: Side
    java: Side

    def same(self, *args: str) -> list[dict[str, Any]]:
        """Run `admin ARGS --json` against both; assert the masked records are equal; return ours."""
        mine, theirs = self.ours.lines(*args), self.java.lines(*args)
        assert mine == theirs, (args, mine, theirs)
        return mine

    def both(self, *args: str) -> tuple[CliResult, CliResult]:
        return self.ours.admin(*args), self.java.admin(*args)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    require_java_broker()
    root = tmp_path_factory.mktemp("admin-diff")
    java = JavaBroker(root / "java").start()
    ours = BrokerProcess(create_store(root / "store"), root / "serve.log").start()
    try:
        yield Pair(Side("serve", ours.namesrv, ours.addr), Side("java", java.namesrv, java.addr))
    finally:
        ours.stop()
        java.stop()


def _wait_for(check: Any, what: str, timeout_s: float = 30) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"{what} within {timeout_s} s"
            return value
        time.sleep(0.5)


def test_topic_commands_agree(pair: Pair) -> None:
    made = pair.same("update-topic", "-t", TOPIC, "-c", "DefaultCluster", "-r", str(QUEUES), "-w", str(QUEUES))
    assert [(r["broker_name"], r["read_queues"], r["perm"]) for r in made] == [("broker-a", QUEUES, 6)]
    route = pair.same("topic-route", "-t", TOPIC)
    assert route == [{"broker_name": "broker-a", "broker_addr": "<masked>", "read_queues": QUEUES,
                      "write_queues": QUEUES, "perm": 6, "topic_sys_flag": 0}]
    for side in (pair.ours, pair.java):
        _wait_for(lambda s=side: TOPIC in [r["topic"] for r in s.lines("topic-list")], f"{side.name} lists {TOPIC}")
    mine = {r["topic"] for r in pair.ours.lines("topic-list")} - {TRANS_HALF_TOPIC}
    theirs = {r["topic"] for r in pair.java.lines("topic-list")} - {TRANS_HALF_TOPIC}
    assert mine == theirs and TOPIC in mine


def test_messages_sent_and_queried_agree(pair: Pair) -> None:
    pair.same("update-topic", "-t", TOPIC, "-c", "DefaultCluster", "-r", str(QUEUES), "-w", str(QUEUES))
    sent: dict[str, list[dict[str, Any]]] = {"serve": [], "java": []}
    for i in range(6):
        for side in (pair.ours, pair.java):
            result = side.admin("send-message", "-t", TOPIC, "-p", f"diff-{i}", "-k", f"key-{i % 2}", "-c", "TagD",
                                "-i", str(i % QUEUES), "--json").json()
            sent[side.name].append(result)
    assert [_masked(r) for r in sent["serve"]] == [_masked(r) for r in sent["java"]]
    assert [r["queue_offset"] for r in sent["serve"]] == [0, 0, 0, 0, 1, 1]

    status = pair.same("topic-status", "-t", TOPIC)
    assert [(r["queue_id"], r["max_offset"]) for r in status] == [(0, 2), (1, 2), (2, 1), (3, 1)]

    def by_key(side: Side) -> list[dict[str, Any]]:
        return side.lines("query-msg-by-key", "-t", TOPIC, "-k", "key-1")

    found = [sorted(_wait_for(lambda s=side: len(by_key(s)) == 3 and by_key(s), f"{side.name}'s index"),
                    key=lambda r: r["body"]) for side in (pair.ours, pair.java)]
    assert found[0] == found[1] and [r["body"] for r in found[0]] == ["diff-1", "diff-3", "diff-5"]

    at = pair.same("query-msg-by-offset", "-t", TOPIC, "-b", "broker-a", "-i", "1", "-o", "1")
    assert at[0]["body"] == "diff-5" and at[0]["keys"] == ["key-1"]
    by_id = [side.lines("query-msg-by-id", "-i", sent[side.name][2]["offset_msg_id"])
             for side in (pair.ours, pair.java)]
    assert by_id[0] == by_id[1] and by_id[0][0]["body"] == "diff-2"


def _commit(side: Side, offsets: list[int]) -> None:
    with RemotingClient(side.addr) as client:
        for queue_id, offset in enumerate(offsets):
            assert client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {
                "consumerGroup": GROUP, "topic": TOPIC, "queueId": queue_id, "commitOffset": offset,
            }).code == ResponseCode.SUCCESS


def test_groups_progress_and_reset_agree(pair: Pair) -> None:
    made = pair.same("update-sub-group", "-g", GROUP, "-c", "DefaultCluster", "-r", "5")
    assert made[0]["retry_max_times"] == 5
    for side in (pair.ours, pair.java):
        assert side.admin("send-message", "-t", TOPIC, "-p", "one more", "-i", "0").code == 0
        _commit(side, [1, 1, 1, 1])
    progress = pair.same("consumer-progress", "-g", GROUP, "-t", TOPIC)
    assert [(r["queue_id"], r["consumer_offset"]) for r in progress] == [(q, 1) for q in range(QUEUES)]
    assert all(r["diff"] == r["broker_offset"] - 1 for r in progress)

    reset = pair.same("reset-offset-by-time", "-g", GROUP, "-t", TOPIC, "-s", "0")
    assert [(r["queue_id"], r["timestamp_offset"], r["reset_offset"], r["how"]) for r in reset] == [
        (q, 0, 0, "offset committed") for q in range(QUEUES)]
    after = pair.same("consumer-progress", "-g", GROUP, "-t", TOPIC)
    assert [r["consumer_offset"] for r in after] == [0] * QUEUES

    # Past the last message, RocketMQ's SEARCH_OFFSET_BY_TIMESTAMP answers the last message's offset and
    # serve's store the queue's end (MessageStore.offset_by_time): the timestamp offsets are left out.
    future = [[{k: v for k, v in r.items() if k != "timestamp_offset"} for r in side.lines(
        "reset-offset-by-time", "-g", GROUP, "-t", TOPIC, "-s", "2999-01-01T00:00:00Z", "--no-force")]
        for side in (pair.ours, pair.java)]
    assert future[0] == future[1] and [r["reset_offset"] for r in future[0]] == [0] * QUEUES  # never forward
    pair.same("delete-sub-group", "-g", GROUP, "-c", "DefaultCluster")


def test_cluster_and_broker_status_agree(pair: Pair) -> None:
    clusters = pair.same("cluster-list")
    assert [(r["cluster"], r["broker_name"], r["broker_id"]) for r in clusters] == [("DefaultCluster", "broker-a", 0)]
    mine, theirs = (set(side.lines("broker-status", "-b", "{broker}")[0]) for side in (pair.ours, pair.java))
    shared = {"brokerVersionDesc", "commitLogMaxOffset", "msgPutTotalTodayNow", "putTps", "runtime"}
    assert shared <= mine & theirs and len(mine & theirs) > 30, (mine, theirs)


def test_failures_and_delete_agree(pair: Pair) -> None:
    ours, java = pair.both("topic-route", "-t", "NoSuchTopicHere")
    assert ours.code == java.code == 1 and "TOPIC_NOT_EXIST" in ours.err and "TOPIC_NOT_EXIST" in java.err
    ours, java = pair.both("delete-topic", "-t", "SELF_TEST_TOPIC", "-c", "DefaultCluster")
    assert ours.code == java.code == 1 and "conflict with system topic" in ours.err, (ours.err, java.err)
    pair.same("update-topic", "-t", "AdminDoomed", "-c", "DefaultCluster", "-r", "1", "-w", "1")
    deleted = pair.same("delete-topic", "-t", "AdminDoomed", "-c", "DefaultCluster")
    assert [r["from"] for r in deleted] == ["broker", "name server"]
    for side in (pair.ours, pair.java):
        assert "AdminDoomed" not in [r["topic"] for r in side.lines("topic-list")]


ONLINE_TOPIC = "AdminOnline"
ONLINE_GROUP = "GAdminOnline"
ONLINE_MESSAGES = 8


def _diff_total(side: Side) -> int | None:
    rows = side.lines("consumer-progress", "-g", ONLINE_GROUP, "-t", ONLINE_TOPIC)
    return sum(r["diff"] for r in rows) if rows else None


def test_a_reset_while_consumers_are_online_is_told_to_them(pair: Pair, tmp_path: Path) -> None:
    """INVOKE_BROKER_TO_RESET_OFFSET with the Java push consumer online: each broker tells it the offsets
    of the time (RESET_CONSUMER_CLIENT_OFFSET), and the running consumer gets every message again."""
    for side in (pair.ours, pair.java):
        out = run_tool("producer", side.namesrv, ONLINE_TOPIC, str(ONLINE_MESSAGES))
        assert f'"sent":{ONLINE_MESSAGES}' in out, out
    consumers = {}
    for side in (pair.ours, pair.java):
        with open(tmp_path / f"{side.name}.out", "wb") as out_file:
            consumers[side.name] = subprocess.Popen(
                [str(LAUNCHER), "consumer", side.namesrv, ONLINE_TOPIC, ONLINE_GROUP,
                 "--expect", str(2 * ONLINE_MESSAGES), "--timeout", "90"], stdout=out_file, stderr=subprocess.STDOUT)
    try:
        for side in (pair.ours, pair.java):  # consumed, and the offsets committed (every 5 s by the client)
            _wait_for(lambda s=side: _diff_total(s) == 0, f"{side.name}: {ONLINE_GROUP} caught up", 60)
        told = pair.same("reset-offset-by-time", "-g", ONLINE_GROUP, "-t", ONLINE_TOPIC, "-s", "0")
        assert [(r["queue_id"], r["reset_offset"], r["how"]) for r in told] == [
            (q, 0, "consumers told") for q in range(4)]
        for name, proc in consumers.items():
            assert proc.wait(120) == 0, (tmp_path / f"{name}.out").read_text(errors="replace")[-3000:]
    finally:
        for proc in consumers.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
    for side in (pair.ours, pair.java):
        lines = [json.loads(line) for line in (tmp_path / f"{side.name}.out").read_text().splitlines()
                 if line.startswith("{")]
        bodies = sorted(m["body"] for m in lines if "body" in m)
        assert len(bodies) == 2 * ONLINE_MESSAGES and bodies[::2] == bodies[1::2], (side.name, bodies)
