"""The writer's commit through a broker: staged messages sent with SEND_BATCH_MESSAGE instead of being
appended to an opened store (option `broker`, for stores that `rocketstore serve` or RocketMQ serves).

The driver never opens the served store for writing. It checks every staged message first (the store's
put-time rules with the store's geometry, and the topics every RocketMQ broker refuses), then sends them
over one remoting connection in batches of one topic and queue, in staging order within each queue. The
streaming sink tags each message with the property `SINK_ROW_PROPERTY` (`<sinkId>/<batchId>/<row>`) so
that a replayed micro-batch can find, with a read-only scan of the log, which of its rows the broker
already stored (see `rocketstore.spark.writer`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rocketstore.errors import RocketStoreError

if TYPE_CHECKING:
    from rocketstore import Message
    from rocketstore.protocol.client import RemotingClient

__all__ = [
    "SINK_ROW_PROPERTY",
    "BrokerSendError",
    "BrokerSender",
    "LocalCheck",
    "sent_rows",
    "sink_row_value",
]

SINK_ROW_PROPERTY = "RS_SPARK_SINK_ROW"
"""Property the streaming sink adds to each message sent through a broker: `<sinkId>/<batchId>/<row>`."""

BATCH_MESSAGES = 256
"""At most this many messages in one SEND_BATCH_MESSAGE request."""
BATCH_BYTES = 1024 * 1024
"""About this many bytes of bodies and properties in one request (RocketMQ's batches stay under 4 MiB)."""
PRODUCER_GROUP = "rocketstore_spark_sink"
SEND_TIMEOUT_S = 30.0


class BrokerSendError(RocketStoreError):
    """The broker could not be reached, or it refused a send; the message names the broker's answer.

    Attributes:
        broker: the broker's address.
        code: RocketMQ's response code, or None when no answer came (connection failures).
    """

    def __init__(self, message: str, broker: str, code: int | None = None) -> None:
        super().__init__(message)
        self.broker = broker
        self.code = code


def sink_row_value(sink_id: str, batch_id: int, row: int) -> str:
    """The `SINK_ROW_PROPERTY` value of one row of a micro-batch."""
    return f"{sink_id}/{batch_id}/{row}"


class LocalCheck:
    """The checks made before the first send, so that a row the broker would refuse on these grounds
    fails the commit with nothing sent: the store's put-time rules (sizes, topic name, properties) with
    the served store's geometry, and RocketMQ's topics that refuse sends (`SCHEDULE_TOPIC_XXXX`,
    `rmq_sys_*`, ...)."""

    def __init__(self, store_root: str, geometry: tuple[tuple[str, int], ...], broker: str) -> None:
        from rocketstore.spark._stores import store_config
        from rocketstore.store import message_checker

        self.broker = broker
        self._check = message_checker(store_config(store_root, geometry))

    def check(self, message: Message, extra: dict[str, str] | None = None) -> None:
        """Raises:
            InvalidMessageError: a put-time rule is broken.
            BrokerSendError: the topic is one RocketMQ brokers never take sends for.
        """
        from rocketstore.format.topics import refuses_sends
        from rocketstore.protocol import ResponseCode

        if refuses_sends(message.topic):
            raise BrokerSendError(
                f"broker {self.broker} would refuse the send: topic {message.topic!r} takes no sends from "
                f"producers (RocketMQ's TopicValidator, response {ResponseCode.NO_PERMISSION.name}); nothing "
                "was sent", self.broker, int(ResponseCode.NO_PERMISSION))
        if extra or message.queue_id < 0:
            message = replace(message, queue_id=max(message.queue_id, 0),
                              properties={**(message.properties or {}), **(extra or {})})
        self._check(message)


def _wire_properties(message: Message, extra: dict[str, str] | None) -> str:
    """The properties text a producer sends for `message`: its properties, TAGS and KEYS from the
    shorthands unless given as properties (the store's precedence), then `extra`."""
    from rocketstore.format.properties import KEY_SEPARATOR, KEYS, TAGS, encode_properties

    properties = dict(message.properties or {})
    if message.tags is not None and TAGS not in properties:
        properties[TAGS] = message.tags
    if message.keys and KEYS not in properties:
        properties[KEYS] = KEY_SEPARATOR.join(message.keys)
    if extra:
        properties.update(extra)
    return encode_properties(properties)


class BrokerSender:
    """One connection to the broker; `send` batches messages per topic and queue.

    Args:
        broker: `host:port`.
        queue_nums: per topic, the queue count to ask for when the broker creates the topic on first
            send (from TBW102, capped by it): one more than the highest queue id the rows give.

    Raises:
        BrokerSendError: (at open) the broker cannot be reached.
    """

    def __init__(self, broker: str, queue_nums: dict[str, int] | None = None) -> None:
        from rocketstore.protocol.client import RemotingClient

        self.broker = broker
        self.queue_nums = queue_nums or {}
        self.sent = 0
        try:
            self._client: RemotingClient = RemotingClient(broker, timeout_s=SEND_TIMEOUT_S)
        except (OSError, ValueError) as exc:
            raise BrokerSendError(f"cannot connect to broker {broker}: {exc}; nothing was sent", broker) from exc

    def close(self) -> None:
        """Close the connection."""
        self._client.close()

    def __enter__(self) -> BrokerSender:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, items: Iterable[tuple[Message, dict[str, str] | None]]) -> None:
        """Send every (message, extra properties) pair: messages of one topic and queue id go
        together, in the given order, at most `BATCH_MESSAGES` or about `BATCH_BYTES` a request.

        Raises:
            BrokerSendError: the broker refused a request or the connection failed; the requests the
                broker answered before it stay stored (`sent` counts their messages).
        """
        from rocketstore.protocol.bodies import BatchItem

        pending: dict[tuple[str, int], tuple[list[BatchItem], list[int]]] = {}
        for message, extra in items:
            key = (message.topic, message.queue_id)
            batch, size = pending.setdefault(key, ([], [0]))
            item = BatchItem(message.flag, bytes(message.body), _wire_properties(message, extra))
            batch.append(item)
            size[0] += len(item.body) + len(item.properties) + 24
            if len(batch) >= BATCH_MESSAGES or size[0] >= BATCH_BYTES:
                self._request(key, batch)
                del pending[key]
        for key, (batch, _size) in pending.items():
            self._request(key, batch)

    def _request(self, key: tuple[str, int], batch: list[Any]) -> None:
        import time

        from rocketstore.errors import ProtocolError
        from rocketstore.protocol import RequestCode, ResponseCode
        from rocketstore.protocol.bodies import encode_batch_body

        topic, queue_id = key
        fields = {"a": PRODUCER_GROUP, "b": topic, "c": "TBW102", "d": max(self.queue_nums.get(topic, 4), 1),
                  "e": queue_id, "f": 0, "g": int(time.time() * 1000), "h": 0, "i": "", "j": 0, "k": "false",
                  "m": "true"}
        where = f"{len(batch)} messages of topic {topic!r}" + (f" queue {queue_id}" if queue_id >= 0 else "")
        try:
            response = self._client.request(RequestCode.SEND_BATCH_MESSAGE, fields, encode_batch_body(batch))
        except (OSError, ProtocolError) as exc:
            raise BrokerSendError(f"sending {where} to broker {self.broker} failed after {self.sent} messages "
                                  f"were stored: {exc}", self.broker) from exc
        if response.code not in _STORED_CODES:
            try:
                name = ResponseCode(response.code).name
            except ValueError:
                name = "code"
            raise BrokerSendError(
                f"broker {self.broker} refused {where}: {name} ({response.code}): {response.remark or ''} "
                f"({self.sent} messages were stored before)", self.broker, response.code)
        self.sent += len(batch)


