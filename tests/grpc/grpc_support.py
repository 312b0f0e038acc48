"""Helpers for the gRPC tests: the official RocketMQ 5 Python client in its own venv, a broker with a
gRPC endpoint, and raw calls of our own over grpcio for what the client never sends."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import grpc
import pytest

from rocketstore.broker.grpc.protos import SERVICE, pb
from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient
from tests.broker.broker_support import BrokerProcess, ClientProcess, client_venv, finish

CLIENT5_REQUIREMENT = "rocketmq-python-client==5.1.2"
CLIENT5_SCRIPT = Path(__file__).parent / "clients" / "rmq5_client.py"
NODE_REQUIREMENT = "rocketmq-client-nodejs@1.0.8"
NODE_SCRIPT = Path(__file__).parent / "clients" / "rmq_node_client.js"


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
        super().__init__(store, log_path, *extra, grpc=True)
        assert self.serve.grpc_port is not None
        self.grpc_port = self.serve.grpc_port

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


def node_client_modules() -> Path:
    """node_modules holding the Node.js client, installed once (under a lock) with npm into
    $ROCKETSTORE_NODE_CLIENT_DIR or <tmp>/rocketstore-client-rocketmq-client-nodejs-1.0.8; skips the test
    where Node.js and npm are missing."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("Node.js and npm are not on this machine")
    root = Path(os.environ.get("ROCKETSTORE_NODE_CLIENT_DIR")
                or Path(tempfile.gettempdir()) / "rocketstore-client-rocketmq-client-nodejs-1.0.8")
    marker = root / ".rocketstore-installed"
    root.mkdir(parents=True, exist_ok=True)
    with open(str(root) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not marker.exists():
            done = subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(root),
                                   NODE_REQUIREMENT], capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                pytest.fail(f"cannot install {NODE_REQUIREMENT}:\n{done.stdout}\n{done.stderr}")
            marker.write_text(NODE_REQUIREMENT)
    return root / "node_modules"


def node_client(node_modules: Path, home: Path, *args: str, env: dict[str, str] | None = None) -> list[dict]:
    """Run clients/rmq_node_client.js with `args`; its JSON lines (the last one {"done": ...})."""
    home.mkdir(parents=True, exist_ok=True)
    full_env = {**os.environ, "NODE_PATH": str(node_modules), "HOME": str(home), **(env or {})}
    done = subprocess.run(["node", str(NODE_SCRIPT), *args], capture_output=True, text=True, timeout=90,
                          env=full_env)  # the client logs under $HOME
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines and "done" in lines[-1], (done.returncode, done.stdout, done.stderr[-2000:])
    return lines
