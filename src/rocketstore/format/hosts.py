"""Socket addresses as RocketMQ stores them: IP bytes (4 or 16) followed by an int32 port."""

from __future__ import annotations

import socket
import struct
from functools import lru_cache

PORT = struct.Struct(">i")
IPV4_HOST_SIZE = 4 + PORT.size
IPV6_HOST_SIZE = 16 + PORT.size


@lru_cache(maxsize=1024)
def parse_host(host: str) -> tuple[bytes, int]:
    """`"ip:port"` or `"[v6]:port"` -> (packed IP, port).

    Raises:
        ValueError: not an address with a port.
    """
    text, _, port_text = host.rpartition(":")
    if not text or not port_text.isdigit():
        raise ValueError(f"host {host!r} is not 'ip:port'")
    port = int(port_text)
    if port > 0xFFFF:
        raise ValueError(f"host {host!r}: port out of range")
    if text.startswith("[") and text.endswith("]"):
        return socket.inet_pton(socket.AF_INET6, text[1:-1]), port
    try:
        return socket.inet_pton(socket.AF_INET, text), port
    except OSError:
        try:
            return socket.inet_pton(socket.AF_INET6, text), port
        except OSError:
            raise ValueError(f"host {host!r}: {text!r} is not an IP address") from None


@lru_cache(maxsize=1024)
def format_host(ip: bytes, port: int) -> str:
    """(packed IP, port) -> `"ip:port"` (IPv6 in brackets)."""
    if len(ip) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, ip)}:{port}"
    return f"[{socket.inet_ntop(socket.AF_INET6, ip)}]:{port}"
