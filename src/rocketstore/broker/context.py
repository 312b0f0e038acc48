"""BrokerContext: what every request handler shares (store, topics, clients, held pulls, config)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from rocketstore import FlushMode, InvalidArgumentError, MessageStore
from rocketstore.broker.clients import ClientRegistry
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.long_poll import PullWaiters
from rocketstore.broker.stats import BrokerStats
from rocketstore.broker.topics import TopicTable
from rocketstore.broker.transactions import TransactionTable
from rocketstore.format.layout import JAVA_INT_MAX, JAVA_LONG_MAX
from rocketstore.protocol import RemotingCommand, ResponseCode
from rocketstore.store.files import SubscriptionGroups

T = TypeVar("T")


async def store_write(store: MessageStore, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`call(*args, **kwargs)`, a write to `store`, for either protocol's handlers: in a worker thread when
    SYNC flushing makes it wait for the disk (the store is thread-safe), so other connections go on; else
    here, on the loop."""
    if store.config.flush_mode is FlushMode.SYNC:
        return await asyncio.to_thread(call, *args, **kwargs)
    return call(*args, **kwargs)


class RequestError(Exception):
    """A request the broker answers with an error code instead of serving it."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


READ_ONLY_REMARK = "the broker[{}] sending message is forbidden: it serves a read-only store"


class ConsumerOffsets:
    """The consumer offsets groups commit: the store's (config/consumerOffset.json). Over a store opened
    read-only nothing is written: a commit is kept in memory, over the store's own offsets, until the
    broker stops.

    Args:
        store: the broker's store.
    """

    def __init__(self, store: MessageStore) -> None:
        self.store = store
        self._memory: dict[tuple[str, str, int], int] = {}

    def get(self, group: str, topic: str, queue_id: int) -> int | None:
        """The offset `group` committed for (topic, queue id), None if never."""
        if self._memory:
            offset = self._memory.get((group, topic, queue_id))
            if offset is not None:
                return offset
        return self.store.committed_offset(group, topic, queue_id)

    def committed_pairs(self) -> set[tuple[str, str]]:
        """Every (group, topic) with a committed offset."""
        pairs = {(group, topic) for group, table in self.store.consumer_offsets().items() for topic, _ in table}
        return pairs | {(group, topic) for group, topic, _ in self._memory}

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record that `group` will next consume `offset` of (topic, queue id).

        Raises:
            InvalidArgumentError: what `MessageStore.commit_offset` refuses (an empty group or topic, `@`
                in either, a queue id or offset that Java's int or long cannot hold).
        """
        if not self.store.read_only:
            self.store.commit_offset(group, topic, queue_id, offset)
            return
        for name, text in (("group", group), ("topic", topic)):
            if not text or "@" in text:
                raise InvalidArgumentError(f"commit_offset: {name} {text!r} must be a non-empty str without '@'")
        for name, value, high in (("queue_id", queue_id, JAVA_INT_MAX), ("offset", offset, JAVA_LONG_MAX)):
            if not 0 <= value <= high:
                raise InvalidArgumentError(f"commit_offset: {name} {value} is not in 0..{high}")
        self._memory[(group, topic, queue_id)] = offset


@dataclass
class BrokerContext:
    """Shared state of one broker process. Over a store opened read-only (`serve --read-only`) every
    request that would write is refused and consumer offsets are kept in memory (`offsets`)."""

    config: BrokerConfig
    store: MessageStore
    topics: TopicTable
    clients: ClientRegistry
    transactions: TransactionTable
    waiters: PullWaiters = field(default_factory=PullWaiters)
    offsets: ConsumerOffsets = field(init=False)
    groups: SubscriptionGroups = field(init=False)
    stats: BrokerStats = field(default_factory=BrokerStats)

    def __post_init__(self) -> None:
        self.offsets = ConsumerOffsets(self.store)
        self.groups = SubscriptionGroups(self.store.path, lambda: int(time.time() * 1000),
                                         read_only=self.store.read_only)

    @property
    def read_only(self) -> bool:
        """True when the store was opened read-only: nothing is written or deleted."""
        return self.store.read_only

    def refuse_writes(self) -> None:
        """Raises: RequestError: NO_PERMISSION when the store is read-only (as RocketMQ answers a send to
        a broker without write permission)."""
        if self.store.read_only:
            raise RequestError(ResponseCode.NO_PERMISSION, READ_ONLY_REMARK.format(self.config.broker_addr))

    def notify_arrival(self, topic: str, queue_id: int) -> None:
        """A message landed in (topic, queue id): wake held pulls."""
        self.waiters.notify(topic, queue_id)


def field_str(cmd: RemotingCommand, name: str, default: str | None = None) -> str:
    """A required (or defaulted) string field of the request header.

    Raises:
        RequestError: the field is missing and has no default.
    """
    value = cmd.ext_fields.get(name, default)
    if value is None:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"request header field {name!r} is missing")
    return value


def field_int(cmd: RemotingCommand, name: str, default: int | None = None) -> int:
    """A required (or defaulted) integer field of the request header.

    Raises:
        RequestError: the field is missing without default, or not an integer.
    """
    value = cmd.ext_fields.get(name)
    if value is None or value == "":
        if default is None:
            raise RequestError(ResponseCode.SYSTEM_ERROR, f"request header field {name!r} is missing")
        return default
    if value in ("true", "false"):
        return int(value == "true")
    try:
        return int(value)
    except ValueError as exc:
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"request header field {name!r} is not an integer") from exc


def field_bool(cmd: RemotingCommand, name: str) -> bool:
    """A boolean header field ("true", "1"); missing is False."""
    return cmd.ext_fields.get(name, "false").lower() in ("true", "1")
