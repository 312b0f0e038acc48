"""Plaintext and TLS on the one `--grpc` port (grpc/tls.py): the official Python and Node.js clients with TLS
and a plaintext client side by side; the self-signed certificate made at start; the front's connection
bound, its first-byte detection with clients that send nothing or garbage, and a clean stop."""

from __future__ import annotations

import socket
import ssl
import time
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from cryptography import x509

from rocketstore.broker.grpc.protos import SERVICE, pb
from rocketstore.broker.grpc.tls import fingerprint, self_signed
from rocketstore.cli.serve import serve
from tests.grpc.grpc_support import GrpcBroker, node_client

pytestmark = pytest.mark.broker


def _pair(folder: Path) -> tuple[Path, Path]:
    cert, key = self_signed("127.0.0.1")
    (folder / "cert.pem").write_bytes(cert)
    (folder / "key.pem").write_bytes(key)
    return folder / "cert.pem", folder / "key.pem"


def _route(endpoint: str, topic: str, credentials: grpc.ChannelCredentials | None = None) -> int:
    channel = grpc.secure_channel(endpoint, credentials) if credentials else grpc.insecure_channel(endpoint)
    with channel:
        method = channel.unary_unary(f"/{SERVICE}/QueryRoute",
                                     request_serializer=pb.QueryRouteRequest.SerializeToString,
                                     response_deserializer=pb.QueryRouteResponse.FromString)
        request = pb.QueryRouteRequest()
        request.topic.name = topic
        return method(request, timeout=10).status.code


@pytest.mark.timeout(300)
def test_tls_and_plaintext_clients_of_two_languages_share_the_port(store_dir, tmp_path, client5, node_modules,
                                                                    monkeypatch):
    cert, key = _pair(tmp_path)
    broker = GrpcBroker(store_dir, tmp_path / "broker.log", "--grpc-tls-cert", str(cert),
                        "--grpc-tls-key", str(key)).start()
    try:
        broker.create_topic("Secure")
        ep = broker.endpoint
        monkeypatch.setenv("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", str(cert))  # the Python client's trusted roots
        by_python = [r for r in client5.run("produce", "--endpoint", ep, "--topic", "Secure", "--count", "2",
                                            "--tag", "T", "--key-prefix", "py-", "--tls") if "sent" in r]
        assert [r.get("error") for r in by_python] == [None, None], by_python
        tls_env = {"RMQ_NODE_SSL": "1", "NODE_EXTRA_CA_CERTS": str(cert)}
        home = tmp_path / "node-home"
        by_node = [r for r in node_client(node_modules, home, "produce", ep, "Secure", "2", "T", "node-",
                                          env=tls_env) if "sent" in r]
        assert [r.get("error") for r in by_node] == [None, None], by_node
        want = sorted(["py-body-0", "py-body-1", "node--body-0", "node--body-1"])
        plain = [m for m in client5.run("consume", "--endpoint", ep, "--topic", "Secure", "--group", "Plain",
                                        "--expect", "4", "--timeout", "20") if "body" in m]
        assert sorted(m["body"] for m in plain) == want
        secure = [m for m in node_client(node_modules, home, "consume", ep, "Secure", "NodeTls", "T", "4", "20",
                                         env=tls_env) if "body" in m]
        assert sorted(m["body"] for m in secure) == want
        assert _route(ep, "Secure") == pb.Code.OK
        assert _route(ep, "Secure", grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())) == pb.Code.OK
        assert broker.stop() == 0
    finally:
        broker.kill()
    log = (tmp_path / "broker.log").read_text()
    assert f"TLS certificate of {cert}, SHA-256 {fingerprint(cert.read_bytes())}" in log
    assert "Traceback" not in log


