"""Consumer-side reads: PULL_MESSAGE (11) with long polling, consumer offsets (14, 15) and queue
bounds (29, 30, 31, 32). Thin calls into `MessageStore.get` and the broker's `ConsumerOffsets` (the store's
offsets; kept in memory over a read-only store)."""

from __future__ import annotations

import time

from rocketstore import GetResult, GetStatus, InvalidArgumentError
from rocketstore.broker.context import BrokerContext, RequestError, field_int, field_str
from rocketstore.broker.long_poll import Wakeup
from rocketstore.broker.server import Connection, Handler
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode
from rocketstore.protocol.codes import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND

# GetMessageStatus -> pull response code (RocketMQ PullMessageProcessor).
GET_STATUS_CODES = {
    GetStatus.FOUND: ResponseCode.SUCCESS,
    GetStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}
RECHECK_INTERVAL_S = 0.5
EMPTY_QUEUE = {GetStatus.NO_MATCHED_LOGIC_QUEUE, GetStatus.NO_MESSAGE_IN_QUEUE}


def _tags(expression: str | None) -> str | None:
    if expression is None:
        return None
    expression = expression.strip()
    return None if expression in ("", "*") else expression


def _pull_code(result: GetResult, offset: int) -> int:
    if result.status in EMPTY_QUEUE:
        return ResponseCode.PULL_OFFSET_MOVED if offset != 0 else ResponseCode.PULL_NOT_FOUND
    return GET_STATUS_CODES[result.status]


