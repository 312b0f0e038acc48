"""Edges of the gRPC protocol over raw grpcio against a broker subprocess: receipt handles no parser
should choke on, enum values the API does not define, a GZIP flag on a body that is not compressed, and
the dead-letter topic a RocketMQ 5 consumer reads."""

from __future__ import annotations

import gzip
import zlib

from rocketstore import MessageStore
from rocketstore.broker.grpc.protos import pb
from tests.grpc.grpc_support import GrpcBroker, call
from tests.grpc.test_grpc_bad_input import _message, _receive, _send

SUPERSCRIPT_TWO = "rs1.\u00b2.0.abc"
LONG_DIGITS = "rs1." + "9" * 5000 + ".0.abc"
COMPRESSED_FLAG = 0x1


def _received(answer: list) -> list:
    return [a.message for a in answer if a.HasField("message")]


def test_odd_receipt_handles_are_refused_per_entry_by_the_three_rpcs(grpc_broker: GrpcBroker):
    grpc_broker.create_topic("Handles", queues=1)
    ep = grpc_broker.endpoint
    assert _send(ep, _message("Handles", b"h")).status.code == pb.Code.OK
    (message,) = _received(_receive(ep, "GH", "Handles"))
    good = message.system_properties.receipt_handle
    ack = pb.AckMessageRequest()
    ack.group.name, ack.topic.name = "GH", "Handles"
    for handle in (SUPERSCRIPT_TWO, LONG_DIGITS, good):
        ack.entries.add(message_id="m", receipt_handle=handle)
    answer = call(ep, "AckMessage", ack)
    assert [e.status.code for e in answer.entries] == [pb.Code.INVALID_RECEIPT_HANDLE] * 2 + [pb.Code.OK]
    assert answer.status.code == pb.Code.MULTIPLE_RESULTS
    for handle in (SUPERSCRIPT_TWO, LONG_DIGITS):
        change = pb.ChangeInvisibleDurationRequest(receipt_handle=handle)
        change.group.name, change.topic.name = "GH", "Handles"
        change.invisible_duration.seconds = 30
        assert call(ep, "ChangeInvisibleDuration", change).status.code == pb.Code.INVALID_RECEIPT_HANDLE
        forward = pb.ForwardMessageToDeadLetterQueueRequest(receipt_handle=handle)
        forward.group.name, forward.topic.name = "GH", "Handles"
        assert call(ep, "ForwardMessageToDeadLetterQueue", forward).status.code == pb.Code.INVALID_RECEIPT_HANDLE
    assert grpc_broker.log().count("Traceback") == 0


def test_unknown_enum_values_and_a_false_gzip_flag_are_refused(grpc_broker: GrpcBroker, store_dir):
    grpc_broker.create_topic("Typed", queues=1)
    ep = grpc_broker.endpoint
    code = pb.Code
    assert _send(ep, _message("Typed", message_type=99)).status.code == code.BAD_REQUEST
    assert _send(ep, _message("Typed", body_encoding=7)).status.code == code.BAD_REQUEST
    for unserved in (pb.MessageType.LITE, pb.MessageType.PRIORITY):  # not stored as normal messages
        assert _send(ep, _message("Typed", message_type=unserved)).status.code == code.UNSUPPORTED
    assert _send(ep, _message("Typed", b"plain text", body_encoding=pb.Encoding.GZIP)).status.code == \
        code.MESSAGE_CORRUPTED
    cut = gzip.compress(b"z" * 1000)[:-6]
    assert _send(ep, _message("Typed", cut, body_encoding=pb.Encoding.GZIP)).status.code == code.MESSAGE_CORRUPTED
    batch = pb.SendMessageRequest(messages=[_message("Typed", b"fine", message_id="a"),
                                            _message("Typed", b"x", message_id="b", message_type=42)])
    assert call(ep, "SendMessage", batch).status.code == code.BAD_REQUEST  # nothing of the batch is written
    gz, zl = gzip.compress(b"g" * 5000), zlib.compress(b"z" * 5000)
    for body in (gz, zl):
        sent = _send(ep, _message("Typed", body, body_encoding=pb.Encoding.GZIP))
        assert sent.status.code == code.OK
    for kind in (pb.MessageType.MESSAGE_TYPE_UNSPECIFIED, pb.MessageType.NORMAL):
        assert _send(ep, _message("Typed", b"plain", message_type=kind,
                                  body_encoding=pb.Encoding.IDENTITY)).status.code == code.OK
    assert grpc_broker.stop() == 0
    with MessageStore.open(store_dir, read_only=True) as store:
        stored = list(store.iter_queue("Typed", 0))
    assert [(m.body, m.sys_flag & COMPRESSED_FLAG) for m in stored] == [(gz, 1), (zl, 1), (b"plain", 0), (b"plain", 0)]


def test_the_dead_letter_topic_is_readable_by_a_rocketmq5_consumer(grpc_broker: GrpcBroker):
    grpc_broker.create_topic("Doomed", queues=1)
    ep = grpc_broker.endpoint
    assert _send(ep, _message("Doomed", b"dead", message_id="dead-1")).status.code == pb.Code.OK
    (message,) = _received(_receive(ep, "GD", "Doomed"))
    forward = pb.ForwardMessageToDeadLetterQueueRequest(receipt_handle=message.system_properties.receipt_handle)
    forward.group.name, forward.topic.name = "GD", "Doomed"
    assert call(ep, "ForwardMessageToDeadLetterQueue", forward).status.code == pb.Code.OK
    answer = _receive(ep, "DlqReader", "%DLQ%GD")
    assert answer[0].status.code == pb.Code.OK, answer[0].status
    (dead,) = _received(answer)
    assert dead.body == b"dead" and dead.system_properties.dead_letter_queue.topic == "Doomed"
