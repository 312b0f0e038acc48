"""Garbage, oversize frames and abrupt disconnects thrown at a running broker while the real
producer keeps sending: the broker stays up, every send lands, nothing else is written."""

from __future__ import annotations

import json
import random
import socket
import struct
import time
import zlib

import pytest

from rocketstore import MessageStore
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode, encode_command
from rocketstore.protocol.client import RemotingClient
from tests.broker.broker_support import BrokerProcess, finish

pytestmark = pytest.mark.broker

MESSAGES = 1500
ATTACK_SECONDS = 60


def _frame(header: bytes, body: bytes = b"", length: int | None = None, word: int | None = None) -> bytes:
    total = 4 + len(header) + len(body) if length is None else length
    return struct.pack(">iI", total, len(header) if word is None else word) + header + body


def _attacks(rng: random.Random) -> list[bytes]:
    send_header = json.dumps({"code": 10, "opaque": 1, "flag": 0, "extFields": {"topic": "Junk"}}).encode()
    return [
        bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 600))),  # noise
        _frame(b"{}", length=1 << 30),  # oversize length
        _frame(b"{}", length=-5),  # negative length
        _frame(b"{}", length=2),  # shorter than the header-length word
        _frame(b"x" * 10, word=(7 << 24) | 10),  # unknown serialize type
        _frame(b"not json at all"),  # framed, header not JSON
        _frame(b'["a", "list"]'),  # JSON, not an object
        _frame(b'{"opaque": 3}'),  # no code
        _frame(b'{"code": "ten"}'),  # code not an integer
        _frame(b"{\"code\":10,\"extFields\":{\"topic\":\"Jun"),  # header cut short
        _frame(b"x" * 20, word=500),  # header longer than the frame
        _frame(send_header, b"body")[: rng.randrange(5, 40)],  # a send cut off mid-frame
        _frame(b'{"code":10,"opaque":9,"extFields":{"queueId":"0"}}', b"no topic"),  # send without topic
        _frame(b'{"code":10,"opaque":9,"extFields":{"topic":"Junk","queueId":"x"}}', b"bad queue"),
        _frame(b'{"code":320,"opaque":9,"extFields":{"topic":"Junk","queueId":"0"}}', b"\x00\x00\x00\x30junk"),
        _frame(b'{"code":11,"opaque":9,"extFields":{"topic":"Junk","queueId":"0"}}'),  # pull missing fields
        b"",  # connect and leave
    ]


def _throw(addr: tuple[str, int], payload: bytes) -> None:
    with socket.create_connection(addr, timeout=2) as sock:
        sock.settimeout(0.05)
        if payload:
            sock.sendall(payload)
        try:
            sock.recv(4096)
        except OSError:
            pass
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # RST, not FIN


def test_garbage_and_disconnects_do_not_disturb_a_real_producer(broker: BrokerProcess, real_client):
    producer = real_client.start("produce", "--namesrv", broker.namesrv, "--topic", "StressTopic",
                                 "--count", str(MESSAGES), "--tags", "TagS", "--key-prefix", "s")
    rng = random.Random(7)
    addr = ("127.0.0.1", broker.port)
    thrown = 0
    deadline = time.monotonic() + ATTACK_SECONDS
    while producer.poll() is None and time.monotonic() < deadline:
        for payload in _attacks(rng):
            _throw(addr, payload)
            thrown += 1
        # The broker still answers well-formed requests on a fresh connection, unknown codes included.
        with RemotingClient(broker.addr, timeout_s=5) as client:
            assert client.request(4242).code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    lines = finish(producer, 60)
    assert thrown >= 3 * 17, thrown
    results = [line for line in lines if "status" in line or "error" in line]
    assert [r.get("status") for r in results] == [0] * MESSAGES, results[:3]
    assert broker.alive()

    # A bad request on a connection that is answered keeps that connection usable.
    with socket.create_connection(addr, timeout=5) as sock:
        bad = RemotingCommand(RequestCode.SEND_MESSAGE, opaque=77, ext_fields={"queueId": "0"}, body=b"x")
        good = RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=78,
                               ext_fields={"topic": "StressTopic", "queueId": "0"})
        sock.sendall(encode_command(bad) + encode_command(good))
        reply = b""
        while reply.count(b'"opaque"') < 2:
            chunk = sock.recv(65536)
            assert chunk, "broker closed a connection that sent a well-framed bad request"
            reply += chunk
        assert b'"opaque":77' in reply and b'"opaque":78' in reply

    assert broker.stop() == 0
    with MessageStore.open(broker.store, read_only=True) as store:
        assert set(store.queues()) == {"StressTopic"}
        stored = list(store.scan())
    assert sorted(m.body.decode() for m in stored) == sorted(r["body"] for r in results)
    assert all(m.body_crc == zlib.crc32(m.body) & 0x7FFFFFFF for m in stored)
    assert all(m.topic == "StressTopic" and m.tags == "TagS" for m in stored)
