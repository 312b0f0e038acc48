"""`serve --topic NAME[:QUEUES[:TYPE]]`: topics created at start, with RocketMQ 5's message.type attribute,
seen by both protocols and kept across a restart; a bad spec is a usage error naming it."""

from __future__ import annotations

import json

import grpc
import pytest
from click.testing import CliRunner

from rocketstore.broker.grpc.protos import pb
from rocketstore.cli.serve import serve
from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient
from rocketstore.testing import rocketmq_broker
from tests.grpc.grpc_support import GrpcBroker, call

ALL_TYPES = [pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION]


@pytest.mark.parametrize(("spec", "reason"), [
    ("orders:many", "queues 'many' is not a number in 1..65535"),
    ("orders:0", "queues '0' is not a number in 1..65535"),
    ("orders:65536", "queues '65536' is not a number in 1..65535"),
    ("orders:4:LIFO", "type 'LIFO' is not one of NORMAL, FIFO, DELAY, TRANSACTION"),
    ("orders:4:FIFO:x", "is not NAME[:QUEUES[:TYPE]]"),
    ("bad name", "'bad name' is not a topic name"),
    (":4", "'' is not a topic name"),
])
def test_a_bad_spec_is_a_usage_error_naming_it(tmp_path, spec, reason):
    store = tmp_path / "store"
    bad = CliRunner().invoke(serve, [str(store), "--topic", spec])
    assert bad.exit_code == 2, bad.output
    assert f"Invalid value for '--topic': topic spec {spec!r}" in bad.output
    assert reason in bad.output
    assert not store.exists()  # refused before the store was opened


def test_two_specs_of_one_topic_are_a_usage_error(tmp_path):
    bad = CliRunner().invoke(serve, [str(tmp_path / "store"), "--topic", "orders:4", "--topic", "orders:8"])
    assert bad.exit_code == 2
    assert "topic 'orders' is declared twice: orders:4 and orders:8" in bad.output


def _serving_grpc(broker: GrpcBroker) -> GrpcBroker:
    """`broker` once its gRPC endpoint answers (GrpcBroker.start waits for the remoting ports only)."""
    with grpc.insecure_channel(broker.endpoint) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
    return broker


def _route(endpoint: str, topic: str) -> tuple[int, list[list[int]]]:
    answer = call(endpoint, "QueryRoute", pb.QueryRouteRequest(topic=pb.Resource(name=topic)))
    assert answer.status.code == pb.Code.OK, answer.status
    return len(answer.message_queues), [list(q.accept_message_types) for q in answer.message_queues]


def _topic_table(addr: str) -> dict:
    with RemotingClient(addr) as client:
        answer = client.request(RequestCode.GET_ALL_TOPIC_CONFIG)
    assert answer.code == ResponseCode.SUCCESS
    return json.loads(answer.body)["topicConfigTable"]


@pytest.mark.broker
def test_declared_topics_are_served_with_their_queues_and_message_type(tmp_path):
    with rocketmq_broker(["orders", "jobs:2:fifo", "later::DELAY", "pay:3:TRANSACTION", "plain:1:NORMAL"],
                         tmp_dir=tmp_path) as broker:
        assert _route(broker.grpc_endpoint, "orders") == (4, [ALL_TYPES] * 4)  # no type: every type
        assert _route(broker.grpc_endpoint, "jobs") == (2, [[pb.MessageType.FIFO]] * 2)
        assert _route(broker.grpc_endpoint, "later") == (4, [[pb.MessageType.DELAY]] * 4)
        assert _route(broker.grpc_endpoint, "pay") == (3, [[pb.MessageType.TRANSACTION]] * 3)
        assert _route(broker.grpc_endpoint, "plain") == (1, [[pb.MessageType.NORMAL]])
        table = _topic_table(broker.broker_addr)
        log = broker.log_tail()
    assert table["jobs"]["attributes"] == {"message.type": "FIFO"}
    assert (table["jobs"]["readQueueNums"], table["jobs"]["writeQueueNums"], table["jobs"]["perm"]) == (2, 2, 6)
    assert "attributes" not in table["orders"] and table["orders"]["writeQueueNums"] == 4
    assert "topic jobs declared: 2 queues, message type FIFO" in log
    assert "topic orders declared: 4 queues" in log


@pytest.mark.broker
def test_declared_topics_are_recorded_and_kept_across_a_restart(store_dir, tmp_path):
    broker = _serving_grpc(GrpcBroker(store_dir, tmp_path / "broker.log", "--topic", "jobs:2:FIFO").start())
    try:
        assert _route(broker.endpoint, "jobs") == (2, [[pb.MessageType.FIFO]] * 2)
        assert broker.stop() == 0, broker.log()
        recorded = json.loads((store_dir / "config" / "topics.json").read_text())["topicConfigTable"]
        assert recorded["jobs"]["attributes"] == {"message.type": "FIFO"}
        assert recorded["jobs"]["writeQueueNums"] == 2
        broker = _serving_grpc(GrpcBroker(store_dir, tmp_path / "broker.log").start())  # no --topic this time
        assert _route(broker.endpoint, "jobs") == (2, [[pb.MessageType.FIFO]] * 2)
        # an admin's update without attributes keeps the topic's type, as RocketMQ's updateAndCreateTopic does
        broker.create_topic("jobs", queues=3)
        assert _route(broker.endpoint, "jobs") == (3, [[pb.MessageType.FIFO]] * 3)
        assert _topic_table(broker.addr)["jobs"]["attributes"] == {"message.type": "FIFO"}
        assert broker.stop() == 0, broker.log()
    finally:
        broker.kill()
    recorded = json.loads((store_dir / "config" / "topics.json").read_text())["topicConfigTable"]
    assert recorded["jobs"]["attributes"] == {"message.type": "FIFO"} and recorded["jobs"]["writeQueueNums"] == 3
