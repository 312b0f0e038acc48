"""Messages between RocketMQ 5's gRPC shape (`apache.rocketmq.v2.Message`) and the store's records.

A sent message becomes the commitlog record RocketMQ 5's proxy writes (SendMessageActivity): TAGS, KEYS,
UNIQ_KEY (the client's message id), user properties as they are, PGROUP (the topic, as the proxy sets
it), __SHARDINGKEY (message group), TIMER_DELIVER_MS and DELAY (delivery time), RECONSUME_TIME,
TRACE_CONTEXT, __BORNHOST, BORN_TIMESTAMP; GZIP encoding sets the compressed sys flag. A stored record
goes back the way GrpcConverter.buildMessage reads it, except that a compressed body is inflated and sent
IDENTITY (`delivered_body`). Every check raises `GrpcStatusError` before anything is written.
"""

from __future__ import annotations

import hashlib
import zlib
from dataclasses import dataclass
from typing import Any

from rocketstore import Message
from rocketstore.broker.grpc.protos import pb
from rocketstore.broker.topics import valid_topic
from rocketstore.format.message import StoredMessage
from rocketstore.format.properties import DELAY, KEYS, TAGS, UNIQ_KEY
from rocketstore.format.topics import DLQ_PREFIX, RETRY_PREFIX, is_system_topic

COMPRESSED_FLAG = 0x1  # MessageSysFlag.COMPRESSED_FLAG
TRANSACTION_PREPARED_TYPE = 0x4
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROPERTY_SHARDING_KEY = "__SHARDINGKEY"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_RECONSUME_TIME = "RECONSUME_TIME"
PROPERTY_TRACE_CONTEXT = "TRACE_CONTEXT"
PROPERTY_BORN_HOST = "__BORNHOST"
PROPERTY_BORN_TIMESTAMP = "BORN_TIMESTAMP"
PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
PROPERTY_DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
# MessageConst.STRING_HASH_SET: names a user property may not take (the ones this module reads or writes,
# and the rest of RocketMQ's system names).
SYSTEM_PROPERTY_NAMES = frozenset({
    TAGS, KEYS, UNIQ_KEY, DELAY, "WAIT", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_PRODUCER_GROUP, "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "ORIGIN_MESSAGE_ID", "TRANSFER_FLAG",
    "CORRECTION_FLAG", "MQ2_FLAG", PROPERTY_RECONSUME_TIME, "MSG_REGION", "TRACE_ON", "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME", "POP_CK", "1ST_POP_TIME", PROPERTY_SHARDING_KEY, PROPERTY_TRACE_CONTEXT,
    PROPERTY_TIMER_DELIVER_MS, PROPERTY_TIMER_DELAY_SEC, PROPERTY_BORN_HOST, PROPERTY_BORN_TIMESTAMP,
    PROPERTY_DLQ_ORIGIN_TOPIC, PROPERTY_DLQ_ORIGIN_MESSAGE_ID, "CLUSTER", "INSTANCE_ID", "CORRELATION_ID",
    "REPLY_TO_CLIENT", "TTL", "ARRIVE_TIME", "PUSH_REPLY_TIME", "MSG_TYPE", "CHECK_IMMUNITY_TIME_IN_SECONDS",
    "TRAN_PREPARED_QUEUE_OFFSET", "TIMER_OUT_MS", "TIMER_ENQUEUE_MS", "TIMER_DEQUEUE_MS", "TIMER_ROLL_TIMES",
    "TIMER_DEL_UNIQKEY", "TIMER_DELAY_LEVEL", "TIMER_DELAY_MS", "__STARTDELIVERTIME",
})
# ProxyConfig defaults
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_USER_PROPERTY_BYTES = 16 * 1024
MAX_USER_PROPERTIES = 128
MAX_MESSAGE_GROUP_BYTES = 64
MAX_DELAY_MS = 24 * 3600 * 1000
GZIP_PROBE_BYTES = 64 * 1024  # a GZIP body must inflate this far (or to its end) to be taken
MAX_INFLATED_BYTES = MAX_BODY_BYTES  # a compressed body larger than this inflated is delivered as stored


class GrpcStatusError(Exception):
    """A request answered with a RocketMQ `Code` instead of being served."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def status(code: int, message: str | None = None) -> Any:
    """A `Status` with `code` and a message (the code's name by default)."""
    return pb.Status(code=code, message=message if message is not None else pb.Code.name(code))


def _control(text: str) -> bool:
    return any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in text)


