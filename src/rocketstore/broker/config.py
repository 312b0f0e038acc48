"""BrokerConfig: the settings of one `rocketstore serve` process, with units in the names."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from rocketstore.broker.server import ConnectionLimits
from rocketstore.broker.topics import TopicSpec
from rocketstore.broker.transactions import TransactionSettings
from rocketstore.config import StoreConfig
from rocketstore.protocol.address import split_address


@dataclass(frozen=True)
class BrokerConfig:
    """Settings of a broker process.

    Attributes:
        store_path: the store directory.
        listen: ``host:port`` the broker serves clients on.
        namesrv: ``host:port`` of the name server this process serves (None: broker only).
        broker_name: name announced in routes.
        cluster: cluster name announced in routes and added to messages as ``CLUSTER``.
        acl_file: plain_acl.yml to enforce, or None for no access control.
        default_queue_nums: queues of a topic created on first send (capped by the client's
            defaultTopicQueueNums).
        max_frame_size_bytes: largest accepted request frame.
        max_suspend_ms: longest a pull request is held waiting for messages.
        max_reconsume_times: deliveries of a failed message before it goes to ``%DLQ%<group>``,
            unless the client's request says otherwise.
        lock_expiry_ms: queue locks of orderly consumers expire after this long without renewal.
        schedule_poll_interval_ms: how often delayed messages are checked for delivery.
        advertised_host: address given to clients in routes and msgIds (default: the listen host).
        limits: what clients can make the server hold (connections, requests in flight, unread
            answers, unfinished frames, idle time).
        store_config: the store's settings (`--config`, geometry flags); None: what the store recorded.
        transactions: when open transactions are asked about, and how often before they are given up.
        topics: topics created (or updated) at start, before the broker listens (`serve --topic`).
    """

    store_path: Path
    listen: str = "127.0.0.1:10911"
    namesrv: str | None = "127.0.0.1:9876"
    broker_name: str = "broker-a"
    cluster: str = "DefaultCluster"
    acl_file: Path | None = None
    default_queue_nums: int = 4
    max_frame_size_bytes: int = 16 * 1024 * 1024
    max_suspend_ms: int = 30_000
    max_reconsume_times: int = 16
    lock_expiry_ms: int = 60_000
    schedule_poll_interval_ms: int = 100
    advertised_host: str | None = None
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    store_config: StoreConfig | None = None
    transactions: TransactionSettings = field(default_factory=TransactionSettings)
    topics: tuple[TopicSpec, ...] = ()

    @property
    def broker_addr(self) -> str:
        """``ip:port`` clients are told to connect to."""
        host, port = split_address(self.listen)
        if self.advertised_host:
            host = self.advertised_host
        elif host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        return f"{host}:{port}"
