"""Plaintext and TLS on the one gRPC port, as RocketMQ 5's proxy serves them in its TLS test mode.

grpcio's server takes a connection as either plaintext or TLS per port, so the endpoint listens on two
loopback ports of its own (one insecure, one with the certificate) and `TlsFront` owns the public port: it
reads each accepted connection's first byte, 0x16 (a TLS handshake record, the ClientHello) or anything
else (HTTP/2's preface starts with ``P``), and relays the connection's bytes both ways to the matching
loopback port. The front keeps which loopback connection stands for which client, so the service still
sees the client's own address (`TlsFront.peer`).

Bounds: at most `max_connections` client connections (one more is closed at once, logged); a connection
that sends nothing within `FIRST_BYTE_TIMEOUT_S` is closed; each direction relays `CHUNK_BYTES` at a time
and waits for the other side to take them (no buffering beyond the transports' own).

The certificate is the one of ``--grpc-tls-cert``/``--grpc-tls-key``, else a self-signed one made at start
(`self_signed`: EC P-256, for ``localhost``, 127.0.0.1, ::1 and the listening host).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import hashlib
import ipaddress
import logging
import ssl
import tempfile
from pathlib import Path

log = logging.getLogger("rocketstore.broker.grpc")

TLS_HANDSHAKE = 0x16  # the content type of a TLS record carrying a handshake message (a ClientHello first)
FIRST_BYTE_TIMEOUT_S = 10.0
CHUNK_BYTES = 64 * 1024
CERT_DAYS = 365


def self_signed(host: str) -> tuple[bytes, bytes]:
    """A new self-signed certificate and its key (PEM), valid for `CERT_DAYS` days from a day ago for
    ``localhost``, 127.0.0.1, ::1 and `host` (a name or an address)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rocketstore gRPC endpoint")])
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                                     x509.IPAddress(ipaddress.ip_address("::1"))]
    if host and host not in ("localhost", "0.0.0.0", "::", "[::]", "127.0.0.1", "::1"):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host.strip("[]"))))
        except ValueError:
            names.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=CERT_DAYS))
            .add_extension(x509.SubjectAlternativeName(names), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def load_pair(cert_file: Path, key_file: Path) -> tuple[bytes, bytes]:
    """The PEM certificate chain and key of two files, checked to be a pair.

    Raises:
        ValueError: a file cannot be read, is not PEM, or the key is not the certificate's.
    """
    try:
        cert, key = Path(cert_file).read_bytes(), Path(key_file).read_bytes()
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"cannot use {cert_file} and {key_file} as the gRPC TLS certificate and key: {exc}") from exc
    return cert, key


def fingerprint(cert_pem: bytes) -> str:
    """SHA-256 of the certificate's DER bytes, as ``AB:CD:...`` (what `openssl x509 -fingerprint` prints)."""
    der = ssl.PEM_cert_to_DER_cert(cert_pem.decode("ascii"))
    return ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())


def write_cert(cert_pem: bytes, folder: Path | None = None) -> Path:
    """Write a certificate where a client can be pointed at it; returns the file."""
    handle = tempfile.NamedTemporaryFile("wb", suffix=".pem", prefix="rocketstore-grpc-", dir=folder, delete=False)
    with handle:
        handle.write(cert_pem)
    return Path(handle.name)


class TlsFront:
    """The public port: each connection is relayed to the plaintext or the TLS loopback port by its first
    byte.

    Args:
        host: address to listen on.
        port: port to listen on (0: any free one; `port` tells which after `start`).
        plain_port: the loopback port of the plaintext gRPC server.
        tls_port: the loopback port of the TLS gRPC server.
        max_connections: client connections held at once; one more is closed at once.
    """

    def __init__(self, host: str, port: int, plain_port: int, tls_port: int, max_connections: int) -> None:
        self.host = host
        self.port = port
        self.plain_port = plain_port
        self.tls_port = tls_port
        self.max_connections = max_connections
        self.server: asyncio.Server | None = None
        self.connections: set[asyncio.Task[None]] = set()
        self.peers: dict[str, str] = {}  # the gRPC peer of a loopback connection -> the client's own
        self.refused = 0

    async def start(self) -> None:
        """Listen.

        Raises:
            OSError: the address cannot be bound.
        """
        self.server = await asyncio.start_server(self._accepted, self.host.strip("[]") or None, self.port,
                                                 reuse_address=True, limit=CHUNK_BYTES)
        self.port = self.server.sockets[0].getsockname()[1]

    def peer(self, grpc_peer: str) -> str:
        """The client's own address for the peer the gRPC server saw (itself when it is not the front's)."""
        return self.peers.get(grpc_peer, grpc_peer)

    async def _accepted(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self.connections) >= self.max_connections:
            self.refused += 1
            log.warning("gRPC connection from %s closed: %d connections are open (--max-connections)",
                        _address(writer.get_extra_info("peername")), len(self.connections))
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        self.connections.add(task)
        try:
            await self._relay(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError):
            pass
        except asyncio.CancelledError:  # close(): the connection ends with the endpoint
            pass
        finally:
            self.connections.discard(task)
            writer.transport.abort()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        first = await asyncio.wait_for(reader.readexactly(1), FIRST_BYTE_TIMEOUT_S)
        port = self.tls_port if first[0] == TLS_HANDSHAKE else self.plain_port
        inner_reader, inner_writer = await asyncio.open_connection("127.0.0.1", port, limit=CHUNK_BYTES)
        local = inner_writer.get_extra_info("sockname")
        key = f"ipv4:127.0.0.1:{local[1]}"
        self.peers[key] = _address(writer.get_extra_info("peername"))
        try:
            inner_writer.write(first)
            up = asyncio.ensure_future(_pump(reader, inner_writer))
            down = asyncio.ensure_future(_pump(inner_reader, writer))
            try:
                # the relay ends when the server's side ends, or either side fails; a client that closed its
                # side still gets the rest of the server's answers
                done, _ = await asyncio.wait((up, down), return_when=asyncio.FIRST_COMPLETED)
                if down not in done and up.exception() is None:
                    await down
            finally:
                for pump in (up, down):
                    pump.cancel()
                await asyncio.gather(up, down, return_exceptions=True)
        finally:
            self.peers.pop(key, None)
            inner_writer.transport.abort()

    def stop_listening(self) -> None:
        """Accept no new connection; the open ones go on."""
        if self.server is not None:
            self.server.close()

    async def close(self) -> None:
        """Stop listening and end every relayed connection."""
        if self.server is not None:
            self.server.close()
            for task in list(self.connections):
                task.cancel()
            await asyncio.gather(*self.connections, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.server.wait_closed(), 5)
            self.server = None


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy `reader` to `writer` until its end; then half-close `writer` (when it can)."""
    while chunk := await reader.read(CHUNK_BYTES):
        writer.write(chunk)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


def _address(peername: object) -> str:
    """A socket's peer name as gRPC writes peers (``ipv4:1.2.3.4:5``, ``ipv6:[::1]:5``)."""
    if isinstance(peername, tuple) and len(peername) >= 2:
        host, port = str(peername[0]), peername[1]
        return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
    return str(peername)
