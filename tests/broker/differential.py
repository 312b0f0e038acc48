"""Holding `rocketstore serve` against the real RocketMQ 4.9.8 broker with the real `mqadmin`.

The Java tools (NameServer, Broker, mqadmin, the client driver) are looked for at
`$ROCKETSTORE_JAVA_BROKER`, else beside the repository in `../shared/java-broker`; tests that need them
skip with a one-line reason when they (or `java`) are absent.

`JavaBroker` starts a name server and a broker over a fresh store; `mqadmin` runs one command and
returns what it printed; `normalise` masks what differs between two brokers by nature (times,
addresses, ports, store paths, versions) so two outputs can be compared line by line.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from rocketstore.protocol.bodies import decode_json_body
from rocketstore.protocol.client import RemotingClient
from tests.conftest import REPO_ROOT

JAVA_BROKER_DIR = Path(os.environ.get("ROCKETSTORE_JAVA_BROKER", REPO_ROOT.parent / "shared" / "java-broker"))
LAUNCHER = JAVA_BROKER_DIR / "rocketmq"
START_TIMEOUT_S = 120
COMMAND_TIMEOUT_S = 180


def missing_reason() -> str | None:
    """Why the Java tools cannot run here, or None when they can."""
    if not LAUNCHER.is_file() or not (JAVA_BROKER_DIR / "lib" / "rocketmq-4.9.8.jar").is_file():
        return f"RocketMQ java-broker not found at {JAVA_BROKER_DIR} (set ROCKETSTORE_JAVA_BROKER)"
    if shutil.which("java") is None:
        return "java is not on PATH (the RocketMQ java-broker needs Java 17)"
    return None


def require_java_broker() -> None:
    """Skip the calling test (or fixture) when the Java tools are absent."""
    reason = missing_reason()
    if reason is not None:
        pytest.skip(reason)


def _log_dir() -> str:
    return tempfile.mkdtemp(prefix="rocketstore-mqadmin-")


def run_tool(*args: str, timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Run `rocketmq ARGS...` (mqadmin, producer, consumer) and return stdout and stderr together."""
    env = {**os.environ, "RMQ_LOGDIR": os.environ.get("ROCKETSTORE_MQADMIN_LOGS") or _log_dir()}
    done = subprocess.run([str(LAUNCHER), *args], capture_output=True, text=True, timeout=timeout, env=env)
    return done.stdout + done.stderr


# The JVM options the launcher gives its client tools (java-broker/rocketmq), for drivers of our own.
_CLIENT_JVM_OPTIONS = ("-Xms64m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                       "-Djava.net.preferIPv4Stack=true", "--add-opens=java.base/java.nio=ALL-UNNAMED",
                       "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens=java.base/java.lang=ALL-UNNAMED")


