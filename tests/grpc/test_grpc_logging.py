"""What the gRPC endpoint logs (grpc/logs.py): every call at DEBUG with its method, client, topic, group and
status; every refusal at INFO with its code and message; DLQ moves and transaction checks at INFO; lines
stay short whatever names a client sends; at INFO a served call writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore.broker.grpc.protos import pb
from tests.grpc.grpc_support import GrpcBroker, call

pytestmark = pytest.mark.broker

LONG_TOPIC = "T" * 127  # the longest topic name RocketMQ allows


def _message(topic: str, body: bytes, message_id: str) -> object:
    message = pb.Message(body=body)
    message.topic.name = topic
    message.system_properties.message_id = message_id
    return message


def _send(ep: str, topic: str, body: bytes = b"x", message_id: str = "01LOG") -> int:
    return call(ep, "SendMessage", pb.SendMessageRequest(messages=[_message(topic, body, message_id)]),
                client_id="log-client").status.code


def _receive(ep: str, group: str, topic: str, *, invisible_s: int = 10, sql: bool = False) -> list:
    request = pb.ReceiveMessageRequest(batch_size=4)
    request.group.name = group
    request.message_queue.topic.name = topic
    request.filter_expression.type = pb.FilterType.SQL if sql else pb.FilterType.TAG
    request.filter_expression.expression = "a > 1" if sql else "*"
    request.invisible_duration.seconds = invisible_s
    request.long_polling_timeout.seconds = 5
    return call(ep, "ReceiveMessage", request, client_id="log-client")


def _lines(path: Path, text: str) -> list[str]:
    return [line for line in path.read_text(errors="replace").splitlines() if text in line]


def test_calls_at_debug_refusals_dlq_moves_and_checks_at_info(store_dir, tmp_path, client5):
    log_path = tmp_path / "broker.log"
    broker = GrpcBroker(store_dir, log_path, "--log-level", "DEBUG", "--transaction-timeout", "1",
                        "--transaction-check-interval", "1").start()
    try:
        broker.create_topic("LogTopic", queues=1)
        broker.create_topic("LogTx", queues=1)
        ep = broker.endpoint
        assert _send(ep, "LogTopic", b"to-the-dlq") == pb.Code.OK
        route = pb.QueryRouteRequest()
        route.topic.name = LONG_TOPIC
        assert call(ep, "QueryRoute", route).status.code == pb.Code.TOPIC_NOT_FOUND
        assert _receive(ep, "GLog", "LogTopic", invisible_s=1)[0].status.code == pb.Code.ILLEGAL_INVISIBLE_TIME
        assert _receive(ep, "GLog", "LogTopic", sql=True)[0].status.code == pb.Code.UNSUPPORTED
        answer = _receive(ep, "GLog", "LogTopic")
        (message,) = [a.message for a in answer if a.HasField("message")]
        forward = pb.ForwardMessageToDeadLetterQueueRequest(receipt_handle=message.system_properties.receipt_handle)
        forward.group.name, forward.topic.name = "GLog", "LogTopic"
        assert call(ep, "ForwardMessageToDeadLetterQueue", forward).status.code == pb.Code.OK
        checked = client5.run("transact", "--endpoint", ep, "--topic", "LogTx", "--count", "1", "--end", "none",
                              "--check-answer", "commit", "--linger", "4")
        assert any("checked" in line for line in checked), checked
        assert broker.stop() == 0
    finally:
        broker.kill()

    sends = _lines(log_path, "DEBUG rocketstore.broker.grpc: gRPC SendMessage client=log-client")
    assert len(sends) == 1 and "topic=LogTopic" in sends[0] and "-> OK" in sends[0], sends
    (received,) = [line for line in _lines(log_path, "gRPC ReceiveMessage client=log-client") if "-> OK" in line]
    assert "DEBUG" in received and "topic=LogTopic group=GLog" in received and "messages=1" in received
    (not_found,) = _lines(log_path, "gRPC QueryRoute refused TOPIC_NOT_FOUND")
    assert "INFO" in not_found and f"topic={'T' * 63}…)" in not_found
    assert len(not_found) < 400 and "does not exist" not in not_found  # the status message is cut too
    (invisible,) = _lines(log_path, "gRPC ReceiveMessage refused ILLEGAL_INVISIBLE_TIME")
    assert "INFO" in invisible and "between 10000 and" in invisible and "group=GLog" in invisible
    (sql,) = _lines(log_path, "gRPC ReceiveMessage refused UNSUPPORTED")
    assert "SQL92" in sql
    (moved,) = _lines(log_path, "moved to %DLQ%GLog")
    assert "INFO" in moved and "01LOG" in moved and "topic LogTopic" in moved
    checks = _lines(log_path, "gRPC transaction check of")
    assert checks and all("INFO" in line and "topic LogTx" in line and "sent to producer" in line
                          for line in checks), checks
    assert _lines(log_path, "gRPC Telemetry stream of")  # the client's telemetry streams, at DEBUG
    assert _lines(log_path, "gRPC EndTransaction")  # the client's answer to the check


def test_at_info_only_refusals_are_logged(grpc_broker: GrpcBroker, tmp_path):
    grpc_broker.create_topic("QuietTopic", queues=1)
    grpc_broker.create_topic("EmptyTopic", queues=1)
    for i in range(5):
        assert _send(grpc_broker.endpoint, "QuietTopic", message_id=f"01Q{i}") == pb.Code.OK
    assert _send(grpc_broker.endpoint, "NoSuchTopic") == pb.Code.TOPIC_NOT_FOUND
    empty = _receive(grpc_broker.endpoint, "GEmpty", "NoMessagesHere")
    assert empty[0].status.code == pb.Code.TOPIC_NOT_FOUND
    nothing = _receive(grpc_broker.endpoint, "GEmpty", "EmptyTopic")  # a long poll that finds nothing: routine
    assert nothing[0].status.code == pb.Code.MESSAGE_NOT_FOUND
    assert grpc_broker.stop() == 0
    log_path = tmp_path / "broker.log"
    assert _lines(log_path, "gRPC SendMessage") == _lines(log_path, "gRPC SendMessage refused TOPIC_NOT_FOUND")
    assert len(_lines(log_path, "gRPC SendMessage refused")) == 1
    assert "topic NoSuchTopic does not exist" in _lines(log_path, "gRPC SendMessage refused")[0]
    assert len(_lines(log_path, "gRPC ReceiveMessage refused TOPIC_NOT_FOUND")) == 1
    assert not _lines(log_path, "MESSAGE_NOT_FOUND")
    assert not _lines(log_path, " DEBUG ")