def check_topic(name: str) -> None:
    """RocketMQ's Validators.checkTopic and the proxy's system-topic rule.

    Raises:
        GrpcStatusError: ILLEGAL_TOPIC.
    """
    if not valid_topic(name):
        raise GrpcStatusError(pb.Code.ILLEGAL_TOPIC, f"topic name {name!r} is not allowed")
    if is_system_topic(name):
        raise GrpcStatusError(pb.Code.ILLEGAL_TOPIC, "cannot access system topic")


def check_group(name: str) -> None:
    """RocketMQ's Validators.checkGroup and the system-group rule.

    Raises:
        GrpcStatusError: ILLEGAL_CONSUMER_GROUP.
    """
    if not valid_topic(name) or name.startswith((RETRY_PREFIX, DLQ_PREFIX)) or name.startswith("CID_RMQ_SYS_"):
        raise GrpcStatusError(pb.Code.ILLEGAL_CONSUMER_GROUP, f"consumer group name {name!r} is not allowed")


def _user_properties(message: Any) -> dict[str, str]:
    props = dict(message.user_properties)
    if len(props) > MAX_USER_PROPERTIES:
        raise GrpcStatusError(pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
                              f"too many user properties, max is {MAX_USER_PROPERTIES}")
    for key, value in props.items():
        if key in SYSTEM_PROPERTY_NAMES:
            raise GrpcStatusError(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if not key or _control(key) or _control(value) or "\x01" in key + value or "\x02" in key + value:
            raise GrpcStatusError(pb.Code.ILLEGAL_MESSAGE_PROPERTY_KEY,
                                  "the key and value of a property cannot contain control characters")
    return props


def _tag(sysprops: Any) -> str:
    tag = sysprops.tag
    if tag and (not tag.strip() or "|" in tag or _control(tag)):
        raise GrpcStatusError(pb.Code.ILLEGAL_MESSAGE_TAG, f"tag {tag!r} is not allowed")
    return tag


def _keys(sysprops: Any) -> list[str]:
    keys = list(sysprops.keys)
    for key in keys:
        if key and (not key.strip() or _control(key) or " " in key):
            raise GrpcStatusError(pb.Code.ILLEGAL_MESSAGE_KEY, f"key {key!r} is not allowed")
    return [k for k in keys if k]


TIMESTAMP_MIN_S = -62135596800  # 0001-01-01, google.protobuf.Timestamp's range
TIMESTAMP_MAX_S = 253402300799  # 9999-12-31


def timestamp_ms(value: Any, code: int, what: str) -> int:
    """Milliseconds of a `google.protobuf.Timestamp`.

    Raises:
        GrpcStatusError: `code` when the timestamp is outside Timestamp's valid range.
    """
    if not TIMESTAMP_MIN_S <= value.seconds <= TIMESTAMP_MAX_S or not 0 <= value.nanos < 1_000_000_000:
        raise GrpcStatusError(code, f"{what} is not a valid timestamp (seconds {value.seconds}, nanos {value.nanos})")
    return value.seconds * 1000 + value.nanos // 1_000_000


def delay_level_for(delay_ms: int, level_millis: list[int]) -> int:
    """The highest delay level whose delay does not pass `delay_ms` (0: shorter than level 1)."""
    level = 0
    for number, millis in enumerate(level_millis, start=1):
        if millis <= delay_ms:
            level = number
    return level


def _check_enums(sysprops: Any) -> None:
    """A message type or body encoding that is not a value of the API's enums (a proto3 enum field keeps
    any number it is sent), or a message type this endpoint does not serve.

    Raises:
        GrpcStatusError: BAD_REQUEST for a value the API does not define; UNSUPPORTED for a LITE or PRIORITY
            message (which would otherwise be stored as a normal one).
    """
    for field, name, enum in (("message_type", "MessageType", pb.MessageType),
                              ("body_encoding", "Encoding", pb.Encoding)):
        value = getattr(sysprops, field)
        if value not in vars(enum).values():
            raise GrpcStatusError(pb.Code.BAD_REQUEST, f"{field} {value} is not a {name} of the API")
    if sysprops.message_type in (pb.MessageType.LITE, pb.MessageType.PRIORITY):
        raise GrpcStatusError(pb.Code.UNSUPPORTED, f"{pb.MessageType.name(sysprops.message_type)} messages are "
                                                   "not supported by this endpoint")


def compressed(body: bytes) -> bool:
    """True when `body` starts as gzip or zlib data does and its first `GZIP_PROBE_BYTES` inflate (or all
    of it does): what RocketMQ 5 clients undo for a GZIP message (gzip by its magic, else zlib)."""
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # +32: gzip or zlib header, detected
    try:
        inflater.decompress(body, GZIP_PROBE_BYTES)
    except zlib.error:
        return False
    return inflater.eof or bool(inflater.unconsumed_tail)


def inflated(body: bytes, limit: int = MAX_INFLATED_BYTES) -> bytes | None:
    """`body` inflated (zlib or gzip data, told by its header), or None when it is not whole compressed data
    or inflates to more than `limit` bytes (at most `limit` + 1 bytes are ever produced)."""
    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)
    try:
        out = inflater.decompress(body, limit + 1)
    except zlib.error:
        return None
    if len(out) > limit or not inflater.eof:
        return None
    return out