def test_a_self_signed_certificate_is_made_at_start(grpc_broker: GrpcBroker, tmp_path):
    grpc_broker.create_topic("Selfie", queues=1)
    host, port = grpc_broker.endpoint.split(":")
    served = ssl.get_server_certificate((host, int(port))).encode()
    names = x509.load_pem_x509_certificate(served).extensions.get_extension_for_class(x509.SubjectAlternativeName)
    assert "localhost" in names.value.get_values_for_type(x509.DNSName)
    assert [str(a) for a in names.value.get_values_for_type(x509.IPAddress)][:2] == ["127.0.0.1", "::1"]
    trusting = grpc.ssl_channel_credentials(root_certificates=served)
    assert _route(grpc_broker.endpoint, "Selfie", trusting) == pb.Code.OK
    assert _route(grpc_broker.endpoint, "NoSuchTopic", trusting) == pb.Code.TOPIC_NOT_FOUND
    assert _route(grpc_broker.endpoint, "Selfie") == pb.Code.OK
    assert grpc_broker.stop() == 0
    log = (tmp_path / "broker.log").read_text()
    assert f"self-signed, made at start, SHA-256 {fingerprint(served)}" in log


def _closed(sock: socket.socket) -> bool:
    """True once the other side has closed `sock` (reset counts); bytes it sent first are read past."""
    sock.settimeout(10)
    try:
        while sock.recv(4096):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        return False
    return True


def test_connections_are_bounded_garbage_is_dropped_and_the_front_stops_cleanly(store_dir, tmp_path):
    broker = GrpcBroker(store_dir, tmp_path / "broker.log", "--max-connections", "3").start()
    held: list[socket.socket] = []
    try:
        host, port = broker.endpoint.split(":")
        garbage = socket.create_connection((host, int(port)), timeout=10)
        garbage.sendall(b"GET / HTTP/1.1\r\n\r\n")  # not HTTP/2: the plaintext server drops it
        assert _closed(garbage)
        garbage.close()
        hello = socket.create_connection((host, int(port)), timeout=10)
        hello.sendall(b"\x16\x03\x01\x00\x05hello")  # a TLS record that is no ClientHello: the TLS server drops it
        assert _closed(hello)
        hello.close()
        time.sleep(0.3)
        for _ in range(3):
            held.append(socket.create_connection((host, int(port)), timeout=10))  # silent: held open
        time.sleep(0.3)
        with socket.create_connection((host, int(port)), timeout=10) as one_more:
            started = time.monotonic()
            assert _closed(one_more) and time.monotonic() - started < 2  # at once: 3 connections are open
        held.pop().close()
        time.sleep(0.3)
        assert _route(broker.endpoint, "NoSuchTopic") == pb.Code.TOPIC_NOT_FOUND  # room again
        started = time.monotonic()
        assert broker.stop() == 0  # with two silent connections open
        assert time.monotonic() - started < 10
        assert all(_closed(sock) for sock in held)  # the front ended them
    finally:
        for sock in held:
            sock.close()
        broker.kill()
    log = (tmp_path / "broker.log").read_text()
    assert "connections are open (--max-connections)" in log
    assert "Traceback" not in log


def test_tls_options_are_checked_before_the_store_is_opened(tmp_path):
    cert, key = _pair(tmp_path)
    store = tmp_path / "store"
    alone = CliRunner().invoke(serve, [str(store), "--grpc-tls-cert", str(cert)])
    assert alone.exit_code == 2 and "--grpc-tls-key" in alone.output
    swapped = CliRunner().invoke(serve, [str(store), "--grpc-tls-cert", str(key), "--grpc-tls-key", str(cert)])
    assert swapped.exit_code == 2 and "cannot use" in swapped.output
    other_key = tmp_path / "other.pem"
    other_key.write_bytes(self_signed("127.0.0.1")[1])
    mismatched = CliRunner().invoke(serve, [str(store), "--grpc-tls-cert", str(cert), "--grpc-tls-key", str(other_key)])
    assert mismatched.exit_code == 2 and "cannot use" in mismatched.output
    assert not store.exists()
