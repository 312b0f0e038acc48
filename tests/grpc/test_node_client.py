"""A second language: the official RocketMQ 5 Node.js client (npm rocketmq-client-nodejs 1.0.8) sends and
receives through a simple consumer against the same `serve`, with messages crossing to and from the
official Python client. The client is installed by the test set-up (npm, cached in the temp folder)."""

from __future__ import annotations

import pytest

from rocketstore import MessageStore
from rocketstore.format.sysflag import SysFlag
from tests.cli.cliharness import run_cli
from tests.grpc.grpc_support import GrpcBroker, node_client

pytestmark = pytest.mark.broker


def test_messages_cross_between_the_node_and_the_python_clients(grpc_broker: GrpcBroker, client5, node_modules,
                                                                tmp_path, store_dir):
    grpc_broker.create_topic("NodeTopic")
    home = tmp_path / "node-home"
    sent = node_client(node_modules, home, "produce", grpc_broker.endpoint, "NodeTopic", "3", "TagN", "node-")
    receipts = [line for line in sent if "sent" in line]
    assert [r.get("error") for r in receipts] == [None] * 3, receipts
    by_python = [m for m in client5.run("consume", "--endpoint", grpc_broker.endpoint, "--topic", "NodeTopic",
                                        "--group", "PyReadsNode", "--expr", "TagN", "--expect", "3",
                                        "--timeout", "20") if "body" in m]
    assert sorted((m["body"], m["tag"], m["keys"][0]) for m in by_python) == [
        (f"node--body-{i}", "TagN", f"node-{i}") for i in range(3)]

    py_sent = client5.run("produce", "--endpoint", grpc_broker.endpoint, "--topic", "NodeTopic", "--count", "2",
                          "--tag", "TagP", "--key-prefix", "py-")
    assert [r.get("error") for r in py_sent if "sent" in r] == [None] * 2
    by_node = [m for m in node_client(node_modules, home, "consume", grpc_broker.endpoint, "NodeTopic", "NodeReadsPy",
                                "TagP", "2", "20") if "body" in m]
    assert sorted((m["body"], m["tag"], m["keys"][0]) for m in by_node) == [
        (f"py-body-{i}", "TagP", f"py-{i}") for i in range(2)]
    assert grpc_broker.stop() == 0

    with MessageStore.open(store_dir, read_only=True) as store:
        stored = [m for q in store.queues()["NodeTopic"] for m in store.iter_queue("NodeTopic", q)]
    want = [(f"node--body-{i}".encode(), "TagN") for i in range(3)] + [(f"py-body-{i}".encode(), "TagP")
                                                                      for i in range(2)]
    assert sorted((m.body, m.tags) for m in stored) == sorted(want)
    assert {m.uniq_key for m in stored} >= {r["message_id"] for r in receipts}


def test_node_reads_a_zlib_body_the_legacy_client_sent_to_a_topic_made_by_admin(grpc_broker: GrpcBroker, real_client,
                                                                                node_modules, tmp_path):
    """The legacy C++ client compresses a body over 4 KiB with zlib (sysFlag COMPRESSED); the Node.js client
    reads it whole, on a topic `rocketstore admin update-topic` created."""
    made = run_cli("admin", "update-topic", "-n", grpc_broker.namesrv, "-t", "BigBodies", "-r", "2", "-w", "2")
    assert made.code == 0, made.err
    sent = real_client.run("produce", "--namesrv", grpc_broker.namesrv, "--topic", "BigBodies", "--count", "2",
                           "--tags", "TagBig", "--key-prefix", "big", "--body-size", "6000")
    assert [r.get("status") for r in sent if "status" in r or "error" in r] == [0, 0], sent
    with MessageStore.open(grpc_broker.store, read_only=True) as store:  # stored compressed, as sent
        stored = [m for q in (0, 1) for m in store.iter_queue("BigBodies", q)]
    assert len(stored) == 2 and all(m.sys_flag & SysFlag.COMPRESSED and len(m.body) < 6000 for m in stored)
    got = [m for m in node_client(node_modules, tmp_path / "node-home", "consume", grpc_broker.endpoint, "BigBodies",
                                  "NodeReadsBig", "TagBig", "2", "30") if "body" in m]
    want = sorted(f"big-body-{i}".ljust(6000, "x") for i in range(2))
    assert sorted(m["body"] for m in got) == want and [m["size"] for m in got] == [6000, 6000]
