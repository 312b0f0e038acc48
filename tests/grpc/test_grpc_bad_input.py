"""Requests the official client never sends, over raw grpcio: each gets RocketMQ's status code, the
endpoint stays up, and nothing reaches the store."""

from __future__ import annotations

import time

import grpc
import pytest

from rocketstore import MessageStore
from rocketstore.broker.grpc.protos import SERVICE, pb
from tests.grpc.grpc_support import GrpcBroker, call

pytestmark = pytest.mark.broker


def _message(topic: str, body: bytes = b"x", **system: object) -> object:
    message = pb.Message(body=body)
    message.topic.name = topic
    message.system_properties.message_id = str(system.pop("message_id", "01ABC"))
    for name, value in system.items():
        setattr(message.system_properties, name, value)
    return message


def _send(endpoint: str, message: object) -> object:
    return call(endpoint, "SendMessage", pb.SendMessageRequest(messages=[message]))


def test_bad_sends_get_rocketmq_codes_and_write_nothing(grpc_broker: GrpcBroker, store_dir):
    grpc_broker.create_topic("BadTopic", queues=1)
    ep = grpc_broker.endpoint
    code = pb.Code
    assert _send(ep, _message("NoSuchTopic")).status.code == code.TOPIC_NOT_FOUND
    assert _send(ep, _message("SCHEDULE_TOPIC_XXXX")).status.code == code.ILLEGAL_TOPIC
    assert _send(ep, _message("bad topic!")).status.code == code.ILLEGAL_TOPIC
    assert _send(ep, _message("BadTopic", b"x" * (4 * 1024 * 1024 + 1))).status.code == code.MESSAGE_BODY_TOO_LARGE
    assert _send(ep, _message("BadTopic", b"")).status.code == code.MESSAGE_BODY_EMPTY
    assert _send(ep, _message("BadTopic", message_id="")).status.code == code.ILLEGAL_MESSAGE_ID
    assert _send(ep, _message("BadTopic", tag="a|b")).status.code == code.ILLEGAL_MESSAGE_TAG
    assert _send(ep, _message("BadTopic", message_group=" ")).status.code == code.ILLEGAL_MESSAGE_GROUP
    two_halves = pb.SendMessageRequest(messages=[_message("BadTopic", message_type=pb.MessageType.TRANSACTION),
                                                 _message("BadTopic", message_type=pb.MessageType.TRANSACTION)])
    assert call(ep, "SendMessage", two_halves).status.code == code.BAD_REQUEST
    delayed_half = _message("BadTopic", message_type=pb.MessageType.TRANSACTION)
    delayed_half.system_properties.delivery_timestamp.seconds = int(time.time()) + 60
    assert _send(ep, delayed_half).status.code == code.MESSAGE_CORRUPTED
    system_key = _message("BadTopic")
    system_key.user_properties["UNIQ_KEY"] = "forged"
    assert _send(ep, system_key).status.code == code.ILLEGAL_MESSAGE_PROPERTY_KEY
    far = _message("BadTopic")
    far.system_properties.delivery_timestamp.seconds = 1795574379185  # milliseconds put in seconds
    assert _send(ep, far).status.code == code.ILLEGAL_DELIVERY_TIME
    other_topic = pb.SendMessageRequest(messages=[_message("BadTopic"), _message("NoSuchTopic")])
    assert call(ep, "SendMessage", other_topic).status.code == code.MESSAGE_CORRUPTED
    assert call(ep, "SendMessage", pb.SendMessageRequest()).status.code == code.MESSAGE_CORRUPTED
    route = pb.QueryRouteRequest()
    route.topic.name = "NoSuchTopic"
    assert call(ep, "QueryRoute", route).status.code == code.TOPIC_NOT_FOUND
    # bytes that are no protobuf message: a gRPC error for that call, the endpoint goes on
    with grpc.insecure_channel(ep) as channel, pytest.raises(grpc.RpcError) as raised:
        channel.unary_unary(f"/{SERVICE}/SendMessage")(b"\xff\xff\xff\xff", timeout=10)
    assert raised.value.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN)
    for method, request in (("GetOffset", pb.GetOffsetRequest()), ("QueryOffset", pb.QueryOffsetRequest())):
        answer = call(ep, method, request)
        assert answer.status.code == code.NOT_IMPLEMENTED and method in answer.status.message
    assert _send(ep, _message("BadTopic", b"good")).status.code == code.OK
    assert grpc_broker.stop() == 0
    with MessageStore.open(store_dir, read_only=True) as store:
        assert set(store.queues()) == {"BadTopic"}
        assert [m.body for m in store.iter_queue("BadTopic", 0)] == [b"good"]


