"""asyncio TCP transport for remoting commands: the only module of rocketstore that opens sockets.

One `RemotingServer` listens on one address and hands every decoded request to a `Dispatcher`,
writing back whatever response the handler returns. Each connection is an `asyncio.Protocol`: bytes are
decoded as they arrive and each request's handler is started at once, in the callback (`start_eagerly`):
a handler that answers without waiting (a send under ASYNC flush, most admin requests) has its answer
written before the next request is decoded, with no task, no timer and no extra turn of the event loop;
one that waits (a held pull, a SYNC-flush put) goes on in a task of its own from where it stopped. A
connection that sends bytes which cannot be framed or decoded is closed; the error is logged and
nothing reaches the handlers.

What a client can make the server hold is bounded (`ConnectionLimits`): the connections, the requests
of one connection in flight, the answers a client has not read (its requests are not read meanwhile),
the bytes of unfinished frames across all connections, and the time a connection may stay idle or
take to finish a frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import Any

from rocketstore.errors import ProtocolError
from rocketstore.protocol import NEED_DATA, CommandReader, RemotingCommand, ResponseCode, encode_command
from rocketstore.protocol.codes import FLAG_ONEWAY

log = logging.getLogger("rocketstore.broker")

HELD_ANSWER_BYTES = 64 * 1024
"""Answers to requests that arrived together are written together up to this many bytes (one send and
one wake-up of the client for all of them)."""


@dataclass(frozen=True)
class ConnectionLimits:
    """What one server holds for its clients at most.

    Attributes:
        max_connections: open connections; one more is closed at once (logged).
        max_in_flight: requests of one connection being handled, held (long polling) or waiting for
            their answer to be read; further requests are not read until one finishes.
        max_unsent_bytes: answers queued for a client that does not read them; past this the
            server stops reading that client's requests.
        max_buffered_bytes: bytes of unfinished frames across all connections; the connection whose
            bytes pass it is closed.
        idle_timeout_s: a connection with nothing to read and nothing to answer for this long is closed
            (RocketMQ closes idle channels after 120 s; clients heartbeat every 30 s).
        frame_timeout_s: a frame started and not finished within this, or answers not read within
            `idle_timeout_s`, close the connection.
    """

    max_connections: int = 1024
    max_in_flight: int = 256
    max_unsent_bytes: int = 8 * 1024 * 1024
    max_buffered_bytes: int = 256 * 1024 * 1024
    idle_timeout_s: float = 120.0
    frame_timeout_s: float = 30.0


class Connection:
    """One accepted client connection.

    Attributes:
        peer: ``ip:port`` of the client.
        local: ``ip:port`` we accepted on.
    """

    def __init__(self, transport: asyncio.WriteTransport, max_unsent_bytes: int = 64 * 1024) -> None:
        self._transport = transport
        transport.set_write_buffer_limits(high=max_unsent_bytes)
        peer = transport.get_extra_info("peername") or ("?", 0)
        local = transport.get_extra_info("sockname") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.local = f"{local[0]}:{local[1]}"
        self.closed = False
        self._opaque = itertools.count(1_000_000)
        self._writable: asyncio.Future[None] | None = None  # while the client does not read its answers
        self._held: list[bytes] | None = None  # answers kept to be written together (`_hold`)
        self._held_bytes = 0

    def send(self, cmd: RemotingCommand) -> None:
        """Queue `cmd` for writing; silently dropped once the connection is closed."""
        if self.closed or self._transport.is_closing():
            return
        data = encode_command(cmd)
        if self._held is None:
            self._transport.write(data)
            return
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes >= HELD_ANSWER_BYTES:
            self._write_held()

    def _hold(self) -> None:
        """Keep what is sent from now until `_release` to write it in one piece."""
        self._held, self._held_bytes = [], 0

    def _write_held(self) -> None:
        held = self._held
        if held:
            self._held, self._held_bytes = [], 0
            if not self.closed and not self._transport.is_closing():
                self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def _release(self) -> None:
        self._write_held()
        self._held = None

    def send_oneway(self, code: int, ext_fields: dict[str, str], body: bytes = b"") -> None:
        """Send a server-initiated oneway request (e.g. NOTIFY_CONSUMER_IDS_CHANGED)."""
        self.send(RemotingCommand(code=code, opaque=next(self._opaque), flag=FLAG_ONEWAY,
                                  ext_fields=ext_fields, body=body))

    async def drain(self) -> None:
        """Wait until the socket buffer has room again (back-pressure towards slow readers)."""
        if self._writable is not None and not self.closed:
            await asyncio.shield(self._writable)

    def close(self) -> None:
        """Close the connection (answers already given are still written)."""
        if not self.closed:
            self._write_held()
        self.closed = True
        self._transport.close()
        self._wake_writers()

    def _pause_writing(self) -> None:
        if self._writable is None:
            self._writable = asyncio.get_running_loop().create_future()

    def _wake_writers(self) -> None:
        if self._writable is not None:
            if not self._writable.done():
                self._writable.set_result(None)
            self._writable = None


Handler = Callable[[RemotingCommand, Connection], Awaitable[RemotingCommand | None]]


class Dispatcher:
    """Request code -> handler table, with a hook for connection close.

    Args:
        handlers: the table; codes missing from it get REQUEST_CODE_NOT_SUPPORTED.
        on_close: called with each connection that goes away.
        before: called before a handler; returning a response short-cuts the handler (ACL).
    """

    def __init__(self, handlers: dict[int, Handler],
                 on_close: Callable[[Connection], None] | None = None,
                 before: Callable[[RemotingCommand, Connection], RemotingCommand | None] | None = None) -> None:
        self.handlers = handlers
        self.on_close = on_close
        self.before = before

    async def dispatch(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """The response to `cmd` (None for no response)."""
        log.debug("request code=%d opaque=%d from %s %s", cmd.code, cmd.opaque, conn.peer, cmd.ext_fields)
        handler = self.handlers.get(cmd.code)
        if handler is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                f"request code {cmd.code} is not supported")
        if self.before is not None:
            refused = self.before(cmd, conn)
            if refused is not None:
                return refused
        try:
            return await handler(cmd, conn)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a handler bug must not take the connection or the server down
            log.exception("request code %d from %s failed", cmd.code, conn.peer)
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


class _Resume:
    """The rest of a coroutine that `start_eagerly` ran up to its first wait, as an awaitable: what the
    coroutine waits on goes up to the task awaiting this, what the task sends or throws comes back down."""

    __slots__ = ("_coro", "_waiting_on")

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting_on: object) -> None:
        self._coro = coro
        self._waiting_on = waiting_on

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, waiting_on = self._coro, self._waiting_on
        while True:
            try:
                sent = yield waiting_on
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # the task's cancellation or a future's error: the coroutine's to handle
                try:
                    waiting_on = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
            else:
                try:
                    waiting_on = coro.send(sent)
                except StopIteration as stop:
                    return stop.value


def start_eagerly(coro: Coroutine[Any, Any, Any]) -> tuple[bool, Any]:
    """Run `coro` until it finishes or first waits (what Python 3.12's eager tasks do).

    Returns:
        (True, its result) when it finished; (False, an awaitable of the rest, for a task) when it waits.

    Raises:
        Exception: whatever `coro` raised before it first waited.
    """
    try:
        waiting_on = coro.send(None)
    except StopIteration as stop:
        return True, stop.value
    return False, _Resume(coro, waiting_on)


class RemotingServer:
    """Listens on `host:port` and serves remoting commands through `dispatcher`.

    Args:
        host: address to bind.
        port: port to bind (0 picks a free one; see `port` after `start`).
        dispatcher: request handlers.
        max_frame_size: largest accepted frame; larger ones close the connection.
        limits: what the clients can make the server hold.
    """

    def __init__(self, host: str, port: int, dispatcher: Dispatcher, max_frame_size: int,
                 limits: ConnectionLimits | None = None) -> None:
        self.host, self.port = host, port
        self.dispatcher = dispatcher
        self.max_frame_size = max_frame_size
        self.limits = limits or ConnectionLimits()
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._conns: set[Connection] = set()
        self.buffered = 0  # bytes of unfinished frames, all connections

    async def start(self) -> None:
        """Bind and start accepting.

        Raises:
            OSError: the address cannot be bound.
        """
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _RemotingProtocol(self), self.host, self.port,
                                                reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop accepting, close every connection, cancel requests in flight."""
        if self._server is not None:
            self._server.close()
        for conn in list(self._conns):
            conn.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)

    def _track(self, task: asyncio.Task[None]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


class _RemotingProtocol(asyncio.Protocol):
    """One connection of a `RemotingServer`: decodes requests as bytes arrive, starts their handlers,
    writes their answers, and holds the connection to `ConnectionLimits`.

    Reading stops while the connection has `max_in_flight` requests unanswered or more than
    `max_unsent_bytes` of answers unread (their requests stay undecoded in the buffer meanwhile). One
    timer per connection watches the timeouts: no bytes for `idle_timeout_s` (or `frame_timeout_s` inside
    a frame), answers unread for `idle_timeout_s`.
    """

    loop: asyncio.AbstractEventLoop
    transport: asyncio.Transport

    def __init__(self, server: RemotingServer) -> None:
        self.server = server
        self.limits = server.limits
        self.conn: Connection | None = None
        self.commands = CommandReader(server.max_frame_size)
        self.in_flight = 0
        self.held = 0  # this connection's share of server.buffered
        self.reading = True
        self.write_paused_at: float | None = None
        self.last_data = 0.0
        self.timer: asyncio.TimerHandle | None = None
        self.timer_at = 0.0

    # -- asyncio callbacks --------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        server, limits = self.server, self.limits
        if len(server._conns) >= limits.max_connections:
            log.warning("refusing a connection from %s: %d connections open (--max-connections)",
                        transport.get_extra_info("peername"), len(server._conns))
            transport.close()
            return
        self.loop = asyncio.get_running_loop()
        self.transport = transport
        self.conn = Connection(transport, limits.max_unsent_bytes)
        server._conns.add(self.conn)
        self.last_data = self.loop.time()
        self._arm(self.last_data + limits.idle_timeout_s)

    def data_received(self, data: bytes) -> None:
        conn = self.conn
        if conn is None or conn.closed:
            return
        self.last_data = self.loop.time()
        commands = self.commands
        commands.feed(data)
        self._take_requests()
        if conn.closed:
            return
        server = self.server
        server.buffered += commands.buffered - self.held
        self.held = commands.buffered
        if server.buffered > self.limits.max_buffered_bytes:
            log.warning("closing %s: %d bytes of unfinished requests buffered across connections "
                        "(--max-buffered-bytes)", conn.peer, server.buffered)
            conn.close()
        elif self.held:
            self._arm(self.last_data + self.limits.frame_timeout_s)

    def eof_received(self) -> bool:
        return False  # close

    def pause_writing(self) -> None:
        if self.conn is not None:
            self.write_paused_at = self.loop.time()
            self.conn._pause_writing()
            self._pause_reading()
            self._arm(self.write_paused_at + self.limits.idle_timeout_s)

    def resume_writing(self) -> None:
        if self.conn is not None:
            self.write_paused_at = None
            self.conn._wake_writers()
            self._take_requests()

    def connection_lost(self, exc: Exception | None) -> None:
        conn = self.conn
        if conn is None:
            return
        self.server.buffered -= self.held
        self.held = 0
        if self.timer is not None:
            self.timer.cancel()
        conn.close()
        self.server._conns.discard(conn)
        if self.server.dispatcher.on_close is not None:
            self.server.dispatcher.on_close(conn)

    # -- requests -----------------------------------------------------------------------------------

    def _take_requests(self) -> None:
        """Decode and start buffered requests while the limits allow; reading resumes when they do."""
        conn = self.conn
        assert conn is not None
        commands, max_in_flight = self.commands, self.limits.max_in_flight
        holding = conn._held is None
        if holding:
            conn._hold()  # the answers of requests that came together leave together
        try:
            while self.in_flight < max_in_flight and self.write_paused_at is None and not conn.closed:
                cmd = commands.next_command()
                if cmd is NEED_DATA:
                    break
                assert isinstance(cmd, RemotingCommand)
                if not cmd.is_response:
                    self._start(cmd, conn)
        except ProtocolError as exc:
            log.warning("closing %s: %s", conn.peer, exc)
            conn.close()
            return
        except Exception:  # connection loop: a decoder bug closes this connection, never the server
            log.exception("closing %s after an unexpected error", conn.peer)
            conn.close()
            return
        finally:
            if holding:
                conn._release()
        if conn.closed:
            return
        if self.in_flight < max_in_flight and self.write_paused_at is None:
            if not self.reading:
                self.reading = True
                self.transport.resume_reading()
        else:
            self._pause_reading()

    def _start(self, cmd: RemotingCommand, conn: Connection) -> None:
        self.in_flight += 1
        try:
            done, result = start_eagerly(self.server.dispatcher.dispatch(cmd, conn))
        except Exception:  # the dispatcher answers a handler's error itself; anything else is a bug
            log.exception("request code %d from %s failed", cmd.code, conn.peer)
            done, result = True, None
        if done:
            self._answer(cmd, conn, result)
        else:
            self.server._track(self.loop.create_task(self._finish(cmd, conn, result)))

    async def _finish(self, cmd: RemotingCommand, conn: Connection, rest: Awaitable[RemotingCommand | None]
                      ) -> None:
        response = None
        try:
            response = await rest
        finally:
            self._answer(cmd, conn, response)

    def _answer(self, cmd: RemotingCommand, conn: Connection, response: RemotingCommand | None) -> None:
        if response is not None and not cmd.is_oneway:
            conn.send(response)
        self.in_flight -= 1
        if not self.reading and not conn.closed:  # not from inside _take_requests: on the next turn
            self.loop.call_soon(self._resume_requests)

    def _resume_requests(self) -> None:
        if self.conn is not None and not self.conn.closed and self.write_paused_at is None:
            self._take_requests()

    def _pause_reading(self) -> None:
        if self.reading and self.conn is not None and not self.conn.closed:
            self.reading = False
            self.transport.pause_reading()

    # -- timeouts -----------------------------------------------------------------------------------

    def _arm(self, when: float) -> None:
        """Check the timeouts at `when` at the latest."""
        if self.timer is not None:
            if self.timer_at <= when:
                return
            self.timer.cancel()
        self.timer_at = when
        self.timer = self.loop.call_at(when, self._check_timeouts)

    def _check_timeouts(self) -> None:
        self.timer = None
        conn = self.conn
        if conn is None or conn.closed:
            return
        limits, now = self.limits, self.loop.time()
        if self.write_paused_at is not None:
            due, reason = self.write_paused_at + limits.idle_timeout_s, "its answers were not read for"
            timeout = limits.idle_timeout_s
        elif self.commands.buffered and self.reading:
            due, reason, timeout = self.last_data + limits.frame_timeout_s, "a request left unfinished for", \
                limits.frame_timeout_s
        elif not self.reading:  # requests in flight at the limit: no bytes are read, nothing is late
            due, reason, timeout = now + limits.idle_timeout_s, "", 0.0
        else:
            due, reason, timeout = self.last_data + limits.idle_timeout_s, "idle for", limits.idle_timeout_s
        if due > now:
            self._arm(due)
            return
        log.info("closing %s: %s %.0f s", conn.peer, reason, timeout)
        conn.close()
