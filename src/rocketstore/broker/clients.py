"""Who is connected: producer and consumer groups from heartbeats, and orderly-consumer queue locks.

Consumers of a group learn about each other from GET_CONSUMER_LIST_BY_GROUP; when the group changes
the broker tells every member with a oneway NOTIFY_CONSUMER_IDS_CHANGED so they rebalance at once
instead of at their next 20-second tick.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rocketstore.broker.server import Connection
from rocketstore.protocol.codes import RequestCode


@dataclass(slots=True)
class ConsumerInfo:
    """One consumer client in one group."""

    client_id: str
    conn: Connection
    subscriptions: dict[str, str] = field(default_factory=dict)  # topic -> expression
    message_model: str = "CLUSTERING"
    last_seen_ms: int = 0
    language: str = "JAVA"
    version: int = 0
    consume_type: str = "CONSUME_PASSIVELY"
    consume_from_where: str = "CONSUME_FROM_LAST_OFFSET"
    subscription_data: dict[str, dict[str, Any]] = field(default_factory=dict)  # topic -> SubscriptionData


@dataclass(slots=True)
class ProducerInfo:
    """One producer client in one group."""

    client_id: str
    conn: Connection
    language: str = "JAVA"
    version: int = 0


MqKey = tuple[str, str, int]  # topic, broker name, queue id


class ClientRegistry:
    """Consumer groups, producer groups and queue locks.

    Args:
        lock_expiry_ms: a queue lock not renewed for this long is free again.
        clock_ms: epoch milliseconds.
    """

    def __init__(self, lock_expiry_ms: int, clock_ms: Callable[[], int] | None = None) -> None:
        self.consumers: dict[str, dict[str, ConsumerInfo]] = {}
        self.producers: dict[str, dict[str, ProducerInfo]] = {}
        self.lock_expiry_ms = lock_expiry_ms
        self._clock = clock_ms or (lambda: int(time.time() * 1000))
        self._locks: dict[tuple[str, MqKey], tuple[str, int]] = {}

    def heartbeat(self, data: dict[str, Any], conn: Connection, language: str = "JAVA", version: int = 0) -> list[str]:
        """Record a HEART_BEAT body (and the language and version of its request); returns the consumer
        groups whose membership changed."""
        client_id = str(data.get("clientID", ""))
        now = self._clock()
        changed = []
        for item in data.get("consumerDataSet") or []:
            group = str(item.get("groupName", ""))
            members = self.consumers.setdefault(group, {})
            subs = {str(s.get("topic")): str(s.get("subString") or "*")
                    for s in item.get("subscriptionDataSet") or []}
            known = members.get(client_id)
            if known is None or known.conn is not conn:
                changed.append(group)
            data_set = {str(sub.get("topic")): sub for sub in item.get("subscriptionDataSet") or []
                        if isinstance(sub, dict)}
            members[client_id] = ConsumerInfo(client_id, conn, subs, str(item.get("messageModel", "CLUSTERING")),
                                              now, language, version,
                                              str(item.get("consumeType") or "CONSUME_PASSIVELY"),
                                              str(item.get("consumeFromWhere") or "CONSUME_FROM_LAST_OFFSET"),
                                              data_set)
        for item in data.get("producerDataSet") or []:
            self.producers.setdefault(str(item.get("groupName", "")), {})[client_id] = ProducerInfo(
                client_id, conn, language, version)
        return changed

    def unregister(self, client_id: str, producer_group: str, consumer_group: str) -> list[str]:
        """Forget one client's membership; returns the consumer groups that changed."""
        self.producers.get(producer_group, {}).pop(client_id, None)
        if consumer_group and self.consumers.get(consumer_group, {}).pop(client_id, None) is not None:
            self._release_client(consumer_group, client_id)
            return [consumer_group]
        return []

    def connection_closed(self, conn: Connection) -> list[str]:
        """Forget every client that used `conn`; returns the consumer groups that changed."""
        changed = []
        for group, members in self.consumers.items():
            for client_id in [cid for cid, info in members.items() if info.conn is conn]:
                del members[client_id]
                self._release_client(group, client_id)
                changed.append(group)
        for producers in self.producers.values():
            for client_id in [cid for cid, info in producers.items() if info.conn is conn]:
                del producers[client_id]
        return changed

    def consumers_of(self, group: str) -> list[ConsumerInfo]:
        """The group's online consumers, by client id."""
        return [info for _cid, info in sorted(self.consumers.get(group, {}).items())]

    def producers_of(self, group: str) -> list[ProducerInfo] | None:
        """The group's producers, None when the group never sent a heartbeat."""
        members = self.producers.get(group)
        return None if members is None else [info for _cid, info in sorted(members.items())]

    def consumer_ids(self, group: str) -> list[str]:
        """Client ids of a group's consumers, sorted."""
        return sorted(self.consumers.get(group, {}))

    def subscribed_topics(self, group: str) -> set[str]:
        """Topics the group's online consumers subscribe."""
        return {topic for info in self.consumers.get(group, {}).values() for topic in info.subscriptions}

    def groups_subscribing(self, topic: str) -> list[str]:
        """Groups with an online consumer subscribing `topic`."""
        return [group for group, members in self.consumers.items()
                if any(topic in info.subscriptions for info in members.values())]

    def consumer_connections(self, group: str) -> list[Connection]:
        """The connections of the group's online consumers, one each."""
        seen: dict[int, Connection] = {}
        for info in self.consumers.get(group, {}).values():
            seen.setdefault(id(info.conn), info.conn)
        return list(seen.values())

    def subscription(self, group: str, topic: str) -> str | None:
        """The expression a group's consumers subscribed `topic` with, if any heartbeat said."""
        for info in self.consumers.get(group, {}).values():
            if topic in info.subscriptions:
                return info.subscriptions[topic]
        return None

    def notify_changed(self, group: str) -> None:
        """Tell every consumer of `group` that the member list changed."""
        for info in list(self.consumers.get(group, {}).values()):
            info.conn.send_oneway(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group})

    def lock(self, group: str, client_id: str, mqs: list[MqKey]) -> list[MqKey]:
        """Lock the queues free or already held by `client_id`; returns those now held by it."""
        now = self._clock()
        granted = []
        for mq in mqs:
            holder = self._locks.get((group, mq))
            if holder is None or holder[0] == client_id or now - holder[1] > self.lock_expiry_ms:
                self._locks[(group, mq)] = (client_id, now)
                granted.append(mq)
        return granted

    def unlock(self, group: str, client_id: str, mqs: list[MqKey]) -> None:
        """Release the queues `client_id` holds."""
        for mq in mqs:
            holder = self._locks.get((group, mq))
            if holder is not None and holder[0] == client_id:
                del self._locks[(group, mq)]

    def _release_client(self, group: str, client_id: str) -> None:
        for key in [k for k, v in self._locks.items() if k[0] == group and v[0] == client_id]:
            del self._locks[key]
