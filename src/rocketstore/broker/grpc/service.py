"""`apache.rocketmq.v2.MessagingService` over the broker's store: the gRPC endpoint RocketMQ 5 clients
talk to (what RocketMQ 5's proxy serves on port 8081).

`GrpcEndpoint` runs a grpc.aio server in the broker's event loop and shares its `BrokerContext` (store,
topic table, held remoting pulls), so a message sent over either protocol is seen by consumers of both.
Every RPC is a method of `MessagingService` below, registered by name from the descriptors; the RPCs
not served answer NOT_IMPLEMENTED (50100) with a message naming the RPC.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, ClassVar

import grpc

from rocketstore import FlushMode, Message, PutStatus
from rocketstore.broker.acl import AclConfig
from rocketstore.broker.context import BrokerContext, store_write
from rocketstore.broker.grpc.auth import GrpcAuthenticator
from rocketstore.broker.grpc.consumer_state import ConsumerStateTable, StateSaver
from rocketstore.broker.grpc.convert import (
    MAX_BODY_BYTES,
    GrpcStatusError,
    check_group,
    check_topic,
    status,
    to_proto_message,
    to_store_message,
)
from rocketstore.broker.grpc.logs import logged, short
from rocketstore.broker.grpc.pop import PopService, tag_filter
from rocketstore.broker.grpc.protos import SERVICE, pb
from rocketstore.broker.grpc.settings import client_settings
from rocketstore.broker.grpc.tls import TlsFront, fingerprint, load_pair, self_signed
from rocketstore.broker.topics import MESSAGE_TYPES, PERM_READ, PERM_WRITE, TopicConfig
from rocketstore.broker.transactions import TransactionError
from rocketstore.errors import InvalidMessageError, StoreError
from rocketstore.format.message import StoredMessage
from rocketstore.format.properties import REAL_QID, REAL_TOPIC

log = logging.getLogger("rocketstore.broker.grpc")

CLIENT_ID_HEADER = "x-mq-client-id"
MIN_INVISIBLE_MS_FOR_RECEIVE = 10_000  # ProxyConfig.minInvisibleTimeMillsForRecv
MAX_INVISIBLE_MS = 12 * 3600 * 1000  # ProxyConfig.maxInvisibleTimeMills
AUTO_RENEW_INVISIBLE_MS = 60_000  # ProxyConfig.defaultInvisibleTimeMills: push consumers' receives
MIN_POLLING_MS = 5_000  # grpcClientConsumerMinLongPollingTimeoutMillis
MAX_POLLING_MS = 20_000  # grpcClientConsumerMaxLongPollingTimeoutMillis
RECHECK_S = 0.5  # held receives also look again this often (invisible times, delivery times)
PUT_STATUS_CODES = {
    PutStatus.PUT_OK: "OK",
    PutStatus.FLUSH_DISK_TIMEOUT: "MASTER_PERSISTENCE_TIMEOUT",
    PutStatus.FLUSH_SLAVE_TIMEOUT: "SLAVE_PERSISTENCE_TIMEOUT",
    PutStatus.SLAVE_NOT_AVAILABLE: "HA_NOT_AVAILABLE",
    PutStatus.MESSAGE_ILLEGAL: "MESSAGE_CORRUPTED",
    PutStatus.PROPERTIES_SIZE_EXCEEDED: "MESSAGE_PROPERTIES_TOO_LARGE",
    PutStatus.OS_PAGECACHE_BUSY: "TOO_MANY_REQUESTS",
}
NOT_SERVED = ("PullMessage", "UpdateOffset", "GetOffset", "QueryOffset", "RecallMessage",
              "SyncLiteSubscription")
OUTBOX_COMMANDS = 256  # server commands waiting for a client's telemetry stream; past it one is dropped
TRANSACTION_CODES = {"invalid_id": pb.Code.INVALID_TRANSACTION_ID, "too_many": pb.Code.TOO_MANY_REQUESTS}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _client_id(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_HEADER:
            return str(value)
    return ""


def _millis(duration: Any) -> int:
    return duration.seconds * 1000 + duration.nanos // 1_000_000


class MessagingService:
    """The RPCs, each a thin translation into the store, the topic table and `PopService`.

    Args:
        ctx: the broker's shared state.
        advertised: ``host:port`` of this endpoint, given in routes when the client named none.
    """

    def __init__(self, ctx: BrokerContext, advertised: str) -> None:
        self.ctx = ctx
        self.advertised = advertised
        self.settings: dict[str, Any] = {}  # client id -> the Settings it announced
        self.outboxes: dict[str, asyncio.Queue[Any]] = {}  # client id -> commands for its telemetry stream
        self.state = ConsumerStateTable(ctx.store.path)
        self.state.load()
        self.pop = PopService(ctx.store, self.state, ctx.config.max_reconsume_times + 1,
                              on_put=ctx.notify_arrival, ensure_dlq=self._ensure_dlq, autosave=False,
                              offsets=ctx.offsets)
        # every change is in the file before it is answered; fsynced too when the store flushes SYNC; kept in
        # memory only over a read-only store
        self.saver = StateSaver(self.state, sync=ctx.store.config.flush_mode is FlushMode.SYNC,
                                in_memory=ctx.read_only)
        self._round_robin = itertools.count()
        self.peer: Callable[[str], str] = str  # the client's address for the gRPC peer of a call (TlsFront.peer)
        self._arrival = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._remove_listener = ctx.store.add_arrival_listener(
            lambda topic, queue_id, max_offset: loop.call_soon_threadsafe(self._arrived))
        self._remove_asker = ctx.transactions.add_asker(self._ask_producer)

    def close(self) -> None:
        self._remove_listener()
        self._remove_asker()

    def _arrived(self) -> None:
        self._arrival.set()
        self._arrival = asyncio.Event()

    def _ensure_dlq(self, topic: str) -> None:
        self.ctx.topics.ensure(topic, 1, PERM_READ | PERM_WRITE)  # readable, as RocketMQ 5 creates it

    def _refuse_writes(self) -> None:
        """Raises: GrpcStatusError: FORBIDDEN over a read-only store (the proxy's answer to a broker without
        write permission, NO_PERMISSION)."""
        if self.ctx.read_only:
            raise GrpcStatusError(pb.Code.FORBIDDEN, f"the broker {self.ctx.config.broker_name} serves a read-only "
                                                     "store: sending messages is forbidden")

    def _topic(self, resource: Any, perm: int) -> TopicConfig:
        check_topic(resource.name)
        config = self.ctx.topics.get(resource.name)
        if config is None:
            raise GrpcStatusError(pb.Code.TOPIC_NOT_FOUND, f"topic {resource.name} does not exist")
        if not config.perm & perm:
            raise GrpcStatusError(pb.Code.FORBIDDEN, f"topic {resource.name} does not allow this")
        return config

    # --- routes and clients -------------------------------------------------------------------

    async def QueryRoute(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Every queue of the topic, read-write, on this endpoint."""
        try:
            config = self._topic(request.topic, PERM_READ | PERM_WRITE)
        except GrpcStatusError as exc:
            return pb.QueryRouteResponse(status=status(exc.code, exc.message))
        response = pb.QueryRouteResponse(status=status(pb.Code.OK))
        for queue_id in range(config.write_queue_nums):
            self._queue(response.message_queues.add(), request, queue_id, config)
        return response

    async def QueryAssignment(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """What a push consumer receives from: this broker's queues as one assignment (queue id -1: any
        queue, as RocketMQ 5's proxy assigns for pop consumption)."""
        try:
            check_group(request.group.name)
            config = self._topic(request.topic, PERM_READ)
        except GrpcStatusError as exc:
            return pb.QueryAssignmentResponse(status=status(exc.code, exc.message))
        response = pb.QueryAssignmentResponse(status=status(pb.Code.OK))
        self._queue(response.assignments.add().message_queue, request, -1, config)
        return response

    def _queue(self, queue: Any, request: Any, queue_id: int, config: TopicConfig) -> None:
        """Fill a MessageQueue of the request's topic on this endpoint (the one the client named, if any);
        it accepts the topic's message type, or every type when the topic has none (RocketMQ 5's proxy
        gives the one type of a NORMAL, FIFO, DELAY or TRANSACTION topic)."""
        queue.id = queue_id
        queue.permission = pb.Permission.READ if self.ctx.read_only else pb.Permission.READ_WRITE
        queue.topic.CopyFrom(request.topic)
        queue.broker.name = self.ctx.config.broker_name
        queue.broker.id = 0
        if request.HasField("endpoints") and request.endpoints.addresses:
            queue.broker.endpoints.CopyFrom(request.endpoints)
        else:
            host, _, port = self.advertised.rpartition(":")
            queue.broker.endpoints.scheme = pb.AddressScheme.IPv4
            queue.broker.endpoints.addresses.add(host=host, port=int(port))
        kind = config.message_type
        queue.accept_message_types.extend([getattr(pb.MessageType, kind)] if kind in MESSAGE_TYPES else [
            pb.MessageType.NORMAL, pb.MessageType.FIFO, pb.MessageType.DELAY, pb.MessageType.TRANSACTION])

    async def Heartbeat(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        if request.HasField("group") and request.group.name:
            try:
                check_group(request.group.name)
            except GrpcStatusError as exc:
                return pb.HeartbeatResponse(status=status(exc.code, exc.message))
        if not _client_id(context):
            return pb.HeartbeatResponse(status=status(pb.Code.CLIENT_ID_REQUIRED, "x-mq-client-id is missing"))
        return pb.HeartbeatResponse(status=status(pb.Code.OK))

    async def NotifyClientTermination(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        self.settings.pop(_client_id(context), None)
        return pb.NotifyClientTerminationResponse(status=status(pb.Code.OK))

    async def Telemetry(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        """Answer each settings command with the settings a RocketMQ 5 proxy gives (settings.py), and pass
        the server's own commands (transaction checks) to the client while the stream is open."""
        client_id = _client_id(context)
        outbox: asyncio.Queue[Any] = asyncio.Queue(OUTBOX_COMMANDS)
        self.outboxes[client_id] = outbox
        reader = asyncio.create_task(self._read_telemetry(requests, client_id, outbox))
        try:
            while (command := await outbox.get()) is not None:
                yield command
        finally:
            reader.cancel()
            if self.outboxes.get(client_id) is outbox:
                del self.outboxes[client_id]

    async def _read_telemetry(self, requests: AsyncIterator[Any], client_id: str,
                              outbox: asyncio.Queue[Any]) -> None:
        try:
            async for command in requests:
                answer = self._telemetry_answer(command, client_id)
                if answer is not None:
                    await outbox.put(answer)
        finally:
            _offer(outbox, None)  # the client closed its side: end ours

    def _telemetry_answer(self, command: Any, client_id: str) -> Any:
        if command.WhichOneof("command") != "settings":
            return None  # thread stack traces, verify results: nothing asked them
        settings = command.settings
        try:
            if settings.WhichOneof("pub_sub") is None:
                raise GrpcStatusError(pb.Code.BAD_REQUEST, "there is no publishing or subscription data in settings")
            if settings.HasField("subscription"):
                check_group(settings.subscription.group.name)
        except GrpcStatusError as exc:
            return pb.TelemetryCommand(status=status(exc.code, exc.message))
        self.settings[client_id] = settings
        answer = client_settings(settings, self.ctx.store.config.delay_level_millis(),
                                 self.ctx.config.max_reconsume_times + 1, MAX_BODY_BYTES)
        return pb.TelemetryCommand(status=status(pb.Code.OK), settings=answer)

    def _ask_producer(self, half: StoredMessage, transaction_id: str) -> bool:
        """Send a transaction check to one producer of the half message's topic (round robin)."""
        topic = half.properties.get(REAL_TOPIC, "")
        producers = [client for client, settings in self.settings.items()
                     if client in self.outboxes and settings.HasField("publishing")
                     and any(t.name == topic for t in settings.publishing.topics)]
        if not producers:
            return False
        client = producers[next(self._round_robin) % len(producers)]
        message = to_proto_message(half)
        message.topic.name = topic
        message.system_properties.queue_id = int(half.properties.get(REAL_QID, "0"))
        command = pb.TelemetryCommand(status=status(pb.Code.OK))
        command.recover_orphaned_transaction_command.message.CopyFrom(message)
        command.recover_orphaned_transaction_command.transaction_id = transaction_id
        offered = _offer(self.outboxes[client], command)
        log.info("gRPC transaction check of %s (topic %s) %s producer %s", short(transaction_id), short(topic),
                 "sent to" if offered else "dropped, the telemetry stream is full, for", short(client))
        return offered

    # --- producing ----------------------------------------------------------------------------

    async def SendMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            self._refuse_writes()
            if not request.messages:
                raise GrpcStatusError(pb.Code.MESSAGE_CORRUPTED, "no message to send")
            first = request.messages[0]
            config = self._topic(first.topic, PERM_WRITE)
            now = _now_ms()
            levels = self.ctx.store.config.delay_level_millis()
            peer = self.peer(context.peer())
            plans = [to_store_message(m, first.topic.name, peer, now, levels) for m in request.messages]
            if any(p.transactional for p in plans) and len(plans) > 1:
                raise GrpcStatusError(pb.Code.BAD_REQUEST, "a transactional message is sent on its own")
            group = first.system_properties.message_group if len(plans) == 1 else ""
            if group:
                queue_id = zlib.crc32(group.encode()) % config.write_queue_nums
            else:
                queue_id = next(self._round_robin) % config.write_queue_nums
            records = [Message(p.message.topic, p.message.body, queue_id=queue_id, properties=p.message.properties,
                               sys_flag=p.message.sys_flag, born_timestamp=p.message.born_timestamp,
                               born_host=p.message.born_host) for p in plans]
            transaction = ""
            if plans[0].transactional:
                started = await self._start_transaction(records[0])
                results, transaction = [started.result], started.transaction_id
            else:
                results = await self._in_store(self.ctx.store.put_batch, records)
        except GrpcStatusError as exc:
            return pb.SendMessageResponse(status=status(exc.code, exc.message))
        response = pb.SendMessageResponse()
        codes = set()
        for plan, result in zip(plans, results, strict=True):
            code = getattr(pb.Code, PUT_STATUS_CODES.get(result.status, "INTERNAL_SERVER_ERROR"))
            entry = response.entries.add(status=status(code, None if code == pb.Code.OK else
                                                        f"send message failed, status {result.status.value}"))
            if code == pb.Code.OK:
                entry.message_id = plan.message_id
                entry.offset = result.queue_offset
                entry.transaction_id = transaction
            if result.status in (PutStatus.PUT_OK, PutStatus.FLUSH_DISK_TIMEOUT, PutStatus.FLUSH_SLAVE_TIMEOUT,
                                 PutStatus.SLAVE_NOT_AVAILABLE):
                self.ctx.notify_arrival(result.topic, result.queue_id)
            codes.add(code)
        only = codes.pop() if len(codes) == 1 else pb.Code.MULTIPLE_RESULTS
        response.status.CopyFrom(status(only))
        return response

    async def _start_transaction(self, record: Message) -> Any:
        try:
            return await self._in_store(self.ctx.transactions.start, record)
        except TransactionError as exc:
            raise GrpcStatusError(TRANSACTION_CODES.get(exc.kind, pb.Code.INTERNAL_SERVER_ERROR), str(exc)) from exc

    async def _in_store(self, call: Callable[..., Any], *args: Any) -> Any:
        """`call(*args)` as a store write: off the loop when SYNC flushing waits for the disk."""
        try:
            return await store_write(self.ctx.store, call, *args)
        except InvalidMessageError as exc:
            raise GrpcStatusError(pb.Code.MESSAGE_CORRUPTED, str(exc)) from exc
        except StoreError as exc:
            raise GrpcStatusError(pb.Code.INTERNAL_SERVER_ERROR, str(exc)) from exc

    async def EndTransaction(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Commit or roll back a half message (from the producer, or answering a check)."""
        try:
            self._refuse_writes()
            config = self._topic(request.topic, PERM_WRITE)
            if request.resolution not in (pb.TransactionResolution.COMMIT, pb.TransactionResolution.ROLLBACK):
                raise GrpcStatusError(pb.Code.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK")
            commit = request.resolution == pb.TransactionResolution.COMMIT
            try:
                committed = await self._in_store(self.ctx.transactions.end, request.transaction_id, config.name,
                                                 request.message_id or None, commit)
            except TransactionError as exc:
                raise GrpcStatusError(TRANSACTION_CODES.get(exc.kind, pb.Code.INTERNAL_SERVER_ERROR),
                                      str(exc)) from exc
        except GrpcStatusError as exc:
            return pb.EndTransactionResponse(status=status(exc.code, exc.message))
        if committed is not None:
            self.ctx.notify_arrival(committed.topic, committed.queue_id)
        return pb.EndTransactionResponse(status=status(pb.Code.OK))

    # --- consuming ----------------------------------------------------------------------------

    async def ReceiveMessage(self, request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        """Status, then the messages, then the delivery timestamp (as the proxy's stream writer)."""
        try:
            check_group(request.group.name)
            config = self._topic(request.message_queue.topic, PERM_READ)
            if request.filter_expression.type == pb.FilterType.SQL:
                raise GrpcStatusError(pb.Code.UNSUPPORTED, "SQL92 filter expressions are not supported, only TAG")
            tags = tag_filter(request.filter_expression.expression)
            invisible = _millis(request.invisible_duration)
            if request.auto_renew and not request.HasField("invisible_duration"):
                invisible = AUTO_RENEW_INVISIBLE_MS  # a push consumer: it acks or nacks when its listener ends
            if not MIN_INVISIBLE_MS_FOR_RECEIVE <= invisible <= MAX_INVISIBLE_MS:
                raise GrpcStatusError(pb.Code.ILLEGAL_INVISIBLE_TIME,
                                      f"the invisibleTime must be between {MIN_INVISIBLE_MS_FOR_RECEIVE} "
                                      f"and {MAX_INVISIBLE_MS} ms")
            batch = request.batch_size
            if not 1 <= batch <= 1024:
                raise GrpcStatusError(pb.Code.BAD_REQUEST, "batch_size must be between 1 and 1024")
            polling = MAX_POLLING_MS
            if request.HasField("long_polling_timeout"):
                polling = _millis(request.long_polling_timeout)
            polling = min(max(polling, MIN_POLLING_MS), MAX_POLLING_MS)
            remaining = context.time_remaining()
            if remaining is not None:
                polling = min(polling, max(int(remaining * 1000) - 1000, 0))
            deliveries = await self._receive_held(request.group.name, config, tags, batch, invisible, polling)
        except GrpcStatusError as exc:
            yield pb.ReceiveMessageResponse(status=status(exc.code, exc.message))
            yield self._delivery_timestamp()
            return
        if not deliveries:
            yield pb.ReceiveMessageResponse(status=status(pb.Code.MESSAGE_NOT_FOUND, "no new message"))
        else:
            yield pb.ReceiveMessageResponse(status=status(pb.Code.OK))
            for d in deliveries:
                yield pb.ReceiveMessageResponse(message=to_proto_message(
                    d.message, receipt_handle=d.receipt_handle, attempt=d.attempt, invisible_ms=d.invisible_ms))
        yield self._delivery_timestamp()

    @staticmethod
    def _delivery_timestamp() -> Any:
        response = pb.ReceiveMessageResponse()
        response.delivery_timestamp.FromMilliseconds(_now_ms())
        return response

    async def _receive_held(self, group: str, config: TopicConfig, tags: frozenset[str] | None, batch: int,
                            invisible_ms: int, polling_ms: int) -> list[Any]:
        deadline = time.monotonic() + polling_ms / 1000
        start = next(self._round_robin)
        queue_ids = [(start + i) % config.read_queue_nums for i in range(config.read_queue_nums)]
        while True:
            arrival = self._arrival
            found = self.pop.receive(group, config.name, queue_ids, tags, batch, invisible_ms, _now_ms())
            left = deadline - time.monotonic()
            if found:
                await self.saver.persisted()  # in flight on disk before the client sees the messages
                return found
            if left <= 0:
                return found
            try:
                await asyncio.wait_for(arrival.wait(), min(left, RECHECK_S))
            except asyncio.TimeoutError:
                pass

    def _receipt_request(self, request: Any) -> tuple[str, str]:
        check_group(request.group.name)
        self._topic(request.topic, PERM_READ)
        return request.group.name, request.topic.name

    async def AckMessage(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            group, topic = self._receipt_request(request)
        except GrpcStatusError as exc:
            return pb.AckMessageResponse(status=status(exc.code, exc.message))
        response = pb.AckMessageResponse()
        codes = set()
        for item in request.entries:
            try:
                self.pop.ack(group, topic, item.receipt_handle, _now_ms())
                code, message = pb.Code.OK, None
            except GrpcStatusError as exc:
                code, message = exc.code, exc.message
            response.entries.add(message_id=item.message_id, receipt_handle=item.receipt_handle,
                                 status=status(code, message))
            codes.add(code)
        await self.saver.persisted()  # an acknowledged message never comes back, even after a crash
        if not codes:
            response.status.CopyFrom(status(pb.Code.BAD_REQUEST, "no entry to acknowledge"))
        elif len(codes) == 1:
            response.status.CopyFrom(response.entries[0].status)
        else:
            response.status.CopyFrom(status(pb.Code.MULTIPLE_RESULTS))
        return response

    async def ChangeInvisibleDuration(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            group, topic = self._receipt_request(request)
            invisible = _millis(request.invisible_duration)
            if not 0 <= invisible <= MAX_INVISIBLE_MS:
                raise GrpcStatusError(pb.Code.ILLEGAL_INVISIBLE_TIME,
                                      f"the invisibleTime must be between 0 and {MAX_INVISIBLE_MS} ms")
            handle = self.pop.change_invisible(group, topic, request.receipt_handle, invisible, _now_ms())
            await self.saver.persisted()
        except GrpcStatusError as exc:
            return pb.ChangeInvisibleDurationResponse(status=status(exc.code, exc.message))
        return pb.ChangeInvisibleDurationResponse(status=status(pb.Code.OK), receipt_handle=handle)

    async def ForwardMessageToDeadLetterQueue(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            group, topic = self._receipt_request(request)
            self.pop.forward_to_dlq(group, topic, request.receipt_handle, _now_ms())
            await self.saver.persisted()
        except GrpcStatusError as exc:
            return pb.ForwardMessageToDeadLetterQueueResponse(status=status(exc.code, exc.message))
        return pb.ForwardMessageToDeadLetterQueueResponse(status=status(pb.Code.OK))


def _offer(outbox: asyncio.Queue[Any], command: Any) -> bool:
    """Queue a command for a telemetry stream unless it is full (the command is then dropped)."""
    try:
        outbox.put_nowait(command)
        return True
    except asyncio.QueueFull:
        return False


def _not_served(name: str, response_type: Any, streaming: bool) -> Callable[..., Any]:
    message = f"{name} is not supported by this endpoint yet"

    if streaming:
        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            yield response_type(status=status(pb.Code.NOT_IMPLEMENTED, message))
        return stream

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        return response_type(status=status(pb.Code.NOT_IMPLEMENTED, message))
    return unary


def _guarded(name: str, impl: Callable[..., Any], response_type: Any) -> Callable[..., Any]:
    """A handler failure is answered with INTERNAL_SERVER_ERROR and logged; it never ends the process."""

    async def guarded(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            return await impl(request, context)
        except Exception as exc:  # service boundary: record and answer
            log.exception("gRPC %s failed", name)
            return response_type(status=status(pb.Code.INTERNAL_SERVER_ERROR, f"{name} failed: {exc}"))
    return guarded


def _authenticated(auth: GrpcAuthenticator, name: str, impl: Callable[..., Any], response_type: Any,
                   streaming_in: bool, streaming_out: bool) -> Callable[..., Any]:
    """`impl` behind the credentials check: a refused call is answered with UNAUTHORIZED or FORBIDDEN
    (a stream's first and only response) and never reaches the store."""

    def refusal(request: Any, context: grpc.aio.ServicerContext) -> Any:
        refused = auth.check(name, context.invocation_metadata() or (), None if streaming_in else request)
        if refused is None:
            return None
        code, reason = refused  # logged by logs.logged, as every refusal
        return response_type(status=status(getattr(pb.Code, code), reason))

    if streaming_out:
        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            refused = refusal(request, context)
            if refused is not None:
                yield refused
                return
            async for response in impl(request, context):
                yield response
        return stream

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        refused = refusal(request, context)
        return refused if refused is not None else await impl(request, context)
    return unary


def _handler(service: MessagingService, method: Any, auth: GrpcAuthenticator | None = None) -> grpc.RpcMethodHandler:
    request_type = getattr(pb, method.input_type.name)
    response_type = getattr(pb, method.output_type.name)
    name = method.name
    streaming_out = method.server_streaming if hasattr(method, "server_streaming") else \
        method.output_type.name in ("ReceiveMessageResponse", "PullMessageResponse", "TelemetryCommand")
    streaming_in = method.client_streaming if hasattr(method, "client_streaming") else name == "Telemetry"
    impl = getattr(service, name, None) if name not in NOT_SERVED else None
    if impl is None:
        impl = _not_served(name, response_type, streaming_out)
    if not streaming_in and not streaming_out:
        impl = _guarded(name, impl, response_type)
    if auth is not None:
        impl = _authenticated(auth, name, impl, response_type, streaming_in, streaming_out)
    impl = logged(name, impl, streaming_in, streaming_out, lambda grpc_peer: service.peer(grpc_peer))
    kwargs = {"request_deserializer": request_type.FromString,
              "response_serializer": response_type.SerializeToString}
    if streaming_in:
        return grpc.stream_stream_rpc_method_handler(impl, **kwargs)
    if streaming_out:
        return grpc.unary_stream_rpc_method_handler(impl, **kwargs)
    return grpc.unary_unary_rpc_method_handler(impl, **kwargs)


class GrpcEndpoint:
    """The gRPC server beside the remoting one: plaintext and TLS on the one port (grpc/tls.py).

    Args:
        ctx: the broker's shared state.
        address: ``host:port`` to listen on.
        max_message_bytes: largest request accepted by gRPC itself.
        acl: the accounts of `--acl`: every call must then be signed (grpc/auth.py).
        tls_files: the certificate chain and key files (PEM) TLS clients get; None: `TLS_FILES`, and when
            that is None too a self-signed certificate made at start.
    """

    TLS_FILES: ClassVar[tuple[Path, Path] | None] = None  # `serve --grpc-tls-cert/--grpc-tls-key`

    def __init__(self, ctx: BrokerContext, address: str, max_message_bytes: int,
                 acl: AclConfig | None = None, tls_files: tuple[Path, Path] | None = None) -> None:
        self.ctx = ctx
        self.address = address
        self.max_message_bytes = max_message_bytes
        self.acl = acl
        self.tls_files = tls_files if tls_files is not None else self.TLS_FILES
        self.server: grpc.aio.Server | None = None
        self.service: MessagingService | None = None
        self.front: TlsFront | None = None
        self.certificate = b""  # PEM of the certificate TLS clients get
        self.port = 0

    async def start(self) -> None:
        """Listen.

        Raises:
            OSError: the address cannot be bound.
            ValueError: the certificate or key files cannot be used.
        """
        host, _, port = self.address.rpartition(":")
        cert, key = load_pair(*self.tls_files) if self.tls_files is not None else self_signed(host)
        advertised_host = host if host not in ("", "0.0.0.0", "[::]") else "127.0.0.1"
        self.service = MessagingService(self.ctx, f"{advertised_host}:{port}")
        limits = self.ctx.config.limits  # the remoting server's bounds, applied the gRPC way
        server = grpc.aio.server(
            maximum_concurrent_rpcs=limits.max_connections * 4,  # RESOURCE_EXHAUSTED past it
            options=[("grpc.max_receive_message_length", self.max_message_bytes),
                     ("grpc.max_concurrent_streams", limits.max_in_flight),
                     ("grpc.max_connection_idle_ms", int(limits.idle_timeout_s * 1000)),
                     ("grpc.so_reuseport", 0)])
        descriptor = pb.service
        auth = GrpcAuthenticator(self.acl, time.time) if self.acl is not None else None
        handlers = {m.name: _handler(self.service, m, auth) for m in descriptor.methods}
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        try:  # the two loopback ports the front relays to
            plain_port = server.add_insecure_port("127.0.0.1:0")
            tls_port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key, cert)]))
        except RuntimeError as exc:
            raise OSError(f"cannot listen for gRPC on loopback ports: {exc}") from exc
        if not plain_port or not tls_port:
            raise OSError("cannot listen for gRPC on loopback ports")
        await server.start()
        front = TlsFront(host, int(port), plain_port, tls_port, limits.max_connections)
        try:
            await front.start()
        except OSError as exc:
            await server.stop(None)
            raise OSError(f"cannot listen for gRPC on {self.address}: {exc}") from exc
        self.service.peer = front.peer
        self.port = front.port
        if self.service.advertised.endswith(":0"):
            self.service.advertised = f"{advertised_host}:{self.port}"
        self.server, self.front, self.certificate = server, front, cert
        log.info("gRPC endpoint (RocketMQ 5 clients) on %s, plaintext and TLS; TLS certificate %s, SHA-256 %s",
                 self.address, f"of {self.tls_files[0]}" if self.tls_files else "self-signed, made at start",
                 fingerprint(cert))

    async def close(self) -> None:
        """Stop listening; held receives are ended (their clients retry)."""
        if self.front is not None:
            self.front.stop_listening()
        if self.server is not None:
            await self.server.stop(grace=1.0)
            self.server = None
        if self.front is not None:
            await self.front.close()
            self.front = None
        if self.service is not None:
            self.service.close()
            if not self.ctx.read_only:
                self.service.state.save()
            self.service = None