def compile_driver(source: Path, out_dir: Path) -> Path:
    """`javac` a driver of tests/broker/java against the client jars into `out_dir`; returns `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["javac", "-nowarn", "-cp", str(JAVA_BROKER_DIR / "lib" / "*"), "-d", str(out_dir),
                           str(source)], capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
    if done.returncode != 0:
        pytest.fail(f"javac {source.name} failed:\n{done.stdout}{done.stderr}")
    return out_dir


def driver_command(classes: Path, main: str, *args: str) -> list[str]:
    """The command that runs the compiled driver `main` with the client jars (and the client's logs in a
    temporary folder)."""
    logs = os.environ.get("ROCKETSTORE_MQADMIN_LOGS") or _log_dir()
    classpath = f"{classes}{os.pathsep}{JAVA_BROKER_DIR / 'lib' / '*'}"
    return ["java", *_CLIENT_JVM_OPTIONS, f"-Drmq.logdir={logs}", f"-Drocketmq.client.logRoot={logs}",
            f"-Dlogback.configurationFile={JAVA_BROKER_DIR / 'lib' / 'conf' / 'logback_client.xml'}",
            "-cp", classpath, main, *args]


def retried_copy(namesrv: str, topic: str, group: str) -> tuple[dict[str, str], dict[str, str]]:
    """The scenario of a retry, run against one broker: the client driver sends one message (tag TagA,
    key rk-0) to `topic`, a push consumer of `group` answers RECONSUME_LATER the first time and gets it
    back; returns the properties of the message as first delivered and of the copy it got back (as the
    client hands them to the listener)."""
    sent = run_tool("producer", namesrv, topic, "1", "--tags", "TagA", "--keys", "rk")
    assert '"sent":1' in sent, sent
    out = run_tool("consumer", namesrv, topic, group, "--retry-once", "--expect", "2", "--timeout", "90")
    copies = [json.loads(line) for line in out.splitlines() if line.startswith('{"topic"')]
    first = [line for line in copies if line["reconsumeTimes"] == 0]
    again = [line for line in copies if line["reconsumeTimes"] == 1]
    assert len(first) == len(again) == 1, out
    return ({str(k): str(v) for k, v in first[0]["properties"].items()},
            {str(k): str(v) for k, v in again[0]["properties"].items()})


def mqadmin(*args: str) -> str:
    """What `mqadmin ARGS...` printed (it exits 0 even when the command failed: read the output)."""
    return run_tool("mqadmin", *args)


_TIMES = re.compile(r"\d{4}-\d\d-\d\d[ T#]\d\d:\d\d:\d\d(?:[,.:]\d{3})?")
_ADDRESSES = re.compile(r"127\.0\.0\.1:\d+")
_MILLIS = re.compile(r"\b1\d{12}\b")
_VERSIONS = re.compile(r"\bV\d+_\d+_\d+(?:_SNAPSHOT)?\b")


def normalise(text: str, *paths: str) -> str:
    """`text` with times, addresses, epoch milliseconds, versions and the given paths masked, JVM
    warnings dropped and trailing blanks trimmed."""
    for path in paths:
        text = text.replace(path, "<path>")
    text = _TIMES.sub("<time>", text)
    text = _ADDRESSES.sub("<addr>", text)
    text = _MILLIS.sub("<millis>", text)
    text = _VERSIONS.sub("<version>", text)
    lines = [line.rstrip() for line in text.splitlines()
             if line.strip() and not line.startswith(("OpenJDK", "WARNING:", "Java HotSpot"))]
    return "\n".join(lines)


def free_ports(count: int, spacing: int = 1) -> int:
    """A port p such that p - 2 .. p + count - 1 are all free (the Java broker binds p - 2 and p + 1)."""
    for _ in range(50):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            base = sock.getsockname()[1]
        if base < 1100 or base + count > 65000:
            continue
        wanted = range(base - 2, base + count)
        if all(_free(port) for port in wanted):
            return base
    raise RuntimeError("no run of free ports found")


def _free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class JavaBroker:
    """The real NameServer and Broker (broker-a of DefaultCluster) over a fresh store under `root`."""

    def __init__(self, root: Path, *settings: str) -> None:
        self.root = root
        self.settings = settings  # extra broker.conf lines, key=value
        port = free_ports(3)
        self.port = port
        self.ns_port = free_port_apart(port)
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def store(self) -> Path:
        return self.root / "store"

    def _spawn(self, name: str, *args: str) -> None:
        with open(self.root / f"{name}.out", "wb") as out:
            self.procs.append(subprocess.Popen([str(LAUNCHER), *args], stdout=out, stderr=subprocess.STDOUT))

    def start(self) -> JavaBroker:
        self.root.mkdir(parents=True, exist_ok=True)
        self._spawn("namesrv", "namesrv", str(self.ns_port), str(self.root / "namesrv"))
        self._wait(lambda: _accepts(self.ns_port), "name server")
        self._spawn("broker", "broker", str(self.store), self.namesrv, str(self.port), *self.settings)
        self._wait(self._registered, "broker")
        return self

    def _registered(self) -> bool:
        try:
            with RemotingClient(self.namesrv, timeout_s=5) as client:
                body = decode_json_body(client.request(106).body)
        except Exception:
            return False
        return bool(isinstance(body, dict) and body.get("brokerAddrTable"))

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if any(proc.poll() is not None for proc in self.procs):
                self.stop()
                pytest.fail(f"the Java {what} exited:\n{self.log()}")
            if callable(ready) and ready():
                return
            time.sleep(0.3)
        self.stop()
        pytest.fail(f"the Java {what} did not start within {START_TIMEOUT_S} s:\n{self.log()}")

    def log(self) -> str:
        return "\n".join((self.root / f"{name}.out").read_text(errors="replace")[-3000:]
                         for name in ("namesrv", "broker") if (self.root / f"{name}.out").exists())

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


def free_port_apart(taken: int) -> int:
    """A free port outside taken - 2 .. taken + 1."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if not taken - 2 <= port <= taken + 1:
            return port


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return True
    except OSError:
        return False