def _receive(ep: str, group: str, topic: str, invisible_s: int = 10, expression: str = "*",
             filter_type: int = 1) -> list:
    request = pb.ReceiveMessageRequest(batch_size=4)
    request.group.name = group
    request.message_queue.topic.name = topic
    request.filter_expression.type = filter_type
    request.filter_expression.expression = expression
    request.invisible_duration.seconds = invisible_s
    request.long_polling_timeout.seconds = 5
    return call(ep, "ReceiveMessage", request)


def _ack(ep: str, group: str, topic: str, handle: str) -> int:
    request = pb.AckMessageRequest()
    request.group.name = group
    request.topic.name = topic
    request.entries.add(message_id="m", receipt_handle=handle)
    return call(ep, "AckMessage", request).status.code


def test_receipt_handles_forged_stale_or_of_another_group_are_refused(grpc_broker: GrpcBroker):
    grpc_broker.create_topic("HandleTopic", queues=1)
    ep = grpc_broker.endpoint
    assert _send(ep, _message("HandleTopic", b"once")).status.code == pb.Code.OK
    code = pb.Code
    assert _receive(ep, "GH", "HandleTopic", invisible_s=1)[0].status.code == code.ILLEGAL_INVISIBLE_TIME
    assert _receive(ep, "%RETRY%GH", "HandleTopic")[0].status.code == code.ILLEGAL_CONSUMER_GROUP
    assert _receive(ep, "GH", "HandleTopic", expression="a > 1", filter_type=2)[0].status.code == code.UNSUPPORTED
    answer = _receive(ep, "GH", "HandleTopic")
    assert answer[0].status.code == code.OK and answer[-1].HasField("delivery_timestamp")
    (message,) = [a.message for a in answer if a.HasField("message")]
    assert message.body == b"once" and message.system_properties.delivery_attempt == 1
    handle = message.system_properties.receipt_handle
    queue, offset = handle.split(".")[1:3]
    assert _ack(ep, "GH", "HandleTopic", "not a handle") == code.INVALID_RECEIPT_HANDLE
    assert _ack(ep, "GH", "HandleTopic", f"rs1.{queue}.{offset}.0123456789abcdef") == code.INVALID_RECEIPT_HANDLE
    assert _ack(ep, "OtherGroup", "HandleTopic", handle) == code.INVALID_RECEIPT_HANDLE
    change = pb.ChangeInvisibleDurationRequest(receipt_handle=handle)
    change.group.name, change.topic.name = "GH", "HandleTopic"
    change.invisible_duration.seconds = 30
    changed = call(ep, "ChangeInvisibleDuration", change)
    assert changed.status.code == code.OK and changed.receipt_handle != handle
    assert _ack(ep, "GH", "HandleTopic", handle) == code.INVALID_RECEIPT_HANDLE  # stale: replaced
    assert _ack(ep, "GH", "HandleTopic", changed.receipt_handle) == code.OK
    assert _ack(ep, "GH", "HandleTopic", changed.receipt_handle) == code.INVALID_RECEIPT_HANDLE  # done
    # the other group still gets the message: groups are independent
    other = [a.message.body for a in _receive(ep, "OtherGroup", "HandleTopic") if a.HasField("message")]
    assert other == [b"once"]
