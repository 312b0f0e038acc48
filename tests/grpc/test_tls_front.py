"""`TlsFront` in-process, over two stand-in servers that say which one they are and who they see: the first
byte picks the server, bytes go both ways unchanged, the front tells the client's own address for the
loopback peer the server saw, and a client that closes its side still gets the rest of the answer."""

from __future__ import annotations

import asyncio

from rocketstore.broker.grpc.tls import TlsFront, fingerprint, load_pair, self_signed


async def _stand_in(name: bytes) -> tuple[asyncio.Server, int]:
    """A server that answers `name`, the peer it sees, then every byte it reads (upper-cased) until EOF."""
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        host, port = writer.get_extra_info("peername")[:2]
        writer.write(name + f" ipv4:{host}:{port}\n".encode())
        while chunk := await reader.read(65536):
            writer.write(chunk.upper())
            await writer.drain()
        writer.write(b"|end")  # after the client's EOF: still relayed to it
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


async def _exchange(front: TlsFront, first: bytes, payload: bytes) -> tuple[bytes, str]:
    """Send `first` + `payload`, close our side, read to the end; (what came after the greeting, its name)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", front.port)
    client = writer.get_extra_info("sockname")
    reading = asyncio.ensure_future(reader.read())  # read while writing: nothing waits on a full buffer
    writer.write(first + payload)
    await writer.drain()
    await asyncio.sleep(0.05)
    seen_by_server = dict(front.peers)
    writer.write_eof()
    answer = await asyncio.wait_for(reading, 10)
    writer.close()
    greeting, _, rest = answer.partition(b"\n")
    name, seen = greeting.decode().split()
    assert seen_by_server.get(seen) == f"ipv4:{client[0]}:{client[1]}" != seen  # the client's own address
    return rest, name


def test_the_first_byte_picks_the_server_and_bytes_go_both_ways_unchanged():
    async def run() -> None:
        plain, plain_port = await _stand_in(b"plain")
        tls, tls_port = await _stand_in(b"tls")
        front = TlsFront("127.0.0.1", 0, plain_port, tls_port, max_connections=8)
        await front.start()
        try:
            big = bytes(range(256)) * 4096  # 1 MiB: many chunks each way
            rest, name = await _exchange(front, b"P", big)
            assert name == "plain" and rest == (b"P" + big).upper() + b"|end"
            rest, name = await _exchange(front, b"\x16", b"hello")
            assert name == "tls" and rest == b"\x16HELLO|end"
            await asyncio.sleep(0.1)
            assert not front.connections and not front.peers  # both relays ended and forgotten
        finally:
            await front.close()
            plain.close()
            tls.close()

    asyncio.run(run())


def test_certificates_made_and_loaded(tmp_path):
    cert, key = self_signed("db.example")
    (tmp_path / "c.pem").write_bytes(cert)
    (tmp_path / "k.pem").write_bytes(key)
    assert load_pair(tmp_path / "c.pem", tmp_path / "k.pem") == (cert, key)
    assert len(fingerprint(cert).split(":")) == 32
    assert fingerprint(cert) != fingerprint(self_signed("db.example")[0])  # a new key each time
