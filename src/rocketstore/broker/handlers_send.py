"""Producer-side requests: SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
CONSUMER_SEND_MSG_BACK (36). Each is a thin translation into `MessageStore.put` / `put_batch`."""

from __future__ import annotations

import random

from rocketstore import Message, MessageStore, PutResult, PutStatus
from rocketstore.broker.context import BrokerContext, RequestError, field_bool, field_int, field_str, store_write
from rocketstore.broker.handlers_transaction import is_half_message, refuse_transactional_batch, start_half
from rocketstore.broker.server import Connection, Handler
from rocketstore.broker.topics import PERM_READ, PERM_WRITE, TopicConfig, valid_topic
from rocketstore.errors import InvalidMessageError, MessageNotFoundError, RemoteProtocolError, StoreError
from rocketstore.format.properties import decode_properties
from rocketstore.format.topics import AUTO_CREATE_TOPIC, DLQ_PREFIX, RETRY_PREFIX, refuses_sends
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode
from rocketstore.protocol.bodies import decode_batch_body

# SendMessageRequestHeaderV2 field names -> SendMessageRequestHeader names.
V2_NAMES = {"a": "producerGroup", "b": "topic", "c": "defaultTopic", "d": "defaultTopicQueueNums",
            "e": "queueId", "f": "sysFlag", "g": "bornTimestamp", "h": "flag", "i": "properties",
            "j": "reconsumeTimes", "k": "unitMode", "l": "maxReconsumeTimes", "m": "batch"}

PUT_STATUS_CODES = {
    PutStatus.PUT_OK: ResponseCode.SUCCESS,
    PutStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutStatus.CREATE_MAPEDFILE_FAILED: ResponseCode.SYSTEM_ERROR,
    PutStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutStatus.OS_PAGECACHE_BUSY: ResponseCode.SYSTEM_BUSY,
    PutStatus.UNKNOWN_ERROR: ResponseCode.SYSTEM_ERROR,
}
# Statuses under which the message was stored (the client still gets msgId and offsets).
STORED = {PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT,
          PutStatus.SLAVE_NOT_AVAILABLE}
PROPERTY_WAIT = "WAIT"
PROPERTY_CLUSTER = "CLUSTER"
PROPERTY_RETRY_TOPIC = "RETRY_TOPIC"
PROPERTY_ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
PROPERTY_DELAY = "DELAY"
PROPERTY_TRANSACTION = "TRAN_MSG"
RETRY_QUEUE_NUMS = 1
DLQ_QUEUE_NUMS = 1
DLQ_PERM = PERM_READ | PERM_WRITE  # RocketMQ 5 (4.x made it write-only): consumers of %DLQ%<group> read it
FIRST_RETRY_DELAY_LEVEL = 3  # a send-back with delayLevel 0 waits 3 + reconsumeTimes levels


def drop_default_wait(props: dict[str, str]) -> None:
    """Leave WAIT=true out of a sent message's record, as RocketMQ's SendMessageProcessor leaves WAIT out
    (to save its bytes); the records RocketMQ rebuilds from the message later keep it: a delayed message's
    parked record and a transaction's half message. Without WAIT the store waits, as WAIT=true says;
    WAIT=false stays in the record for the store to read."""
    if props.get(PROPERTY_WAIT) != "true" or props.get(PROPERTY_TRANSACTION, "").lower() == "true":
        return
    delay = props.get(PROPERTY_DELAY, "")
    if not (delay.isdigit() and int(delay) > 0):
        del props[PROPERTY_WAIT]


def _v1(cmd: RemotingCommand) -> RemotingCommand:
    # RocketMQ's SendMessageProcessor reads the short V2 header for SEND_MESSAGE_V2 and for
    # SEND_BATCH_MESSAGE (the Java producer sends batches with it); long names pass unchanged.
    if cmd.code in (RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        cmd.ext_fields = {V2_NAMES.get(k, k): v for k, v in cmd.ext_fields.items()}
    return cmd


async def _put(store: MessageStore, messages: list[Message]) -> list[PutResult]:
    """`put_batch` translated to request errors. With SYNC_FLUSH a put waits for the disk, so it runs
    in a worker thread (the store is thread-safe) instead of blocking every other connection."""
    try:
        return await store_write(store, store.put_batch, messages)
    except InvalidMessageError as exc:
        raise RequestError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from exc
    except StoreError as exc:
        raise RequestError(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc)) from exc


