"""Bodies of remoting commands: lenient JSON in, strict JSON out, and the batch-message body.

RocketMQ's Java side writes JSON bodies with fastjson, which puts integer map keys unquoted
(``{"brokerAddrs":{0:"127.0.0.1:10911"}}``); `decode_json_body` accepts that. We write standard
JSON with quoted keys, which fastjson and the C++ client (JsonCpp with allowNumericKeys) both read.

Batch body (SEND_BATCH_MESSAGE), a concatenation of inner messages:

    len  field
    4    total size       int32, this whole inner message
    4    magic            int32 (0)
    4    body CRC         int32 (0)
    4    flag             int32
    4    body length      int32
    n    body
    2    properties len   int16
    m    properties       UTF-8, RocketMQ properties string
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from typing import Any

from rocketstore.errors import RemoteProtocolError
from rocketstore.format.json_text import quote_integer_keys

BATCH_FIXED = struct.Struct(
    ">i"  # total size
    "i"  # magic
    "i"  # body CRC
    "i"  # flag
    "i"  # body length
)
_PROPS_LEN = struct.Struct(">h")


def decode_json_body(data: bytes) -> Any:
    """Value of a JSON body written by fastjson, JsonCpp or us.

    Raises:
        RemoteProtocolError: the body is not JSON even after quoting integer keys.
    """
    text = data.decode("utf-8", errors="replace")
    try:
        return json.loads(text, strict=False)
    except (ValueError, RecursionError):
        pass
    try:
        return json.loads(quote_integer_keys(text), strict=False)
    except (ValueError, RecursionError) as exc:
        raise RemoteProtocolError(f"body is not JSON: {exc}") from exc


def encode_json_body(value: Any) -> bytes:
    """Compact standard JSON bytes of `value`."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclass(frozen=True, slots=True)
class BatchItem:
    """One inner message of a batch body."""

    flag: int
    body: bytes
    properties: str


def decode_batch_body(data: bytes) -> list[BatchItem]:
    """Inner messages of a SEND_BATCH_MESSAGE body.

    Raises:
        RemoteProtocolError: a length that runs past the body or disagrees with the total size.
    """
    items: list[BatchItem] = []
    pos = 0
    while pos < len(data):
        if pos + BATCH_FIXED.size > len(data):
            raise RemoteProtocolError(f"batch body ends inside a message header at byte {pos}")
        total, _magic, _crc, flag, body_len = BATCH_FIXED.unpack_from(data, pos)
        body_start = pos + BATCH_FIXED.size
        props_at = body_start + body_len
        if body_len < 0 or props_at + _PROPS_LEN.size > len(data):
            raise RemoteProtocolError(f"batch message at byte {pos} has an impossible body length {body_len}")
        (props_len,) = _PROPS_LEN.unpack_from(data, props_at)
        end = props_at + _PROPS_LEN.size + props_len
        if props_len < 0 or end > len(data) or total != end - pos:
            raise RemoteProtocolError(f"batch message at byte {pos} has inconsistent lengths")
        props = data[props_at + _PROPS_LEN.size : end].decode("utf-8", errors="replace")
        items.append(BatchItem(flag, data[body_start:props_at], props))
        pos = end
    return items


def encode_batch_body(items: list[BatchItem]) -> bytes:
    """Batch body of `items` (what a producer sends)."""
    parts = []
    for item in items:
        props = item.properties.encode("utf-8")
        total = BATCH_FIXED.size + len(item.body) + _PROPS_LEN.size + len(props)
        parts += [BATCH_FIXED.pack(total, 0, 0, item.flag, len(item.body)), item.body,
                  _PROPS_LEN.pack(len(props)), props]
    return b"".join(parts)


def topic_route_body(topic_queues: int, broker_name: str, cluster: str, broker_addr: str,
                     perm: int = 6) -> bytes:
    """TopicRouteData for one master broker serving `topic_queues` read and write queues."""
    route = {
        "brokerDatas": [{"brokerAddrs": {"0": broker_addr}, "brokerName": broker_name, "cluster": cluster}],
        "filterServerTable": {},
        "queueDatas": [{"brokerName": broker_name, "perm": perm, "readQueueNums": topic_queues,
                        "topicSynFlag": 0, "writeQueueNums": topic_queues}],
    }
    return encode_json_body(route)


MqKey = tuple[str, str, int]  # topic, broker name, queue id


def mq_key_json(mq: MqKey) -> str:
    """A MessageQueue as fastjson writes it (its fields in name order)."""
    return encode_json_body({"brokerName": mq[1], "queueId": mq[2], "topic": mq[0]}).decode("utf-8")


def encode_mq_keyed_body(fields: dict[str, Any], tables: dict[str, list[tuple[MqKey, Any]]]) -> bytes:
    """A JSON body whose `tables` are maps keyed by MessageQueue objects, written as fastjson writes such a
    map (``{{"brokerName":"b","queueId":0,"topic":"T"}:{...}}``, a key no JSON standard allows, which is
    what RocketMQ's clients parse: TopicStatsTable, ConsumeStats, ResetOffsetBody); the other `fields`
    as plain JSON, every member in name order."""
    parts = []
    for name in sorted({*fields, *tables}):
        if name in tables:
            inner = ",".join(f"{mq_key_json(mq)}:{encode_json_body(value).decode('utf-8')}"
                             for mq, value in tables[name])
            parts.append(f"{json.dumps(name)}:{{{inner}}}")
        else:
            parts.append(f"{json.dumps(name)}:{encode_json_body(fields[name]).decode('utf-8')}")
    return ("{" + ",".join(parts) + "}").encode("utf-8")
