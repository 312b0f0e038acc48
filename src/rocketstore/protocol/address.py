"""Addresses as RocketMQ writes them: ``host:port``, an IPv6 host in brackets or bare."""

from __future__ import annotations


def split_address(address: str) -> tuple[str, int]:
    """``host:port`` -> (host, port).

    Raises:
        ValueError: no port, or a port that is not a number in 0..65535.
    """
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"address {address!r} is not host:port")
    return host.strip("[]") or "127.0.0.1", int(port)
