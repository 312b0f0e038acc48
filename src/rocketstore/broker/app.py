"""BrokerApp: one process serving the Broker role (and the NameServer role) over a MessageStore.

Wires the store, the topic table, the client registry, the request handlers, ACL and the
periodic flush to `RemotingServer`s, and runs until `stop()` (SIGTERM, SIGINT).
On stop it closes the listeners, answers nothing more, flushes and closes the store.
Delayed messages (retries) are delivered by the store's own schedule service.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING

from rocketstore import FlushMode, MessageStore, RocketStoreError
from rocketstore.broker.acl import AclChecker, AclConfig
from rocketstore.broker.clients import ClientRegistry
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.context import BrokerContext
from rocketstore.broker.handlers_admin import AdminHandlers
from rocketstore.broker.handlers_client import ClientHandlers
from rocketstore.broker.handlers_pull import PullHandlers
from rocketstore.broker.handlers_query import QueryHandlers
from rocketstore.broker.handlers_send import SendHandlers
from rocketstore.broker.handlers_transaction import TransactionHandlers
from rocketstore.broker.kv_config import KvConfig
from rocketstore.broker.namesrv import NameServerHandlers
from rocketstore.broker.retention import describe_retention
from rocketstore.broker.server import Connection, Dispatcher, Handler, RemotingServer
from rocketstore.broker.topics import TopicTable, declare_topics
from rocketstore.broker.transactions import TransactionTable
from rocketstore.protocol import RemotingCommand, ResponseCode
from rocketstore.protocol.address import split_address

if TYPE_CHECKING:
    from rocketstore.broker.grpc.service import GrpcEndpoint

log = logging.getLogger("rocketstore.broker")

FLUSH_CONFIG_INTERVAL_S = 5.0


def open_store(config: BrokerConfig, delay_levels: str | None = None,
               flush_mode: FlushMode | None = None, *, read_only: bool = False) -> MessageStore:
    """Open the store with its recorded geometry, the broker address as store host (so msgIds point
    at this broker) and, when given, other delay levels and flush mode; `read_only`: take no lock, write
    and delete nothing (no recovery, no retention, no delayed delivery).

    Raises:
        StoreLockedError: another process owns the store.
        StoreLayoutError: the store's files do not match its recorded geometry.
        ValueError: delay levels that cannot be parsed.
    """
    if config.store_config is not None:  # given settings: one open, checked against what the store recorded
        given = config.store_config
        return MessageStore.open(config.store_path, replace(
            given, store_host=config.broker_addr, delay_levels=delay_levels or given.delay_levels,
            flush_mode=flush_mode or given.flush_mode), read_only=read_only)
    store = MessageStore.open(config.store_path, read_only=read_only)
    wanted = replace(store.config, store_host=config.broker_addr,
                     delay_levels=delay_levels or store.config.delay_levels,
                     flush_mode=flush_mode or store.config.flush_mode)
    if wanted == store.config:
        return store
    store.close()
    return MessageStore.open(config.store_path, wanted, read_only=read_only)


class BrokerApp:
    """A running broker.

    Args:
        config: broker settings.
        delay_levels: delay of each level (``"1s 5s ..."``) instead of the store's.
        flush_mode: the store's flush mode (default ASYNC).
        grpc_address: ``host:port`` of the gRPC endpoint for RocketMQ 5 clients (None: none).
        read_only: open the store read-only: consumers, queries and admin reads are served, every request
            that would write is refused, consumer offsets are kept in memory, nothing on disk changes.
    """

    def __init__(self, config: BrokerConfig, delay_levels: str | None = None,
                 flush_mode: FlushMode | None = None, grpc_address: str | None = None, *,
                 read_only: bool = False) -> None:
        self.config = config
        self.read_only = read_only
        self.grpc_address = grpc_address
        self.grpc: GrpcEndpoint | None = None
        self.delay_levels = delay_levels
        self.flush_mode = flush_mode
        self.servers: list[RemotingServer] = []
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.ctx: BrokerContext | None = None
        self._unchecked_codes: set[int] = set()
        self.acl = AclChecker(AclConfig.load(config.acl_file)) if config.acl_file else None

    async def start(self) -> None:
        """Open the store and start listening.

        Raises:
            StoreLockedError: another process owns the store.
            OSError: an address cannot be bound.
        """
        cfg = self.config
        store = open_store(cfg, self.delay_levels, self.flush_mode, read_only=self.read_only)
        log.info("%s", describe_retention(store.config, read_only=store.read_only))
        try:
            topics = TopicTable(cfg.default_queue_nums)
            topics.adopt(store.topic_config(), store.queues())
            declare_topics(store, topics, cfg.topics)
            transactions = TransactionTable(store, cfg.transactions)
            transactions.load()
            ctx = BrokerContext(cfg, store, topics, ClientRegistry(cfg.lock_expiry_ms), transactions)
            problem = ctx.groups.load()
            if problem is not None:
                log.warning("%s was damaged (%s): using %s", problem.file, problem.problem, problem.used)
            self.ctx = ctx
            if self.acl is not None:
                self.acl.topic_at = partial(_topic_at, store)
            broker_table: dict[int, Handler] = {}
            transaction_handlers = TransactionHandlers(ctx)
            transactions.add_asker(transaction_handlers.ask_producer)
            for group in (SendHandlers(ctx), PullHandlers(ctx), ClientHandlers(ctx), QueryHandlers(ctx),
                          AdminHandlers(ctx), transaction_handlers):
                broker_table.update(group.table())
            kv = KvConfig(store.path, read_only=store.read_only)
            kv.load()
            namesrv_table = NameServerHandlers(cfg, topics, read_only=store.read_only, kv=kv).table()
            host, port = split_address(cfg.listen)
            if cfg.namesrv and split_address(cfg.namesrv) == (host, port):
                broker_table.update(namesrv_table)
                self._unchecked_codes = set(namesrv_table)
            broker = Dispatcher(broker_table, on_close=self._connection_closed, before=self._check_acl)
            self.servers.append(RemotingServer(host, port, broker, cfg.max_frame_size_bytes, cfg.limits))
            if cfg.namesrv and split_address(cfg.namesrv) != (host, port):
                ns_host, ns_port = split_address(cfg.namesrv)
                self.servers.append(RemotingServer(ns_host, ns_port, Dispatcher(namesrv_table),
                                                   cfg.max_frame_size_bytes, cfg.limits))
            for server in self.servers:
                await server.start()
            if self.grpc_address is not None:
                from rocketstore.broker.grpc.service import GrpcEndpoint  # grpcio is only needed with an endpoint

                self.grpc = GrpcEndpoint(ctx, self.grpc_address, cfg.max_frame_size_bytes,
                                         self.acl.config if self.acl is not None else None)
                await self.grpc.start()
        except BaseException:
            await self._close_servers()
            store.close()
            raise
        if not store.read_only:  # read-only: nothing to flush, no transaction is ended or given up
            self._tasks = [asyncio.create_task(self._flush_loop()), asyncio.create_task(self._transaction_check_loop())]
        log.info("broker %s serving %s%s on %s (name server %s, gRPC %s)", cfg.broker_name, cfg.store_path,
                 " read-only" if store.read_only else "", cfg.listen, cfg.namesrv or "-", self.grpc_address or "-")

    def _check_acl(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        if self.acl is None or cmd.code in self._unchecked_codes:
            return None  # the name-server role has no ACL, as in RocketMQ 4.x
        reason = self.acl.check(cmd, conn.peer.rpartition(":")[0])
        if reason is None:
            return None
        log.info("refused request %d from %s: %s", cmd.code, conn.peer, reason)
        return cmd.response(ResponseCode.NO_PERMISSION, reason)

    def _connection_closed(self, conn: Connection) -> None:
        if self.ctx is None:
            return
        self.ctx.waiters.release_matching(lambda owner: isinstance(owner, tuple) and owner[0] is conn)
        for group in self.ctx.clients.connection_closed(conn):
            self.ctx.clients.notify_changed(group)

    async def _flush_loop(self) -> None:
        while not self._stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), FLUSH_CONFIG_INTERVAL_S)
            try:
                if self.ctx is not None:
                    await asyncio.to_thread(self.ctx.store.flush)  # fsync must not stall the loop
                    await asyncio.to_thread(self.ctx.groups.persist)
            except Exception:  # service loop: record and keep going
                log.exception("periodic flush failed")

    async def _transaction_check_loop(self) -> None:
        """Ask producers about open transactions that are due (TransactionTable.check)."""
        settings = self.config.transactions
        tick = min(max(min(settings.timeout_ms, settings.check_interval_ms) / 4000, 0.1), 5.0)
        while not self._stopping.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), tick)
            try:
                if self.ctx is not None and not self._stopping.is_set():
                    self.ctx.transactions.check(int(time.time() * 1000))
            except Exception:  # service loop: record and keep going
                log.exception("transaction check failed")

    @property
    def ports(self) -> list[int]:
        """Bound ports, broker first."""
        return [server.port for server in self.servers]

    def stop(self) -> None:
        """Ask `serve_forever` to return."""
        self._stopping.set()

    async def _close_servers(self) -> None:
        if self.grpc is not None:
            await self.grpc.close()
            self.grpc = None
        for server in self.servers:
            await server.close()

    async def close(self) -> None:
        """Stop listening, finish services, flush and close the store."""
        self._stopping.set()
        await self._close_servers()
        if self._tasks:  # let a flush in progress finish before the store closes
            _done, pending = await asyncio.wait(self._tasks, timeout=30)
            for task in pending:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.ctx is not None:
            try:
                self.ctx.groups.persist()
            except OSError as exc:
                log.warning("subscriptionGroup.json not written: %s", exc)
            self.ctx.store.close()
            self.ctx = None
        log.info("broker stopped")

    async def serve_forever(self) -> None:
        """Start, run until SIGTERM/SIGINT or `stop()`, then close.

        The signal handlers are in place before any port is bound: once a port answers, SIGTERM is a clean
        stop (one during the start is answered when the start ends).
        """
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop)
        await self.start()
        try:
            await self._stopping.wait()
        finally:
            await self.close()


def _topic_at(store: MessageStore, offset: int) -> str | None:
    """The topic of the record at `offset`, None when no record starts there (the ACL's record rule)."""
    try:
        return store.message_at(offset).topic
    except (RocketStoreError, ValueError, OverflowError):
        return None