def _stored_codes() -> frozenset[int]:
    from rocketstore.protocol import ResponseCode

    # A send the broker stored, even if it reports a flush or replication timeout (RocketMQ's SendStatus).
    return frozenset({ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
                      ResponseCode.SLAVE_NOT_AVAILABLE})


_STORED_CODES = _stored_codes()


def log_end(store_root: str, geometry: tuple[tuple[str, int], ...]) -> int:
    """The end of the whole records in the served store's commitlog, read without any lock."""
    from rocketstore.spark._stores import commitlog_extent, store_config

    return commitlog_extent(store_root, store_config(store_root, geometry))[1]


def sent_rows(store_root: str, geometry: tuple[tuple[str, int], ...], start: int, prefix: str) -> set[int]:
    """Row numbers of the records since physical offset `start` whose `SINK_ROW_PROPERTY` starts with
    `prefix` (`<sinkId>/<batchId>/`): the rows of that micro-batch the broker already stored. Reads the
    log without any lock, as the source does.
    """
    from rocketstore.spark._stores import LogReader, store_config

    config = store_config(store_root, geometry)
    end = log_end(store_root, geometry)
    rows: set[int] = set()
    with LogReader(store_root, config) as reader:
        for message in _records(reader, start, end):
            value = message.properties.get(SINK_ROW_PROPERTY)
            if value is not None and value.startswith(prefix):
                tail = value[len(prefix):]
                if tail.isdigit():
                    rows.add(int(tail))
    return rows


def _records(reader: Any, start: int, end: int) -> Iterator[Any]:
    if start < end:
        yield from reader.scan(start, end)
