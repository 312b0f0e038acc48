"""What a client can make the broker hold is bounded: a client that pipelines requests for a 3 MiB
record and never reads the answers once grew the broker from 48 MB to 944 MB, and 30 connections each
holding an unfinished 14 MiB frame to 479 MB. Too many connections, an unfinished frame and an idle
connection are closed."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode, encode_command
from rocketstore.protocol.client import RemotingClient

from .broker_support import BrokerProcess

pytestmark = pytest.mark.broker

MiB = 1 << 20


def _rss_mib(process: BrokerProcess) -> float:
    with open(f"/proc/{process.pid}/status") as status:
        line = next(row for row in status if row.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _store(root, body_size: int = 3 * MiB) -> tuple:
    with MessageStore.open(root, StoreConfig(commitlog_file_size=16 * MiB, consume_queue_file_entries=1000,
                                             index_hash_slots=1000, index_max_entries=4000)) as store:
        big = store.put(Message("Big", bytes(body_size), keys=("big",)))
        store.put(Message("Small", b"small"))
    return root, big.phy_offset


def _connect(process: BrokerProcess) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", process.port), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return sock


def _closed_by_peer(sock: socket.socket, within_s: float) -> bool:
    sock.settimeout(within_s)
    try:
        while True:
            if not sock.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def _still_answers(process: BrokerProcess) -> None:
    with RemotingClient(process.addr) as client:
        answer = client.request(RequestCode.GET_MAX_OFFSET, {"topic": "Small", "queueId": 0})
        assert answer.code == ResponseCode.SUCCESS and answer.ext_fields["offset"] == "1"


def test_pipelined_requests_whose_answers_are_never_read_do_not_grow_the_broker(tmp_path):
    store, offset = _store(tmp_path / "store")
    process = BrokerProcess(store, tmp_path / "broker.log").start()
    try:
        before = _rss_mib(process)
        sock = _connect(process)
        request = b"".join(encode_command(RemotingCommand(RequestCode.VIEW_MESSAGE_BY_ID, opaque=n,
                                                          ext_fields={"offset": str(offset)}))
                           for n in range(150))
        sock.sendall(request)  # 150 answers of 3 MiB: 450 MiB if the broker kept them all
        time.sleep(3)
        grown = _rss_mib(process) - before
        assert grown < 64, f"the broker grew by {grown:.0f} MiB for answers nobody reads"
        _still_answers(process)
        sock.close()
    finally:
        process.stop()


def _half_frame(size: int) -> bytes:
    """The start of a frame announcing `size` bytes, all but the last one sent."""
    return struct.pack(">ii", size, 0) + bytes(size - 5)


def test_unfinished_frames_are_bounded_across_connections_and_time_out(tmp_path):
    store, _ = _store(tmp_path / "store", body_size=10)
    process = BrokerProcess(store, tmp_path / "broker.log", "--max-buffered-bytes", str(48 * MiB),
                            "--frame-timeout", "3").start()
    try:
        before = _rss_mib(process)
        socks = []
        for _ in range(8):  # 8 x 14 MiB = 112 MiB of unfinished frames offered
            sock = _connect(process)
            try:
                sock.sendall(_half_frame(14 * MiB))
            except (BrokenPipeError, ConnectionResetError):
                pass  # closed while sending: over the budget
            socks.append(sock)
        time.sleep(1)
        grown = _rss_mib(process) - before
        assert grown < 48 + 40, f"the broker holds {grown:.0f} MiB of unfinished frames"
        _still_answers(process)
        assert all(_closed_by_peer(sock, 6) for sock in socks), "an unfinished frame outlived --frame-timeout"
        assert "--max-buffered-bytes" in process.log()
        assert "a request left unfinished" in process.log()
    finally:
        process.stop()


def test_connections_over_the_cap_are_closed_and_idle_ones_time_out(tmp_path):
    store, _ = _store(tmp_path / "store", body_size=10)
    process = BrokerProcess(store, tmp_path / "broker.log", "--max-connections", "3", "--idle-timeout", "2",
                            one_port=True).start()
    try:
        time.sleep(0.5)  # the start-up probes' connections are gone
        held = [_connect(process) for _ in range(3)]
        time.sleep(0.3)
        extra = _connect(process)
        assert _closed_by_peer(extra, 1.5), "a connection over --max-connections was served"
        assert all(_closed_by_peer(sock, 4) for sock in held), "an idle connection outlived --idle-timeout"
        _still_answers(process)
        assert "--max-connections" in process.log()
    finally:
        process.stop()
