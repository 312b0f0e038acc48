"""BrokerContext: what every request handler shares (store, topics, clients, held pulls, config)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rocketstore import MessageStore
from rocketstore.broker.clients import ClientRegistry
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.long_poll import PullWaiters
from rocketstore.broker.topics import TopicTable
from rocketstore.broker.transactions import TransactionTable
from rocketstore.protocol import RemotingCommand, ResponseCode


class RequestError(Exception):
    """A request the broker answers with an error code instead of serving it."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


@dataclass
class BrokerContext:
    """Shared state of one broker process."""

    config: BrokerConfig
    store: MessageStore
    topics: TopicTable
    clients: ClientRegistry
    transactions: TransactionTable
    waiters: PullWaiters = field(default_factory=PullWaiters)

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
