"""Helpers for the gRPC tests: the official RocketMQ 5 Python client in its own venv, a broker with a
gRPC endpoint, and raw calls of our own over grpcio for what the client never sends."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import grpc

from rocketstore.broker.grpc.protos import SERVICE, pb
from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient
from tests.broker.broker_support import BrokerProcess, ClientProcess, client_venv, finish, free_port

CLIENT5_REQUIREMENT = "rocketmq-python-client==5.1.2"
CLIENT5_SCRIPT = Path(__file__).parent / "clients" / "rmq5_client.py"


def client5_venv_python() -> Path:
    """Python of the venv holding the official 5.x client ($ROCKETSTORE_CLIENT5_VENV)."""
    return client_venv(CLIENT5_REQUIREMENT, "rocketmq.v5.consumer", "ROCKETSTORE_CLIENT5_VENV")


class Client5:
    """Runs clients/rmq5_client.py in the 5.x client's venv with HOME in a temporary folder."""

    def __init__(self, python: Path, home: Path) -> None:
        self.python = python
        self.home = home
        self._runs = 0
        home.mkdir(parents=True, exist_ok=True)

    def start(self, *args: str) -> ClientProcess:
        self._runs += 1
        out, err = self.home / f"client5-{self._runs}.out", self.home / f"client5-{self._runs}.err"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env["HOME"] = str(self.home)  # the client logs to $HOME/logs/rocketmq_python
        with open(out, "wb") as fout, open(err, "wb") as ferr:
            proc = subprocess.Popen([str(self.python), str(CLIENT5_SCRIPT), *args], stdout=fout, stderr=ferr,
                                    env=env)
        return ClientProcess(proc, out, err)

    def run(self, *args: str, timeout: float = 60) -> list[dict]:
        return finish(self.start(*args), timeout)


class GrpcBroker(BrokerProcess):
    """A broker subprocess with its gRPC endpoint on a free port."""

    def __init__(self, store: Path, log_path: Path, *extra: str) -> None:
        self.grpc_port = free_port()
        super().__init__(store, log_path, "--grpc", f"127.0.0.1:{self.grpc_port}", *extra)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def create_topic(self, topic: str, queues: int = 4, credentials: tuple[str, str] | None = None) -> None:
        with RemotingClient(self.addr, credentials=credentials) as admin:
            created = admin.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                    {"topic": topic, "readQueueNums": queues, "writeQueueNums": queues, "perm": 6})
            assert created.code == ResponseCode.SUCCESS


def call(endpoint: str, method: str, request: Any, *, client_id: str = "test-client") -> Any:
    """One unary call of MessagingService; for a server-streaming method the list of responses."""
    desc = pb.service.methods_by_name[method]
    response_type = getattr(pb, desc.output_type.name)
    with grpc.insecure_channel(endpoint) as channel:
        path = f"/{SERVICE}/{method}"
        kwargs = {"request_serializer": type(request).SerializeToString,
                  "response_deserializer": response_type.FromString}
        metadata = (("x-mq-client-id", client_id),)
        if desc.output_type.name in ("ReceiveMessageResponse", "PullMessageResponse"):
            return list(channel.unary_stream(path, **kwargs)(request, metadata=metadata, timeout=30))
        return channel.unary_unary(path, **kwargs)(request, metadata=metadata, timeout=30)
