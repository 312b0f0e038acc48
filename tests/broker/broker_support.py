"""Helpers for the broker tests: free ports, a broker subprocess, the real client's own venv."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from rocketstore import MessageStore, StoreConfig
from rocketstore.testing import BrokerError, ServeProcess

CLIENT_REQUIREMENT = "rocketmq==0.4.4"
CLIENT_SCRIPT = Path(__file__).parent / "clients" / "rmq_client.py"
# Small geometry keeps store creation fast; a 1 s delay for every level makes retries quick.
SMALL_GEOMETRY = {"commitlog_file_size": 4 * 1024 * 1024, "consume_queue_file_entries": 10_000,
                  "index_hash_slots": 4096, "index_max_entries": 16_384}
FAST_DELAY_LEVELS = " ".join(["1s"] * 18)
START_TIMEOUT_S = 60
STOP_TIMEOUT_S = 30


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def create_store(path: Path) -> Path:
    """An empty store with the small test geometry (the broker opens it with what it records)."""
    MessageStore.open(path, StoreConfig(**SMALL_GEOMETRY)).close()
    return path


class BrokerProcess:
    """`python -m rocketstore.broker STORE ...` on free loopback ports: rocketstore.testing's
    `ServeProcess` (the fixture's broker process), with the suite's fast delay levels and its failures
    reported through pytest."""

    def __init__(self, store: Path, log_path: Path, *extra: str, one_port: bool = False, grpc: bool = False) -> None:
        self.store = store
        self.log_path = log_path
        self.extra = extra
        self.serve = ServeProcess(store, log_path, ("--delay-levels", FAST_DELAY_LEVELS, *extra), grpc=grpc,
                                  one_port=one_port,
                                  log_level=os.environ.get("ROCKETSTORE_BROKER_LOG_LEVEL", "INFO"))
        self.port = self.serve.broker_port
        self.ns_port = self.serve.namesrv_port

    @property
    def addr(self) -> str:
        return self.serve.broker_addr

    @property
    def namesrv(self) -> str:
        return self.serve.namesrv_addr

    @property
    def pid(self) -> int:
        assert self.serve.pid is not None, "the broker was never started"
        return self.serve.pid

    def start(self) -> BrokerProcess:
        try:
            self.serve.start(START_TIMEOUT_S)
        except BrokerError as exc:
            pytest.fail(str(exc))
        return self

    def stop(self) -> int:
        """SIGTERM and wait; returns the exit code."""
        try:
            return self.serve.stop(STOP_TIMEOUT_S)
        except BrokerError as exc:
            pytest.fail(str(exc))

    def kill(self) -> None:
        self.serve.kill()

    def alive(self) -> bool:
        return self.serve.alive()

    def log(self) -> str:
        return self.serve.log_tail(6000)


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def client_venv(requirement: str, check_import: str, env_variable: str, *, timeout_s: float = 900) -> Path:
    """Python of a venv holding one client from PyPI, created (once, under a lock) if missing.

    The folder is $`env_variable`, else <tmp>/rocketstore-client-<requirement>: each client has a venv of
    its own (rocketmq 0.4.4 and rocketmq-python-client 5.x install into the same `rocketmq` package
    folder). Fails (never skips) when the client cannot be installed.
    """
    name = requirement.replace("==", "-")
    root = Path(os.environ.get(env_variable) or Path(tempfile.gettempdir()) / f"rocketstore-client-{name}")
    python = root / "bin" / "python"
    marker = root / ".rocketstore-installed"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(str(root) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and python.exists():
            return python
        steps = [[sys.executable, "-m", "venv", "--clear", str(root)],
                 [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", requirement],
                 [str(python), "-c", f"import {check_import}"]]
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=timeout_s)
            if done.returncode != 0:
                pytest.fail(f"cannot prepare the client {requirement} ({' '.join(step)}):\n{done.stdout}\n"
                            f"{done.stderr}")
        marker.write_text(requirement)
    return python


def client_venv_python() -> Path:
    """Python of the venv holding the real C++ client, rocketmq 0.4.4 ($ROCKETSTORE_CLIENT_VENV)."""
    return client_venv(CLIENT_REQUIREMENT, "rocketmq.client", "ROCKETSTORE_CLIENT_VENV")


class RealClient:
    """Runs tests/broker/clients/rmq_client.py in the client venv with HOME in a temporary folder."""

    def __init__(self, python: Path, home: Path) -> None:
        self.python = python
        self.home = home
        self._runs = 0
        home.mkdir(parents=True, exist_ok=True)

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
        env["HOME"] = str(self.home)  # the C++ client logs to $HOME/logs/rocketmq-cpp
        return env

    def start(self, *args: str) -> ClientProcess:
        """Start the client script; its output goes to files, so it never blocks on a full pipe."""
        self._runs += 1
        out = self.home / f"client-{self._runs}.out"
        err = self.home / f"client-{self._runs}.err"
        with open(out, "wb") as fout, open(err, "wb") as ferr:
            proc = subprocess.Popen([str(self.python), str(CLIENT_SCRIPT), *args], stdout=fout, stderr=ferr,
                                    env=self._env())
        return ClientProcess(proc, out, err)

    def run(self, *args: str, timeout: float = 120) -> list[dict]:
        return finish(self.start(*args), timeout)


class ClientProcess:
    """A running client script and the files it writes to."""

    def __init__(self, proc: subprocess.Popen[bytes], out: Path, err: Path) -> None:
        self.proc, self.out, self.err = proc, out, err

    def poll(self) -> int | None:
        return self.proc.poll()


def finish(client: ClientProcess, timeout: float) -> list[dict]:
    """Wait for a client process and parse its JSON lines; fails on timeout or a missing done line."""
    try:
        client.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        client.proc.kill()
        client.proc.wait(10)
        pytest.fail(f"real client timed out after {timeout} s:\n{_tail(client.out)}\n{_tail(client.err)}")
    out = client.out.read_text(errors="replace")
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    if not lines or "done" not in lines[-1]:
        pytest.fail(f"real client ended without a done line (rc {client.proc.returncode}):\n{out[-3000:]}\n"
                    f"{_tail(client.err)}")
    return lines


def _tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:]
