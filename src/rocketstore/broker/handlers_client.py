"""Client bookkeeping: HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38),
LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42)."""

from __future__ import annotations

import contextlib
from typing import Any

from rocketstore.broker.clients import MqKey
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.server import Connection, Handler
from rocketstore.broker.topics import PERM_READ, PERM_WRITE
from rocketstore.errors import RemoteProtocolError, RocketStoreError
from rocketstore.format.topics import RETRY_PREFIX
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode
from rocketstore.protocol.bodies import decode_json_body, encode_json_body


def _mqs(body: dict[str, Any]) -> list[MqKey]:
    return [(str(mq.get("topic")), str(mq.get("brokerName")), int(mq.get("queueId", 0)))
            for mq in body.get("mqSet") or []]


def _mq_json(mq: MqKey) -> dict[str, object]:
    return {"brokerName": mq[1], "queueId": mq[2], "topic": mq[0]}


class ClientHandlers:
    """Handlers that track producers and consumers."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict[int, Handler]:
        """Request code -> handler."""
        return {RequestCode.HEART_BEAT: self.heartbeat, RequestCode.UNREGISTER_CLIENT: self.unregister,
                RequestCode.GET_CONSUMER_LIST_BY_GROUP: self.consumer_list,
                RequestCode.LOCK_BATCH_MQ: self.lock, RequestCode.UNLOCK_BATCH_MQ: self.unlock}

    def _json(self, cmd: RemotingCommand) -> dict[str, Any]:
        try:
            data = decode_json_body(cmd.body)
        except RemoteProtocolError:
            return {}
        return data if isinstance(data, dict) else {}

    async def heartbeat(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """HEART_BEAT: remember the client's groups and subscriptions; create retry topics."""
        data = self._json(cmd)
        if not data:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "heartbeat body is not HeartbeatData JSON")
        changed = self.ctx.clients.heartbeat(data, conn, cmd.language, cmd.version)
        for consumer in data.get("consumerDataSet") or []:
            group = str(consumer.get("groupName", ""))
            self.ctx.topics.ensure(RETRY_PREFIX + group, 1, PERM_READ | PERM_WRITE)
            # RocketMQ's autoCreateSubscriptionGroup; a new group's retry topic goes to topics.json too (as
            # RocketMQ records it), so it is listed after a restart before its first retried message
            if self.ctx.groups.ensure(group) and not self.ctx.read_only:
                with contextlib.suppress(RocketStoreError):  # a name the store refuses stays in memory
                    self.ctx.store.ensure_topic(RETRY_PREFIX + group, 1)
        for group in changed:
            self.ctx.clients.notify_changed(group)
        return cmd.response(ResponseCode.SUCCESS)

    async def unregister(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """UNREGISTER_CLIENT."""
        fields = cmd.ext_fields
        group = fields.get("consumerGroup", "")
        changed = self.ctx.clients.unregister(fields.get("clientID", ""), fields.get("producerGroup", ""), group)
        if group:
            # The C++ client waits for its in-flight pulls when it shuts down: answer them now.
            self.ctx.waiters.release((conn, group))
        for group in changed:
            self.ctx.clients.notify_changed(group)
        return cmd.response(ResponseCode.SUCCESS)

    async def consumer_list(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_CONSUMER_LIST_BY_GROUP."""
        group = cmd.ext_fields.get("consumerGroup", "")
        ids = self.ctx.clients.consumer_ids(group)
        if not ids:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"no consumer of group {group} is online")
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body({"consumerIdList": ids}))

    async def lock(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """LOCK_BATCH_MQ: lock queues for an orderly consumer; the body lists those it now holds."""
        data = self._json(cmd)
        granted = self.ctx.clients.lock(str(data.get("consumerGroup", "")), str(data.get("clientId", "")),
                                        _mqs(data))
        return cmd.response(ResponseCode.SUCCESS,
                            body=encode_json_body({"lockOKMQSet": [_mq_json(mq) for mq in granted]}))

    async def unlock(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """UNLOCK_BATCH_MQ."""
        data = self._json(cmd)
        self.ctx.clients.unlock(str(data.get("consumerGroup", "")), str(data.get("clientId", "")), _mqs(data))
        return cmd.response(ResponseCode.SUCCESS)
