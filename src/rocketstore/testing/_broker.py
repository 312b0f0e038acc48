"""`rocketmq_broker`: a throw-away RocketMQ broker (`rocketstore serve` in a subprocess) for tests."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rocketstore.broker.topics import TopicSpec
from rocketstore.config import DISK_CLEAN_FORCIBLY_ENV, DISK_FULL_ENV

# A small store: 8 MiB commitlog files (a message of RocketMQ's 4 MiB maximum fits), 10,000-entry
# consume-queue files, 4,096 index slots for 16,384 entries. Every file is sparse until written.
SMALL_GEOMETRY = ("--commitlog-file-size", str(8 * 1024 * 1024), "--consume-queue-file-entries", "10000",
                  "--index-hash-slots", "4096", "--index-max-entries", "16384")
DEFAULT_QUEUE_NUMS = 4  # serve's: a topic declared without QUEUES
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_CHARS = 4000
_START_ATTEMPTS = 3  # a free port taken by someone else before serve binds it: start again on others
_POLL_S = 0.05
_OWN_OPTIONS = ("--namesrv", "--listen", "--grpc")


class BrokerError(RuntimeError):
    """The broker did not start, died, or did not stop on SIGTERM; the message ends with its log's tail."""


@dataclass(frozen=True)
class RunningBroker:
    """A broker started by `rocketmq_broker`, with its addresses as RocketMQ clients take them.

    Attributes:
        namesrv_addr: ``127.0.0.1:port`` of the name server, for legacy (remoting) clients.
        broker_addr: ``127.0.0.1:port`` of the broker itself (the address the routes give).
        grpc_endpoint: ``127.0.0.1:port`` for RocketMQ 5 clients; None when started with ``grpc=False``.
        store_path: the store directory (removed when the broker stops).
        log_path: serve's log (stdout and stderr), removed with the store.
        pid: the serve process.
        topics: the topics declared at start.
    """

    namesrv_addr: str
    broker_addr: str
    grpc_endpoint: str | None
    store_path: Path
    log_path: Path
    pid: int
    topics: tuple[TopicSpec, ...]

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        """The last `chars` characters of serve's log."""
        return _tail(self.log_path, chars)


@contextlib.contextmanager
def rocketmq_broker(topics: Iterable[str] | str = (), *, grpc: bool = True, extra_args: Sequence[str] = (),
                    log_level: str = "INFO", start_timeout: float = START_TIMEOUT_S,
                    stop_timeout: float = STOP_TIMEOUT_S,
                    tmp_dir: str | os.PathLike[str] | None = None) -> Iterator[RunningBroker]:
    """Run a RocketMQ broker over a fresh temporary store for the `with` block.

    Starts ``python -m rocketstore.broker`` (`rocketstore serve`) with the interpreter running this code,
    on free loopback ports: a name server and a broker for legacy clients and, with `grpc`, the gRPC
    endpoint for RocketMQ 5 clients. Returns once every port answers, the `topics` created. On exit the
    broker gets SIGTERM (SIGKILL after `stop_timeout`) and the store is removed.

    Args:
        topics: ``NAME[:QUEUES[:TYPE]]`` specs (`serve --topic`): QUEUES defaults to 4, TYPE is one of
            NORMAL, FIFO, DELAY, TRANSACTION (RocketMQ 5's ``message.type``; left out, any type).
        grpc: serve RocketMQ 5 clients too.
        extra_args: more `serve` options, e.g. ``["--delay-levels", "1s 1s 1s"]``.
        log_level: serve's log level.
        start_timeout: seconds to wait for the ports to answer.
        stop_timeout: seconds to wait for the broker to stop on SIGTERM before it is killed.
        tmp_dir: where the temporary store directory is made (default: the system's).

    Raises:
        ValueError: a topic spec that does not parse, two different specs of one topic, or an address
            option (--namesrv, --listen, --grpc) in `extra_args`.
        BrokerError: the broker exited or did not answer within `start_timeout` (it is killed); it died
            before the block ended; or it did not stop within `stop_timeout` (it is killed). The message
            ends with its log's tail. Neither process nor directory is left behind.
    """
    specs = _parse_topics([topics] if isinstance(topics, str) else topics)
    extra_args = list(extra_args)
    for arg in extra_args:
        if arg.split("=", 1)[0] in _OWN_OPTIONS:
            raise ValueError(f"extra_args: {arg} is chosen here (free ports; grpc=False for no gRPC endpoint)")
    root = Path(tempfile.mkdtemp(prefix="rocketstore-broker-", dir=tmp_dir))
    serve: ServeProcess | None = None
    try:
        serve, broker = _start(root, specs, grpc, extra_args, log_level, start_timeout)
        try:
            yield broker
        except BaseException:
            _stop(serve, stop_timeout)  # the block's own error is the one to see
            raise
        problem = _stop(serve, stop_timeout)
        if problem:
            raise BrokerError(problem)
    finally:
        if serve is not None:
            serve.kill()  # when a stop was itself interrupted
        shutil.rmtree(root, ignore_errors=True)


