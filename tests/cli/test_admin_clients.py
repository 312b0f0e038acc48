"""`rocketstore admin` seen by real clients: a topic made FIFO by `update-topic --type FIFO` used by the
official RocketMQ 5 Python client, and a group's progress and an offset reset by time seen by the legacy
C++ client (PyPI rocketmq 0.4.4), whose next run gets the messages again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore.testing import RunningBroker, rocketmq_broker
from tests.broker.broker_support import RealClient, client_venv_python
from tests.cli.cliharness import CliResult, run_cli
from tests.grpc.grpc_support import Client5, client5_venv_python

pytestmark = pytest.mark.broker

REPLAYED = 10


@pytest.fixture
def served() -> Iterator[RunningBroker]:
    with rocketmq_broker(grpc=True, extra_args=["--delay-levels", " ".join(["1s"] * 18)]) as broker:
        yield broker


def admin(broker: RunningBroker, *args: str) -> CliResult:
    return run_cli("admin", *args, "-n", broker.namesrv_addr)


def test_a_fifo_topic_made_by_admin_serves_the_rocketmq5_client(served: RunningBroker, tmp_path: Path) -> None:
    assert served.grpc_endpoint is not None
    client5 = Client5(client5_venv_python(), tmp_path / "client5-home")
    made = admin(served, "update-topic", "-t", "FifoAdmin", "-r", "2", "-w", "2", "--type", "FIFO").tsv()
    assert made[0]["message type"] == "FIFO"
    sent = client5.run("produce", "--endpoint", served.grpc_endpoint, "--topic", "FifoAdmin", "--count", "3",
                       "--message-group", "order-7", "--key-prefix", "f-")
    receipts = [r for r in sent if "sent" in r]
    assert [r.get("error") for r in receipts] == [None] * 3, receipts
    assert len({r["offset"] for r in receipts}) == 3
    normal = [r for r in client5.run("produce", "--endpoint", served.grpc_endpoint, "--topic", "FifoAdmin",
                                     "--key-prefix", "n-") if "sent" in r]
    # the route says FIFO only: the client refuses a message without a group
    assert normal and "queue access type:FIFO" in normal[0].get("error", ""), normal
    got = [m for m in client5.run("consume", "--endpoint", served.grpc_endpoint, "--topic", "FifoAdmin",
                                  "--group", "GFifoAdmin", "--expect", "3", "--timeout", "20") if "body" in m]
    assert [m["body"] for m in got] == ["f-body-0", "f-body-1", "f-body-2"]
    status = admin(served, "topic-status", "-t", "FifoAdmin", "--json").json_lines()
    assert sorted(r["max_offset"] for r in status) == [0, 3]  # one message group: one queue


def _progress(broker: RunningBroker, group: str, want_diff: int) -> list[dict]:
    """consumer-progress of `group`, read again until its diff total is `want_diff` (the client commits
    its last offsets as it shuts down) or 15 s passed."""
    deadline = time.monotonic() + 15
    while True:
        rows = [r for r in admin(broker, "consumer-progress", "-g", group, "--json").json_lines()
                if not r["topic"].startswith("%RETRY%")]
        if sum(r["diff"] for r in rows) == want_diff or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


def test_progress_and_a_reset_by_time_seen_by_the_legacy_client(served: RunningBroker, tmp_path: Path) -> None:
    client = RealClient(client_venv_python(), tmp_path / "client-home")
    assert admin(served, "update-topic", "-t", "Replay", "-r", "2", "-w", "2").code == 0
    sent = [r for r in client.run("produce", "--namesrv", served.namesrv_addr, "--topic", "Replay",
                                  "--count", str(REPLAYED)) if "status" in r or "error" in r]
    assert [r.get("status") for r in sent] == [0] * REPLAYED, sent
    bodies = sorted(f"k-body-{i}" for i in range(REPLAYED))

    first = client.run("push", "--namesrv", served.namesrv_addr, "--topic", "Replay", "--group", "GReplay",
                       "--expect", str(REPLAYED), "--timeout", "40")
    assert sorted(m["body"] for m in first if "queue_offset" in m) == bodies
    rows = _progress(served, "GReplay", 0)
    assert [(r["topic"], r["queue_id"]) for r in rows] == [("Replay", 0), ("Replay", 1)]
    assert sum(r["consumer_offset"] for r in rows) == REPLAYED and sum(r["diff"] for r in rows) == 0

    reset = admin(served, "reset-offset-by-time", "-g", "GReplay", "-t", "Replay", "-s", "0", "--json").json_lines()
    assert [(r["timestamp_offset"], r["reset_offset"], r["how"]) for r in reset] == [(0, 0, "offset committed")] * 2
    rows = _progress(served, "GReplay", REPLAYED)
    assert [r["consumer_offset"] for r in rows] == [0, 0] and sum(r["diff"] for r in rows) == REPLAYED

    again = client.run("push", "--namesrv", served.namesrv_addr, "--topic", "Replay", "--group", "GReplay",
                       "--expect", str(REPLAYED), "--timeout", "40")
    assert sorted(m["body"] for m in again if "queue_offset" in m) == bodies
    assert sum(r["diff"] for r in _progress(served, "GReplay", 0)) == 0