def delivered_body(stored: StoredMessage) -> tuple[bytes, int]:
    """The body and `Encoding` a gRPC consumer gets for a stored record.

    A compressed record (a remoting producer's zlib body, a gRPC producer's GZIP one) is inflated and sent
    IDENTITY: RocketMQ 5 clients differ in what GZIP means to them (the Node.js client gunzips, the Java
    client inflates zlib, the Python client takes either), and each reads an IDENTITY body. A body that does
    not inflate, or inflates past `MAX_INFLATED_BYTES`, is sent as stored with GZIP, as RocketMQ 5's proxy
    sends every compressed body.
    """
    if not stored.sys_flag & COMPRESSED_FLAG:
        return stored.body, pb.Encoding.IDENTITY
    body = inflated(stored.body)
    if body is None:
        return stored.body, pb.Encoding.GZIP
    return body, pb.Encoding.IDENTITY


@dataclass(frozen=True)
class SendPlan:
    """A checked message ready for the store, with what the response needs."""

    message: Message
    message_id: str
    transactional: bool


def to_store_message(message: Any, topic: str, peer: str, now_ms: int, level_millis: list[int],
                     max_body_bytes: int = MAX_BODY_BYTES) -> SendPlan:
    """Build the record RocketMQ 5's proxy would write for one gRPC message to `topic`.

    Raises:
        GrpcStatusError: a RocketMQ code for each rule the message breaks (nothing is written).
    """
    if message.topic.name != topic:
        raise GrpcStatusError(pb.Code.MESSAGE_CORRUPTED, "topic in message is not same")
    body = bytes(message.body)
    if not body:
        raise GrpcStatusError(pb.Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if len(body) > max_body_bytes:
        raise GrpcStatusError(pb.Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {max_body_bytes}")
    sysprops = message.system_properties
    _check_enums(sysprops)
    if sysprops.body_encoding == pb.Encoding.GZIP and not compressed(body):
        raise GrpcStatusError(pb.Code.MESSAGE_CORRUPTED, "body_encoding is GZIP but the body is not compressed data")
    props = _user_properties(message)
    tag, keys = _tag(sysprops), _keys(sysprops)
    size = sum(len(k.encode()) + len(v.encode()) for k, v in props.items()) + len(tag.encode()) + \
        sum(len(k.encode()) for k in keys)
    if size > MAX_USER_PROPERTY_BYTES:
        raise GrpcStatusError(pb.Code.MESSAGE_PROPERTIES_TOO_LARGE,
                              f"the total size of user property is too large, max is {MAX_USER_PROPERTY_BYTES}")
    if tag:
        props[TAGS] = tag
    if keys:
        props[KEYS] = " ".join(keys)
    message_id = sysprops.message_id
    if not message_id.strip() or _control(message_id):
        raise GrpcStatusError(pb.Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[UNIQ_KEY] = message_id
    transactional = sysprops.message_type == pb.MessageType.TRANSACTION
    if transactional:
        props[PROPERTY_TRANSACTION_PREPARED] = "true"
    if sysprops.HasField("delivery_timestamp"):
        due = timestamp_ms(sysprops.delivery_timestamp, pb.Code.ILLEGAL_DELIVERY_TIME, "delivery_timestamp")
        if due - now_ms > MAX_DELAY_MS:
            raise GrpcStatusError(pb.Code.ILLEGAL_DELIVERY_TIME,
                                  f"the max delay time of message is too large, max is {MAX_DELAY_MS}")
        level = delay_level_for(due - now_ms, level_millis)
        if level:
            props[DELAY] = str(level)  # the store's schedule service moves it into the topic by then
        props[PROPERTY_TIMER_DELIVER_MS] = str(due)  # gRPC consumers get it exactly then
    attempt = sysprops.delivery_attempt if sysprops.HasField("delivery_attempt") else 0
    props[PROPERTY_RECONSUME_TIME] = str(attempt)
    props[PROPERTY_PRODUCER_GROUP] = topic
    group = sysprops.message_group if sysprops.HasField("message_group") else ""
    if group:
        if not group.strip() or _control(group) or len(group.encode()) >= MAX_MESSAGE_GROUP_BYTES:
            raise GrpcStatusError(pb.Code.ILLEGAL_MESSAGE_GROUP, f"message group {group!r} is not allowed")
        props[PROPERTY_SHARDING_KEY] = group
    if sysprops.HasField("trace_context") and sysprops.trace_context:
        props[PROPERTY_TRACE_CONTEXT] = sysprops.trace_context
    props[PROPERTY_BORN_HOST] = sysprops.born_host or peer
    born = timestamp_ms(sysprops.born_timestamp, pb.Code.BAD_REQUEST, "born_timestamp") \
        if sysprops.HasField("born_timestamp") else 0
    if born > 0:
        props[PROPERTY_BORN_TIMESTAMP] = str(born)
    sys_flag = COMPRESSED_FLAG if sysprops.body_encoding == pb.Encoding.GZIP else 0
    if transactional:
        sys_flag |= TRANSACTION_PREPARED_TYPE
    record = Message(topic, body, properties=props, sys_flag=sys_flag, born_timestamp=born or now_ms,
                     born_host=_ip_port(peer))
    return SendPlan(record, message_id, transactional)


def _ip_port(peer: str) -> str | None:
    """gRPC peers look like ``ipv4:127.0.0.1:5555``; the store takes ``ip:port`` (IPv4 only)."""
    if peer.startswith("ipv4:"):
        return peer[5:]
    return None


def message_type(props: dict[str, str]) -> int:
    """The MessageType GrpcConverter reports for a record's properties."""
    if props.get(PROPERTY_TRANSACTION_PREPARED) == "true":
        return pb.MessageType.TRANSACTION
    if DELAY in props or PROPERTY_TIMER_DELIVER_MS in props or PROPERTY_TIMER_DELAY_SEC in props:
        return pb.MessageType.DELAY
    if PROPERTY_SHARDING_KEY in props:
        return pb.MessageType.FIFO
    return pb.MessageType.NORMAL


def to_proto_message(stored: StoredMessage, *, receipt_handle: str | None = None, attempt: int | None = None,
                     invisible_ms: int | None = None) -> Any:
    """The gRPC message a consumer gets for a stored record (GrpcConverter.buildMessage)."""
    props = stored.properties
    user = {k: v for k, v in props.items() if k not in SYSTEM_PROPERTY_NAMES}
    body, encoding = delivered_body(stored)
    out = pb.Message(body=body, user_properties=user)
    out.topic.name = stored.topic
    sp = out.system_properties
    if TAGS in props:
        sp.tag = props[TAGS]
    if props.get(KEYS):
        sp.keys.extend(props[KEYS].split(" "))
    sp.message_id = props.get(UNIQ_KEY) or stored.msg_id
    sp.body_digest.type = pb.DigestType.MD5
    sp.body_digest.checksum = hashlib.md5(body).hexdigest().upper()  # of the bytes sent, as clients check it
    sp.body_encoding = encoding
    sp.message_type = message_type(props)
    sp.born_timestamp.FromMilliseconds(stored.born_timestamp)
    sp.born_host = props.get(PROPERTY_BORN_HOST) or stored.born_host
    sp.store_timestamp.FromMilliseconds(stored.store_timestamp)
    sp.store_host = stored.store_host
    if props.get(PROPERTY_TIMER_DELIVER_MS, "").isdigit():
        sp.delivery_timestamp.FromMilliseconds(int(props[PROPERTY_TIMER_DELIVER_MS]))
    if PROPERTY_SHARDING_KEY in props:
        sp.message_group = props[PROPERTY_SHARDING_KEY]
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    if invisible_ms is not None:
        sp.invisible_duration.FromMilliseconds(invisible_ms)
    sp.queue_id = stored.queue_id
    sp.queue_offset = stored.queue_offset
    sp.delivery_attempt = attempt if attempt is not None else stored.reconsume_times + 1
    if PROPERTY_TRACE_CONTEXT in props:
        sp.trace_context = props[PROPERTY_TRACE_CONTEXT]
    if PROPERTY_DLQ_ORIGIN_TOPIC in props and PROPERTY_DLQ_ORIGIN_MESSAGE_ID in props:
        sp.dead_letter_queue.topic = props[PROPERTY_DLQ_ORIGIN_TOPIC]
        sp.dead_letter_queue.message_id = props[PROPERTY_DLQ_ORIGIN_MESSAGE_ID]
    return out


def due_ms(stored: StoredMessage) -> int:
    """When a record may be delivered to gRPC consumers (its TIMER_DELIVER_MS, else 0)."""
    value = stored.properties.get(PROPERTY_TIMER_DELIVER_MS, "")
    return int(value) if value.isdigit() else 0


def message_group(stored: StoredMessage) -> str | None:
    """The record's FIFO message group (__SHARDINGKEY), None when it has none."""
    return stored.properties.get(PROPERTY_SHARDING_KEY) or None
