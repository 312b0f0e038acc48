"""asyncio TCP transport for remoting commands: the only module of rocketstore that opens sockets.

One `RemotingServer` listens on one address and hands every decoded request to a `Dispatcher`
in a task of its own (pull requests may be held for seconds), writing back whatever response the
handler returns. A connection that sends bytes which cannot be framed or decoded is closed; the
error is logged and nothing reaches the handlers.

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
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from rocketstore.errors import ProtocolError
from rocketstore.protocol import NEED_DATA, CommandReader, RemotingCommand, ResponseCode, encode_command
from rocketstore.protocol.codes import FLAG_ONEWAY

log = logging.getLogger("rocketstore.broker")

READ_CHUNK = 256 * 1024


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

    def __init__(self, writer: asyncio.StreamWriter, max_unsent_bytes: int = 64 * 1024) -> None:
        self._writer = writer
        writer.transport.set_write_buffer_limits(high=max_unsent_bytes)
        peer = writer.get_extra_info("peername") or ("?", 0)
        local = writer.get_extra_info("sockname") or ("?", 0)
        self.peer = f"{peer[0]}:{peer[1]}"
        self.local = f"{local[0]}:{local[1]}"
        self.closed = False
        self._opaque = itertools.count(1_000_000)

    def send(self, cmd: RemotingCommand) -> None:
        """Queue `cmd` for writing; silently dropped once the connection is closed."""
        if self.closed or self._writer.is_closing():
            return
        self._writer.write(encode_command(cmd))

    def send_oneway(self, code: int, ext_fields: dict[str, str], body: bytes = b"") -> None:
        """Send a server-initiated oneway request (e.g. NOTIFY_CONSUMER_IDS_CHANGED)."""
        self.send(RemotingCommand(code=code, opaque=next(self._opaque), flag=FLAG_ONEWAY,
                                  ext_fields=ext_fields, body=body))

    async def drain(self) -> None:
        """Wait until the socket buffer has room again (back-pressure towards slow readers)."""
        if not self.closed:
            with contextlib.suppress(ConnectionError):
                await self._writer.drain()

    def close(self) -> None:
        """Close the connection."""
        self.closed = True
        self._writer.close()


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
        self._buffered = 0  # bytes of unfinished frames, all connections

    async def start(self) -> None:
        """Bind and start accepting.

        Raises:
            OSError: the address cannot be bound.
        """
        self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True)
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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        limits = self.limits
        if len(self._conns) >= limits.max_connections:
            log.warning("refusing a connection from %s: %d connections open (--max-connections)",
                        writer.get_extra_info("peername"), len(self._conns))
            writer.close()
            return
        conn = Connection(writer, limits.max_unsent_bytes)
        self._conns.add(conn)
        commands = CommandReader(self.max_frame_size)
        in_flight = asyncio.Semaphore(limits.max_in_flight)
        held = 0  # this connection's share of self._buffered
        try:
            while not conn.closed:
                data = await self._read(reader, commands.buffered > 0, conn)
                if not data:
                    break
                commands.feed(data)
                while (cmd := commands.next_command()) is not NEED_DATA:
                    assert isinstance(cmd, RemotingCommand)
                    if not cmd.is_response:
                        await in_flight.acquire()
                        self._spawn(cmd, conn, in_flight)
                        await asyncio.sleep(0)  # a quick answer is in the write buffer now
                        if not await self._drained(conn):
                            return
                self._buffered += commands.buffered - held
                held = commands.buffered
                if self._buffered > limits.max_buffered_bytes:
                    log.warning("closing %s: %d bytes of unfinished requests buffered across connections "
                                "(--max-buffered-bytes)", conn.peer, self._buffered)
                    break
        except ProtocolError as exc:
            log.warning("closing %s: %s", conn.peer, exc)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception:  # connection loop: a decoder bug closes this connection, never the server
            log.exception("closing %s after an unexpected error", conn.peer)
        finally:
            self._buffered -= held
            conn.close()
            self._conns.discard(conn)
            if self.dispatcher.on_close is not None:
                self.dispatcher.on_close(conn)

    async def _read(self, reader: asyncio.StreamReader, mid_frame: bool, conn: Connection) -> bytes:
        """The next bytes, b"" when the connection ended or timed out (logged)."""
        timeout = self.limits.frame_timeout_s if mid_frame else self.limits.idle_timeout_s
        try:
            return await asyncio.wait_for(reader.read(READ_CHUNK), timeout)
        except asyncio.TimeoutError:
            what = "a request left unfinished" if mid_frame else "idle"
            log.info("closing %s: %s for %.0f s", conn.peer, what, timeout)
            return b""

    async def _drained(self, conn: Connection) -> bool:
        """Wait while the client has more unsent answers than allowed; False when it does not read
        them within the idle timeout (the connection is closed)."""
        try:
            await asyncio.wait_for(conn.drain(), self.limits.idle_timeout_s)
        except asyncio.TimeoutError:
            log.info("closing %s: its answers were not read for %.0f s", conn.peer, self.limits.idle_timeout_s)
            conn.close()
            return False
        return True

    def _spawn(self, cmd: RemotingCommand, conn: Connection, slot: asyncio.Semaphore) -> None:
        task = asyncio.create_task(self._handle(cmd, conn, slot))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle(self, cmd: RemotingCommand, conn: Connection, slot: asyncio.Semaphore) -> None:
        try:
            response = await self.dispatcher.dispatch(cmd, conn)
            if response is not None and not cmd.is_oneway:
                conn.send(response)
                await conn.drain()
        finally:
            slot.release()
