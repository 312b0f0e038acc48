"""Requests pipelined on one connection: every one is answered, in order, and --max-in-flight holds back the
requests behind a held pull (the server starts each handler as its bytes arrive and writes the answers of
requests that came together in one piece)."""

from __future__ import annotations

import socket
import time

import pytest

from rocketstore.protocol import NEED_DATA, CommandReader, RemotingCommand, RequestCode, ResponseCode, encode_command

from .broker_support import BrokerProcess, create_store

pytestmark = pytest.mark.broker

HELD_MS = 1500


def _answers(sock: socket.socket, count: int) -> list[tuple[RemotingCommand, float]]:
    """The next `count` answers with the seconds each took to arrive."""
    started = time.monotonic()
    reader, got = CommandReader(), []
    sock.settimeout(10)
    while len(got) < count:
        data = sock.recv(65536)
        assert data, "the broker closed the connection"
        reader.feed(data)
        while (cmd := reader.next_command()) is not NEED_DATA:
            assert isinstance(cmd, RemotingCommand)
            got.append((cmd, time.monotonic() - started))
    return got


def _send(opaque: int) -> RemotingCommand:
    return RemotingCommand(RequestCode.SEND_MESSAGE, opaque=opaque, body=f"m{opaque}".encode(),
                           ext_fields={"producerGroup": "p", "topic": "T", "defaultTopic": "TBW102",
                                       "defaultTopicQueueNums": "1", "queueId": "0", "sysFlag": "0",
                                       "bornTimestamp": "1", "flag": "0", "properties": ""})


def _held_pull(opaque: int) -> RemotingCommand:
    return RemotingCommand(RequestCode.PULL_MESSAGE, opaque=opaque, ext_fields={
        "consumerGroup": "g", "topic": "Empty", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
        "sysFlag": "2", "suspendTimeoutMillis": str(HELD_MS), "commitOffset": "0"})


def test_pipelined_requests_are_each_answered_in_order(tmp_path):
    broker = BrokerProcess(create_store(tmp_path / "store"), tmp_path / "broker.log", "--topic", "T:1").start()
    try:
        requests = [_send(n) if n % 3 else RemotingCommand(RequestCode.GET_MAX_OFFSET, opaque=n,
                                                           ext_fields={"topic": "T", "queueId": "0"})
                    for n in range(1, 301)]
        with socket.create_connection(("127.0.0.1", broker.port)) as sock:
            sock.sendall(b"".join(encode_command(r) for r in requests))
            answers = [cmd for cmd, _ in _answers(sock, len(requests))]
        assert [a.opaque for a in answers] == list(range(1, 301))
        assert {a.code for a in answers} == {ResponseCode.SUCCESS}
        assert [int(a.ext_fields["queueOffset"]) for a in answers if "queueOffset" in a.ext_fields] == list(range(200))
    finally:
        broker.stop()


@pytest.mark.parametrize("max_in_flight", [1, 256])
def test_requests_behind_a_held_pull_wait_only_at_the_in_flight_limit(tmp_path, max_in_flight):
    broker = BrokerProcess(create_store(tmp_path / "store"), tmp_path / "broker.log", "--topic", "Empty:1",
                           "--topic", "T:1", "--max-in-flight", str(max_in_flight)).start()
    try:
        with socket.create_connection(("127.0.0.1", broker.port)) as sock:
            sock.sendall(encode_command(_held_pull(1)) + encode_command(_send(2)))
            (first, first_s), (second, second_s) = _answers(sock, 2)
        if max_in_flight == 1:  # the send is read only once the pull is answered
            assert (first.opaque, second.opaque) == (1, 2) and first.code == ResponseCode.PULL_NOT_FOUND
            assert second_s >= HELD_MS / 1000 * 0.9
        else:  # the send is answered while the pull is held
            assert (first.opaque, second.opaque) == (2, 1) and first_s < HELD_MS / 1000 / 2
        assert {first.code, second.code} == {ResponseCode.SUCCESS, ResponseCode.PULL_NOT_FOUND}
    finally:
        broker.stop()
