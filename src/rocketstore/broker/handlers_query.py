"""Message lookups and topic administration: QUERY_MESSAGE (12), VIEW_MESSAGE_BY_ID (33),
UPDATE_AND_CREATE_TOPIC (17), GET_ALL_TOPIC_CONFIG (21)."""

from __future__ import annotations

from rocketstore.broker.context import BrokerContext, RequestError, field_int, field_str
from rocketstore.broker.server import Connection, Handler
from rocketstore.broker.topics import MESSAGE_TYPE_ATTRIBUTE, MESSAGE_TYPES, TopicConfig, valid_topic
from rocketstore.errors import MessageNotFoundError, RocketStoreError, StoreError
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode
from rocketstore.protocol.bodies import encode_json_body


def _attributes(text: str) -> dict[str, str]:
    """RocketMQ 5's topic attributes header (``+message.type=FIFO,+k=v``: AttributeParser) as a dict.

    Raises:
        RequestError: an item that is not ``+key=value``, or a message.type RocketMQ does not know.
    """
    attributes: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item[1:].partition("=")
        if not item.startswith("+") or not sep or not key:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"topic attribute {item!r} is not +key=value")
        attributes[key] = value
    kind = attributes.get(MESSAGE_TYPE_ATTRIBUTE)
    if kind is not None and kind not in MESSAGE_TYPES:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"{MESSAGE_TYPE_ATTRIBUTE} {kind!r} is not one of "
                           f"{', '.join(MESSAGE_TYPES)}")
    return attributes


class QueryHandlers:
    """Handlers that look messages up by key or offset, and manage topics."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict[int, Handler]:
        """Request code -> handler."""
        return {RequestCode.QUERY_MESSAGE: self.query, RequestCode.VIEW_MESSAGE_BY_ID: self.view,
                RequestCode.UPDATE_AND_CREATE_TOPIC: self.create_topic,
                RequestCode.GET_ALL_TOPIC_CONFIG: self.all_topics}

    async def query(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """QUERY_MESSAGE: messages of a topic carrying a key (KEYS token or UNIQ_KEY), from the index."""
        try:
            topic, key = field_str(cmd, "topic"), field_str(cmd, "key")
            max_num = field_int(cmd, "maxNum", self.ctx.store.config.max_query_results)
            begin = field_int(cmd, "beginTimestamp", 0)
            end = field_int(cmd, "endTimestamp", 0) or None
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        found = self.ctx.store.query(topic, key, max_count=max(1, max_num), begin_ms=begin, end_ms=end)
        if not found:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"no message of {topic} has key {key}")
        last = found[-1]
        return cmd.response(ResponseCode.SUCCESS, ext_fields={
            "indexLastUpdateTimestamp": last.store_timestamp, "indexLastUpdatePhyoffset": last.phy_offset},
            body=b"".join(m.raw for m in found))

    async def view(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """VIEW_MESSAGE_BY_ID: the record at a commitlog offset (clients decode it from the msgId)."""
        try:
            offset = field_int(cmd, "offset")
            message = self.ctx.store.message_at(offset)
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        except (MessageNotFoundError, StoreError, ValueError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no message at offset {cmd.ext_fields.get('offset')}: "
                                f"{exc}")
        return cmd.response(ResponseCode.SUCCESS, body=message.raw)

    async def create_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """UPDATE_AND_CREATE_TOPIC."""
        try:
            self.ctx.refuse_writes()
            topic = field_str(cmd, "topic")
            if not valid_topic(topic):
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"topic name {topic!r} is not allowed")
            config = TopicConfig(topic, field_int(cmd, "readQueueNums", 4), field_int(cmd, "writeQueueNums", 4),
                                 field_int(cmd, "perm", 6), _attributes(cmd.ext_fields.get("attributes", "")))
            try:  # recorded in config/topics.json: the topic survives a restart before its first message
                self.ctx.store.record_topic(topic, config.read_queue_nums, config.write_queue_nums, config.perm,
                                            config.attributes)
            except RocketStoreError as exc:
                raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from exc
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        self.ctx.topics.put(config)
        return cmd.response(ResponseCode.SUCCESS)

    async def all_topics(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_ALL_TOPIC_CONFIG."""
        table = {name: cfg.to_json() for name, cfg in self.ctx.topics.topics.items()}
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body({"topicConfigTable": table}))