def _parse_topics(topics: Iterable[str]) -> tuple[TopicSpec, ...]:
    specs: dict[str, TopicSpec] = {}
    for text in topics:
        if not isinstance(text, str):
            raise ValueError(f"topic spec {text!r} is not a string like 'orders:4:FIFO'")
        spec = TopicSpec.parse(text, DEFAULT_QUEUE_NUMS)
        if specs.get(spec.name, spec) != spec:
            raise ValueError(f"topic {spec.name!r} is declared twice: {specs[spec.name]} and {spec}")
        specs[spec.name] = spec
    return tuple(specs.values())


class ServeProcess:
    """`rocketstore serve` over the store at `store`, in a subprocess, on loopback ports chosen when it is
    made: a restart (`start` after `stop` or `kill`) keeps the store and every address, as clients see a
    broker come back.

    `rocketmq_broker` runs one over a temporary store; tests that stop, kill -9 and restart a broker over
    a store of their own use this class directly.

    Attributes:
        store: the store directory.
        log_path: serve's log (stdout and stderr), appended to by every start.
        args: the other `serve` options (anything but --namesrv, --listen and --grpc).
    """

    def __init__(self, store: str | os.PathLike[str], log_path: str | os.PathLike[str], args: Sequence[str] = (),
                 *, grpc: bool = True, one_port: bool = False, log_level: str = "INFO") -> None:
        """Choose the ports; nothing starts yet.

        Args:
            grpc: open the gRPC endpoint for RocketMQ 5 clients too.
            one_port: the name server answers on the broker's own port (serve's one-port mode).

        Raises:
            ValueError: an address option (--namesrv, --listen, --grpc) in `args`.
        """
        for arg in args:
            if arg.split("=", 1)[0] in _OWN_OPTIONS:
                raise ValueError(f"{arg} is chosen here (free ports; grpc=False for no gRPC endpoint)")
        self.store, self.log_path, self.args = Path(store), Path(log_path), tuple(args)
        ports = _free_ports(1 + (not one_port) + grpc)
        self.broker_port = ports[0]
        self.namesrv_port = ports[0] if one_port else ports[1]
        self.grpc_port: int | None = ports[-1] if grpc else None
        self.log_level = log_level
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def broker_addr(self) -> str:
        return f"127.0.0.1:{self.broker_port}"

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv_port}"

    @property
    def grpc_endpoint(self) -> str | None:
        return None if self.grpc_port is None else f"127.0.0.1:{self.grpc_port}"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def command(self) -> list[str]:
        """The command line `start` runs."""
        return [sys.executable, "-m", "rocketstore.broker", str(self.store), "--namesrv", self.namesrv_addr,
                "--listen", self.broker_addr, "--grpc", self.grpc_endpoint or "off", "--log-level", self.log_level,
                *self.args]

    def start(self, timeout: float = START_TIMEOUT_S) -> None:
        """Start serve and return once every port answers.

        Raises:
            BrokerError: already running; or serve exited or did not answer within `timeout` (it is
                killed). The message ends with its log's tail.
        """
        if self.alive():
            raise BrokerError(f"the broker over {self.store} is already running (pid {self.pid})")
        env = dict(os.environ)
        # a broker under test neither deletes its files nor refuses puts because the host's disk is full
        env.setdefault(DISK_CLEAN_FORCIBLY_ENV, "1.0")
        env.setdefault(DISK_FULL_ENV, "1.0")
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log,
                                          stderr=subprocess.STDOUT, env=env, preexec_fn=_parent_death_signal())
        ports = sorted({self.broker_port, self.namesrv_port, *([self.grpc_port] if self.grpc_port else [])})
        try:
            problem = _wait_ready(self._proc, ports, timeout)
        except BaseException:
            self.kill()
            raise
        if problem is not None:
            self.kill()
            raise BrokerError(f"{problem}: {' '.join(self.command())}\n--- broker log ---\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, and wait; the exit code (0 for a clean stop).

        Raises:
            BrokerError: not started; or serve did not stop within `timeout` (it is killed).
        """
        if self._proc is None:
            raise BrokerError(f"the broker over {self.store} was never started")
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise BrokerError(f"the broker did not stop within {timeout:g} s of SIGTERM and was killed\n"
                                  f"--- broker log ---\n{self.log_tail()}") from None
        return self._proc.returncode

    def kill(self) -> None:
        """SIGKILL (a crash: the store's abort file stays) and wait."""
        if self._proc is not None:
            _kill(self._proc)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_code(self) -> int | None:
        """The exit code once it has ended, else None."""
        return None if self._proc is None else self._proc.poll()

    def log_tail(self, chars: int = LOG_TAIL_CHARS) -> str:
        """The last `chars` characters of serve's log."""
        return _tail(self.log_path, chars)


def _start(root: Path, specs: tuple[TopicSpec, ...], grpc: bool, extra_args: Sequence[str], log_level: str,
           timeout: float) -> tuple[ServeProcess, RunningBroker]:
    """Start serve over a new store in `root`; on a port taken before serve bound it, again on others."""
    for attempt in range(1, _START_ATTEMPTS + 1):
        store, log_path = root / "store", root / "broker.log"
        shutil.rmtree(store, ignore_errors=True)
        log_path.unlink(missing_ok=True)
        declared = [arg for spec in specs for arg in ("--topic", str(spec))]
        serve = ServeProcess(store, log_path, [*SMALL_GEOMETRY, *declared, *extra_args], grpc=grpc,
                             log_level=log_level)
        try:
            serve.start(timeout)
        except BrokerError:
            if "address already in use" not in serve.log_tail().lower() or attempt == _START_ATTEMPTS:
                raise
            continue
        assert serve.pid is not None
        return serve, RunningBroker(serve.namesrv_addr, serve.broker_addr, serve.grpc_endpoint, store, log_path,
                                    serve.pid, specs)
    raise AssertionError("unreachable")


def _wait_ready(proc: subprocess.Popen[bytes], ports: list[int], timeout: float) -> str | None:
    """None once every port accepts a connection and the process still runs; else what went wrong."""
    deadline = time.monotonic() + timeout
    waiting = list(ports)
    while True:
        if proc.poll() is not None:
            return f"the broker exited with {proc.returncode} before it answered"
        waiting = [port for port in waiting if not _accepts(port)]
        if not waiting and proc.poll() is None:
            return None
        if time.monotonic() >= deadline:
            return f"the broker did not answer on port(s) {', '.join(map(str, waiting))} within {timeout:g} s"
        time.sleep(_POLL_S)


def _stop(serve: ServeProcess, timeout: float) -> str | None:
    """SIGTERM, wait, SIGKILL after `timeout`; None when it stopped with 0, else what went wrong."""
    if not serve.alive():
        return f"the broker died (exit code {serve.exit_code()}) before it was stopped\n--- broker log ---\n" \
               f"{serve.log_tail()}"
    try:
        code = serve.stop(timeout)
    except BrokerError as exc:
        return str(exc)
    if code != 0:
        return f"the broker stopped with exit code {code}\n--- broker log ---\n{serve.log_tail()}"
    return None


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _parent_death_signal() -> Callable[[], None] | None:
    """For the child before exec (Linux): ask for SIGTERM when the process that started it dies, so a
    test run killed outright leaves no broker behind. The C function is looked up here, in the parent:
    the child only calls it (nothing there may take a lock another thread of the parent held)."""
    if sys.platform != "linux":
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)

    def set_signal() -> None:
        prctl(pr_set_pdeathsig, sigterm)

    return set_signal


def _free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports nobody listens on now (all held open until all are chosen)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def _tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return ""