class SendHandlers:
    """Handlers that write messages."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict[int, Handler]:
        """Request code -> handler."""
        return {RequestCode.SEND_MESSAGE: self.send, RequestCode.SEND_MESSAGE_V2: self.send,
                RequestCode.SEND_BATCH_MESSAGE: self.send, RequestCode.CONSUMER_SEND_MSG_BACK: self.send_back}

    def _topic_for_send(self, cmd: RemotingCommand, topic: str) -> TopicConfig:
        if not valid_topic(topic):
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"topic name {topic!r} is not allowed")
        if topic == AUTO_CREATE_TOPIC:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"topic {topic} is reserved for auto-creation")
        if refuses_sends(topic):  # RocketMQ's TopicValidator.isNotAllowedSendTopic
            raise RequestError(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.")
        topics = self.ctx.topics
        config = topics.get(topic)
        if config is None:
            if topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
                return topics.ensure(topic, RETRY_QUEUE_NUMS)
            default = topics.get(cmd.ext_fields.get("defaultTopic", AUTO_CREATE_TOPIC))
            if default is None:
                raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist")
            nums = min(field_int(cmd, "defaultTopicQueueNums", default.write_queue_nums),
                       default.write_queue_nums)
            config = topics.ensure(topic, max(nums, 1))
        if not config.perm & PERM_WRITE:
            raise RequestError(ResponseCode.NO_PERMISSION, f"topic {topic} is not writable")
        return config

    def _message(self, cmd: RemotingCommand, conn: Connection, topic: str, queue_id: int,
                 props: dict[str, str], body: bytes, flag: int) -> Message:
        props[PROPERTY_CLUSTER] = self.ctx.config.cluster  # WAIT stays: the store reads it and keeps it
        return Message(topic, body, queue_id=queue_id, properties=props, flag=flag,
                       born_timestamp=field_int(cmd, "bornTimestamp", 0) or None, born_host=conn.peer,
                       sys_flag=field_int(cmd, "sysFlag", 0), reconsume_times=field_int(cmd, "reconsumeTimes", 0))

    async def send(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE."""
        cmd = _v1(cmd)
        try:
            self.ctx.refuse_writes()
            topic = field_str(cmd, "topic")
            config = self._topic_for_send(cmd, topic)
            queue_id = field_int(cmd, "queueId", -1)
            if queue_id < 0:
                queue_id = random.randrange(config.write_queue_nums)
            if queue_id >= config.write_queue_nums:
                raise RequestError(ResponseCode.SYSTEM_ERROR,
                                   f"queueId {queue_id} out of range for {topic} ({config.write_queue_nums} queues)")
            props = decode_properties(cmd.ext_fields.get("properties", ""))
            topic, queue_id = self._dead_letter_if_exhausted(cmd, topic, queue_id)
            # The C++ client sends batches as code 10 with batch = "1"; Java clients use code 320.
            if cmd.code == RequestCode.SEND_BATCH_MESSAGE or field_bool(cmd, "batch"):
                refuse_transactional_batch(field_int(cmd, "sysFlag", 0))
                messages = self._batch_messages(cmd, conn, topic, queue_id, props)
            else:
                drop_default_wait(props)
                messages = [self._message(cmd, conn, topic, queue_id, props, cmd.body, field_int(cmd, "flag", 0))]
            if len(messages) == 1 and is_half_message(props, messages[0].reconsume_times):  # TRAN_MSG=true
                results = [await start_half(self.ctx, messages[0])]
            else:
                results = await _put(self.ctx.store, messages)
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        return self._respond(cmd, queue_id, results)

    def _dead_letter_if_exhausted(self, cmd: RemotingCommand, topic: str, queue_id: int) -> tuple[str, int]:
        if not topic.startswith(RETRY_PREFIX):
            return topic, queue_id
        limit = field_int(cmd, "maxReconsumeTimes", self.ctx.config.max_reconsume_times)
        if field_int(cmd, "reconsumeTimes", 0) < limit:
            return topic, queue_id
        dlq = DLQ_PREFIX + topic[len(RETRY_PREFIX):]
        self.ctx.topics.ensure(dlq, DLQ_QUEUE_NUMS, DLQ_PERM)
        return dlq, 0

    def _batch_messages(self, cmd: RemotingCommand, conn: Connection, topic: str, queue_id: int,
                        props: dict[str, str]) -> list[Message]:
        try:
            items = decode_batch_body(cmd.body)
        except RemoteProtocolError as exc:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, f"bad batch body: {exc}") from exc
        if not items:
            raise RequestError(ResponseCode.MESSAGE_ILLEGAL, "empty batch")
        messages = []
        for item in items:
            merged = {**decode_properties(item.properties), **props}
            messages.append(self._message(cmd, conn, topic, queue_id, merged, item.body, item.flag))
        return messages

    def _respond(self, cmd: RemotingCommand, queue_id: int, results: list[PutResult]) -> RemotingCommand:
        first = results[0]
        if len(results) == 1 and first.status is PutStatus.PUT_OK:  # the usual send, said in fewer steps
            self.ctx.stats.record_put(first.topic, 1, first.size)
            self.ctx.notify_arrival(first.topic, first.queue_id)
            return cmd.response(ResponseCode.SUCCESS, ext_fields={
                "msgId": first.msg_id, "queueId": str(queue_id), "queueOffset": str(first.queue_offset)})
        stored = [result for result in results if result.status in STORED]
        self.ctx.stats.record_put(first.topic, len(stored), sum(result.size for result in stored))
        for result in stored:
            self.ctx.notify_arrival(result.topic, result.queue_id)
        code = PUT_STATUS_CODES.get(first.status, ResponseCode.SYSTEM_ERROR)
        if first.status not in STORED:
            return cmd.response(code, f"put failed: {first.status.value}")
        return cmd.response(code, ext_fields={
            "msgId": ",".join(r.msg_id for r in results), "queueId": queue_id,
            "queueOffset": first.queue_offset})

    async def send_back(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """CONSUMER_SEND_MSG_BACK: re-deliver a consumed message through the group's retry topic."""
        try:
            self.ctx.refuse_writes()
            group = field_str(cmd, "group")
            phy_offset = field_int(cmd, "offset")
            try:
                original = self.ctx.store.message_at(phy_offset)
            except (MessageNotFoundError, StoreError, ValueError) as exc:
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"no message at offset {phy_offset}: {exc}") from exc
            props = dict(original.properties)
            props.setdefault(PROPERTY_RETRY_TOPIC, original.topic)
            # RocketMQ keeps the first copy's ORIGIN_MESSAGE_ID, else names the record by its offset msgId (the
            # request's originMsgId, the client's UNIQ_KEY, is not used)
            props.setdefault(PROPERTY_ORIGIN_MESSAGE_ID, original.msg_id)
            props[PROPERTY_WAIT] = "false"  # RocketMQ does not wait for the disk on a send-back
            limit = field_int(cmd, "maxReconsumeTimes", self.ctx.config.max_reconsume_times)
            delay_level = field_int(cmd, "delayLevel", 0)
            if original.reconsume_times >= limit or delay_level < 0:
                topic = DLQ_PREFIX + group
                self.ctx.topics.ensure(topic, DLQ_QUEUE_NUMS, DLQ_PERM)
                props.pop(PROPERTY_DELAY, None)
            else:
                topic = RETRY_PREFIX + group
                self.ctx.topics.ensure(topic, RETRY_QUEUE_NUMS)
                props[PROPERTY_DELAY] = str(delay_level or FIRST_RETRY_DELAY_LEVEL + original.reconsume_times)
            message = Message(topic, original.body, queue_id=0, properties=props, flag=original.flag,
                              born_timestamp=original.born_timestamp, born_host=original.born_host,
                              sys_flag=original.sys_flag, reconsume_times=original.reconsume_times + 1)
            (result,) = await _put(self.ctx.store, [message])
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        if result.status not in STORED:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"put failed: {result.status.value}")
        self.ctx.stats.record_put(result.topic, 1, result.size)
        self.ctx.notify_arrival(result.topic, result.queue_id)
        return cmd.response(ResponseCode.SUCCESS)
