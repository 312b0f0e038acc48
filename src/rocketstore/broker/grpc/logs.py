"""What the gRPC endpoint logs about its calls, in one wrapper around every handler (`logged`).

Logger ``rocketstore.broker.grpc``:

* DEBUG: every call when it ends: method, client id, peer, the topic and group it names, the status code
  answered (a stream: the first status, how many messages it carried), milliseconds taken.
* INFO: every call answered with a status other than OK (a refusal), with its code and message; an
  empty long poll (ReceiveMessage with MESSAGE_NOT_FOUND) is routine and stays at DEBUG. Telemetry
  streams log each non-OK command they answer with.
* Names and messages are cut to `NAME_CHARS` / `MESSAGE_CHARS` characters, control characters escaped:
  a line stays short whatever a client sends. Nothing is logged per message at INFO.

DLQ moves and transaction checks are logged at INFO where they happen (pop.py, service.py).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from rocketstore.broker.grpc.protos import pb

log = logging.getLogger("rocketstore.broker.grpc")

CLIENT_ID_HEADER = "x-mq-client-id"
NAME_CHARS = 64  # topic, group, client id and peer in a log line
MESSAGE_CHARS = 100  # a status message in a log line
ROUTINE = {("ReceiveMessage", pb.Code.MESSAGE_NOT_FOUND)}  # not a refusal: a long poll that found nothing


def short(text: str, limit: int = NAME_CHARS) -> str:
    """`text` with control characters escaped, cut to `limit` characters (an ellipsis says so)."""
    if any(ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 for ch in text[:limit + 1]):
        text = text.encode("unicode_escape").decode("ascii")
    return text if len(text) <= limit else text[:limit - 1] + "…"


def client_of(context: grpc.aio.ServicerContext) -> str:
    for key, value in context.invocation_metadata() or ():
        if key == CLIENT_ID_HEADER:
            return str(value)
    return ""


def names(request: Any) -> str:
    """`topic=... group=...` for the fields of `request` that name them ('' for a stream's requests)."""
    if request is None:
        return ""
    fields = request.DESCRIPTOR.fields_by_name
    topic = group = ""
    if "topic" in fields:
        topic = request.topic.name
    elif "message_queue" in fields:
        topic = request.message_queue.topic.name
    elif "messages" in fields and request.messages:
        topic = request.messages[0].topic.name
    if "group" in fields:
        group = request.group.name
    parts = [f"topic={short(topic)}"] if topic else []
    if group:
        parts.append(f"group={short(group)}")
    return " ".join(parts)


class _Call:
    """One call's description, built once it ends."""

    def __init__(self, name: str, request: Any, context: grpc.aio.ServicerContext,
                 peer: Callable[[str], str]) -> None:
        self.name = name
        self.peer = peer
        self.request = request
        self.context = context
        self.started = time.monotonic()

    def who(self) -> str:
        text = f"client={short(client_of(self.context)) or '-'} peer={short(self.peer(self.context.peer() or '-'))}"
        named = names(self.request)
        return f"{text} {named}" if named else text

    def ended(self, status: Any, extra: str = "") -> None:
        code = status.code if status is not None else pb.Code.OK
        refused = code != pb.Code.OK and (self.name, code) not in ROUTINE
        if refused and log.isEnabledFor(logging.INFO):
            log.info("gRPC %s refused %s: %s (%s)", self.name, pb.Code.name(code),
                     short(status.message, MESSAGE_CHARS), self.who())
        elif log.isEnabledFor(logging.DEBUG):
            log.debug("gRPC %s %s -> %s%s %.1f ms", self.name, self.who(), pb.Code.name(code), extra,
                      (time.monotonic() - self.started) * 1000)

    def failed(self, exc: BaseException) -> None:
        log.info("gRPC %s ended by %s: %s (%s)", self.name, type(exc).__name__, short(str(exc), MESSAGE_CHARS),
                 self.who())


def logged(name: str, impl: Callable[..., Any], streaming_in: bool, streaming_out: bool,
           peer: Callable[[str], str] = str) -> Callable[..., Any]:
    """`impl` with its call logged (see the module's docstring); what it answers is unchanged. `peer` gives
    the client's address for the peer gRPC reports (the TLS front relays every connection)."""
    if streaming_in:
        async def bidi(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            call = _Call(name, None, context, peer)
            commands = 0
            try:
                async for command in impl(requests, context):
                    commands += 1
                    if command.HasField("status") and command.status.code != pb.Code.OK:
                        call.ended(command.status, f" (command {commands})")
                    yield command
            except Exception as exc:
                call.failed(exc)
                raise
            finally:
                if log.isEnabledFor(logging.DEBUG):
                    log.debug("gRPC %s stream of %s ended after %d commands, %.1f s", name, call.who(), commands,
                              time.monotonic() - call.started)
        return bidi

    if streaming_out:
        async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            call = _Call(name, request, context, peer)
            status = None
            messages = 0
            try:
                async for response in impl(request, context):
                    which = response.WhichOneof("content")
                    if which == "status" and status is None:
                        status = response.status
                    elif which == "message":
                        messages += 1
                    yield response
            except Exception as exc:
                call.failed(exc)
                raise
            call.ended(status, f" messages={messages}" if messages else "")
        return stream

    async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
        call = _Call(name, request, context, peer)
        try:
            response = await impl(request, context)
        except Exception as exc:
            call.failed(exc)
            raise
        call.ended(response.status if response.HasField("status") else None)
        return response
    return unary
