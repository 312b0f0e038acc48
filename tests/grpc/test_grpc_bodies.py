"""Compressed bodies reach every RocketMQ 5 client: a remoting producer's zlib body (the 0.4.4 C++ client
compresses bodies above 4 KiB) and a gRPC producer's GZIP one are inflated by the endpoint and delivered
IDENTITY, which the Node.js client (gunzip only), the Java client (zlib only) and the Python client all
read; a record that does not inflate, or inflates past the bound, goes out as stored with GZIP."""

from __future__ import annotations

import gzip
import hashlib
import zlib

import pytest

from rocketstore import Message, MessageStore
from rocketstore.broker.grpc.convert import COMPRESSED_FLAG, MAX_INFLATED_BYTES, inflated
from rocketstore.broker.grpc.protos import pb
from tests.grpc.grpc_support import GrpcBroker, call, node_client

pytestmark = pytest.mark.broker


def _receive(ep: str, group: str, topic: str) -> list:
    request = pb.ReceiveMessageRequest(batch_size=16)
    request.group.name = group
    request.message_queue.topic.name = topic
    request.filter_expression.type = pb.FilterType.TAG
    request.filter_expression.expression = "*"
    request.invisible_duration.seconds = 30
    request.long_polling_timeout.seconds = 5
    return [r.message for r in call(ep, "ReceiveMessage", request) if r.HasField("message")]


def test_inflated_is_bounded_and_refuses_what_is_not_whole_compressed_data():
    assert inflated(zlib.compress(b"a" * 5000)) == b"a" * 5000
    assert inflated(gzip.compress(b"b" * 5000)) == b"b" * 5000
    assert inflated(zlib.compress(b"c" * 100), limit=100) == b"c" * 100
    assert inflated(zlib.compress(b"c" * 101), limit=100) is None
    assert inflated(zlib.compress(b"d" * 1000)[:-5]) is None  # cut short
    assert inflated(b"plain text") is None
    assert inflated(b"") is None


@pytest.mark.timeout(240)
def test_a_remoting_producers_compressed_bodies_reach_the_node_and_python_clients(grpc_broker: GrpcBroker,
                                                                                  real_client, client5,
                                                                                  node_modules, tmp_path,
                                                                                  store_dir):
    grpc_broker.create_topic("Zipped", queues=2)
    produced = real_client.run("produce", "--namesrv", grpc_broker.namesrv, "--topic", "Zipped", "--count", "3",
                               "--tags", "TagZ", "--body-size", "20000")
    legacy = sorted(r["body"] for r in produced if "status" in r)
    assert len(legacy) == 3 and all(len(b) == 20000 for b in legacy), produced
    for i, body in enumerate((gzip.compress(b"g" * 6000), zlib.compress(b"z" * 6000))):  # gRPC GZIP bodies
        message = pb.Message(body=body)
        message.topic.name = "Zipped"
        message.system_properties.message_id = f"01GZ{i}"
        message.system_properties.tag = "TagZ"
        message.system_properties.body_encoding = pb.Encoding.GZIP
        assert call(grpc_broker.endpoint, "SendMessage", pb.SendMessageRequest(messages=[message])).status.code \
            == pb.Code.OK
    want = sorted([*legacy, "g" * 6000, "z" * 6000])

    by_node = [m for m in node_client(node_modules, tmp_path / "node-home", "consume", grpc_broker.endpoint,
                                      "Zipped", "NodeReadsZipped", "TagZ", "5", "30") if "body" in m]
    assert sorted(m["body"] for m in by_node) == want
    assert sorted(m["size"] for m in by_node) == sorted(len(b) for b in want)
    by_python = [m for m in client5.run("consume", "--endpoint", grpc_broker.endpoint, "--topic", "Zipped",
                                        "--group", "PyReadsZipped", "--expect", "5", "--timeout", "20")
                 if "body" in m]
    assert sorted(m["body"] for m in by_python) == want
    raw = _receive(grpc_broker.endpoint, "RawReadsZipped", "Zipped")
    assert len(raw) == 5
    for message in raw:
        assert message.system_properties.body_encoding == pb.Encoding.IDENTITY
        assert message.system_properties.body_digest.checksum == hashlib.md5(message.body).hexdigest().upper()
    assert grpc_broker.stop() == 0
    with MessageStore.open(store_dir, read_only=True) as store:
        stored = [m for q in (0, 1) for m in store.iter_queue("Zipped", q)]
    assert len(stored) == 5 and all(m.sys_flag & COMPRESSED_FLAG and len(m.body) < 20000 for m in stored)


def test_a_compressed_record_that_does_not_inflate_within_the_bound_goes_out_as_stored(store_dir, tmp_path):
    garbage = b"\x78\x9c not deflate data"
    bomb = zlib.compress(b"\0" * (MAX_INFLATED_BYTES + 1))
    with MessageStore.open(store_dir) as store:
        for body in (garbage, bomb, zlib.compress(b"fine" * 2000)):
            store.put(Message("Odd", body, queue_id=0, sys_flag=COMPRESSED_FLAG))
    broker = GrpcBroker(store_dir, tmp_path / "broker.log").start()
    try:
        got = _receive(broker.endpoint, "GOdd", "Odd")
        assert broker.stop() == 0
    finally:
        broker.kill()
    assert [(m.body, m.system_properties.body_encoding) for m in got] == [
        (garbage, pb.Encoding.GZIP), (bomb, pb.Encoding.GZIP), (b"fine" * 2000, pb.Encoding.IDENTITY)]
    assert [m.system_properties.body_digest.checksum for m in got] == [
        hashlib.md5(b).hexdigest().upper() for b in (garbage, bomb, b"fine" * 2000)]