class PullHandlers:
    """Handlers that read queues and keep consumer offsets."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict[int, Handler]:
        """Request code -> handler."""
        return {
            RequestCode.PULL_MESSAGE: self.pull,
            RequestCode.QUERY_CONSUMER_OFFSET: self.query_offset,
            RequestCode.UPDATE_CONSUMER_OFFSET: self.update_offset,
            RequestCode.GET_MAX_OFFSET: self.max_offset,
            RequestCode.GET_MIN_OFFSET: self.min_offset,
            RequestCode.SEARCH_OFFSET_BY_TIMESTAMP: self.search_offset,
            RequestCode.GET_EARLIEST_MSG_STORETIME: self.earliest_time,
        }

    async def pull(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """PULL_MESSAGE; held up to suspendTimeoutMillis when it finds nothing and may be suspended."""
        try:
            group = field_str(cmd, "consumerGroup")
            topic = field_str(cmd, "topic")
            queue_id = field_int(cmd, "queueId")
            offset = field_int(cmd, "queueOffset")
            max_nums = max(1, min(field_int(cmd, "maxMsgNums", 32), self.ctx.store.config.max_get_count))
            sys_flag = field_int(cmd, "sysFlag", 0)
            if self.ctx.topics.get(topic) is None:
                raise RequestError(ResponseCode.TOPIC_NOT_EXIST, f"topic {topic} does not exist")
            commit = field_int(cmd, "commitOffset", -1)
            if sys_flag & PULL_COMMIT_OFFSET and commit >= 0:
                try:
                    self.ctx.offsets.commit(group, topic, queue_id, commit)
                except InvalidArgumentError as exc:
                    raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
            if sys_flag & PULL_SUBSCRIPTION:
                expression = cmd.ext_fields.get("subscription")
            else:
                expression = self.ctx.clients.subscription(group, topic)
            tags = _tags(expression)
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        result = self.ctx.store.get(topic, queue_id, offset, max_nums, tags=tags)
        code = _pull_code(result, offset)
        suspend_ms = min(field_int(cmd, "suspendTimeoutMillis", 0), self.ctx.config.max_suspend_ms)
        if code == ResponseCode.PULL_NOT_FOUND and sys_flag & PULL_SUSPEND and suspend_ms > 0:
            deadline = time.monotonic() + suspend_ms / 1000
            while code == ResponseCode.PULL_NOT_FOUND and (left := deadline - time.monotonic()) > 0:
                # Sends through this broker wake the pull at once; messages the store writes on its
                # own (delayed and retried ones) are seen at the next re-check.
                wakeup = await self.ctx.waiters.wait(topic, queue_id, min(left, RECHECK_INTERVAL_S),
                                                     owner=(conn, group))
                if wakeup is Wakeup.RELEASED:
                    break
                if wakeup is Wakeup.ARRIVED or self.ctx.store.max_offset(topic, queue_id) > offset:
                    result = self.ctx.store.get(topic, queue_id, offset, max_nums, tags=tags)
                    code = _pull_code(result, offset)
        return self._respond(cmd, result, code, offset)

    def _respond(self, cmd: RemotingCommand, result: GetResult, code: int, offset: int) -> RemotingCommand:
        next_offset = result.next_offset
        if code == ResponseCode.PULL_NOT_FOUND and result.status is GetStatus.OFFSET_OVERFLOW_ONE:
            next_offset = offset
        body = b"".join(m.raw for m in result.messages) if code == ResponseCode.SUCCESS else b""
        if body:
            self.ctx.stats.record_get(cmd.ext_fields.get("topic", ""), cmd.ext_fields.get("consumerGroup", ""),
                                      len(result.messages), len(body))
        return cmd.response(code, None if code == ResponseCode.SUCCESS else result.status.value, {
            "suggestWhichBrokerId": 0, "nextBeginOffset": next_offset, "minOffset": result.min_offset,
            "maxOffset": result.max_offset}, body)

    async def query_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """QUERY_CONSUMER_OFFSET: the committed offset; 0 for a fresh group on a queue starting at 0."""
        try:
            group, topic = field_str(cmd, "consumerGroup"), field_str(cmd, "topic")
            queue_id = field_int(cmd, "queueId")
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        offset = self.ctx.offsets.get(group, topic, queue_id)
        if offset is None:
            if self.ctx.store.min_offset(topic, queue_id) > 0:
                return cmd.response(ResponseCode.QUERY_NOT_FOUND, "no committed offset for this group")
            offset = 0
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    async def update_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """UPDATE_CONSUMER_OFFSET. A negative offset (-1: the npm `ali-ons` client's "no offset") is
        answered SUCCESS as RocketMQ 4.9.8 answers it, and changes nothing: the group's committed offset,
        if any, stays (4.9.8 records the -1, which its QUERY_CONSUMER_OFFSET then treats as none)."""
        try:
            group, topic = field_str(cmd, "consumerGroup"), field_str(cmd, "topic")
            queue_id, offset = field_int(cmd, "queueId"), field_int(cmd, "commitOffset")
            if offset < 0:
                return cmd.response(ResponseCode.SUCCESS)
            self.ctx.offsets.commit(group, topic, queue_id, offset)
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        except InvalidArgumentError as exc:  # an offset or queue id RocketMQ's Java types cannot hold
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return cmd.response(ResponseCode.SUCCESS)

    def _queue(self, cmd: RemotingCommand) -> tuple[str, int]:
        return field_str(cmd, "topic"), field_int(cmd, "queueId")

    async def max_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_MAX_OFFSET."""
        try:
            topic, queue_id = self._queue(cmd)
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": self.ctx.store.max_offset(topic, queue_id)})

    async def min_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_MIN_OFFSET."""
        try:
            topic, queue_id = self._queue(cmd)
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": self.ctx.store.min_offset(topic, queue_id)})

    async def search_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """SEARCH_OFFSET_BY_TIMESTAMP."""
        try:
            topic, queue_id = self._queue(cmd)
            timestamp = field_int(cmd, "timestamp")
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        offset = self.ctx.store.offset_by_time(topic, queue_id, timestamp)
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"offset": offset})

    async def earliest_time(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_EARLIEST_MSG_STORETIME: store time of the queue's first message."""
        try:
            topic, queue_id = self._queue(cmd)
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        first = next(iter(self.ctx.store.iter_queue(topic, queue_id, self.ctx.store.min_offset(topic, queue_id),
                                                     None)), None)
        if first is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "queue is empty")
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"timestamp": first.store_timestamp})
