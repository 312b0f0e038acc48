"""A small blocking remoting client: enough to query a broker by key (QUERY_MESSAGE, 12) and by
message id (VIEW_MESSAGE_BY_ID, 33), look routes up, and send raw commands in tests and tools.

Usage::

    with RemotingClient("127.0.0.1:10911") as client:
        messages = client.query_message("TopicA", "order-1")
        message = client.view_message("7F00000100002A9F0000000000000000")
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Mapping
from types import TracebackType

from rocketstore.errors import RemoteProtocolError
from rocketstore.format.layout import JAVA_LONG_MAX
from rocketstore.format.message import StoredMessage, decode_message
from rocketstore.format.msgid import decode_msg_id
from rocketstore.protocol import NEED_DATA, CommandReader, RemotingCommand, RequestCode, ResponseCode, encode_command
from rocketstore.protocol.acl import signed_fields
from rocketstore.protocol.address import split_address


class RequestFailedError(RemoteProtocolError):
    """The broker answered with a code other than SUCCESS."""


def decode_records(body: bytes) -> list[StoredMessage]:
    """Messages of a PULL_MESSAGE / QUERY_MESSAGE body (whole commitlog records back to back).

    Raises:
        CorruptRecordError: a record that cannot be decoded.
        RemoteProtocolError: the body ends inside a record.
    """
    messages = []
    pos = 0
    while pos < len(body):
        result = decode_message(body, pos)
        if not isinstance(result, StoredMessage):
            raise RemoteProtocolError(f"message body ends inside a record at byte {pos}")
        messages.append(result)
        pos += result.size
    return messages


class RemotingClient:
    """One blocking connection to a broker or name server.

    Args:
        address: ``host:port``.
        timeout_s: socket timeout for connect and every response.
        credentials: (access key, secret key) to sign requests with, for brokers run with ``--acl``.
    """

    def __init__(self, address: str, timeout_s: float = 5.0, credentials: tuple[str, str] | None = None) -> None:
        self.address = address
        self.timeout_s = timeout_s
        self.credentials = credentials
        self._sock = socket.create_connection(split_address(address), timeout=timeout_s)
        self._reader = CommandReader()
        self._opaque = itertools.count(1)

    def close(self) -> None:
        """Close the connection."""
        self._sock.close()

    def __enter__(self) -> RemotingClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def request(self, code: int, ext_fields: Mapping[str, object] | None = None, body: bytes = b"") -> RemotingCommand:
        """Send a request and wait for its response (any code).

        Raises:
            OSError: the connection failed or timed out.
            RemoteProtocolError: the peer closed the connection or sent undecodable bytes.
        """
        fields = {k: str(v) for k, v in (ext_fields or {}).items()}
        if self.credentials is not None:
            fields = signed_fields(self.credentials[0], self.credentials[1], fields, body)
        cmd = RemotingCommand(code=code, opaque=next(self._opaque), language="PYTHON", ext_fields=fields,
                              body=body)
        self._sock.sendall(encode_command(cmd))
        while True:
            response = self._reader.next_command()
            if response is not NEED_DATA:
                assert isinstance(response, RemotingCommand)
                if response.is_response and response.opaque == cmd.opaque:
                    return response
                continue
            data = self._sock.recv(65536)
            if not data:
                raise RemoteProtocolError(f"{self.address} closed the connection")
            self._reader.feed(data)

    def _ok(self, response: RemotingCommand, allowed: tuple[int, ...] = ()) -> RemotingCommand:
        if response.code != ResponseCode.SUCCESS and response.code not in allowed:
            raise RequestFailedError(f"request failed with code {response.code}: {response.remark}",
                                     response.code)
        return response

    def query_message(self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0,
                      end_ms: int = JAVA_LONG_MAX) -> list[StoredMessage]:
        """Messages of `topic` whose KEYS (or UNIQ_KEY) contain `key`; [] when none.

        Raises:
            RequestFailedError: the broker refused the query.
            OSError, RemoteProtocolError: transport failures.
        """
        response = self._ok(self.request(RequestCode.QUERY_MESSAGE, {
            "topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": begin_ms, "endTimestamp": end_ms}),
            (ResponseCode.QUERY_NOT_FOUND,))
        return [] if response.code == ResponseCode.QUERY_NOT_FOUND else decode_records(response.body)

    def view_message(self, msg_id: str) -> StoredMessage:
        """The message an offset msgId names (the broker in the id must be this one).

        Raises:
            FormatError: not an offset msgId.
            RequestFailedError: no message there.
            OSError, RemoteProtocolError: transport failures.
        """
        _host, offset = decode_msg_id(msg_id)
        response = self._ok(self.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset}))
        return decode_records(response.body)[0]
