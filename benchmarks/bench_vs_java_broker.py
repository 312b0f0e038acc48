"""`rocketstore serve` against the real RocketMQ 4.9.8 broker, both driven by the real Java client.

Rounds alternate (Java broker, serve, Java broker, serve, ...); each starts its broker fresh on a new
temporary store of the same geometry (the java-broker launcher's: 64 MiB commitlog files, 30,000-entry
queues, an index of 50,000 slots / 200,000 entries; ASYNC flush on both), then runs, with the Java client
(benchmarks/java/BenchDriver.java, compiled here with javac against ../shared/java-broker/lib/*):

1. one producer thread: --warmup sync sends, then --messages timed sync sends of --size bytes;
2. --threads producer threads sharing one DefaultMQProducer: the same again;
3. a push consumer of a new group reading the whole topic back (every message of 1 and 2, warm-up
   included): messages / (consumer start to the last message), and messages / (first to last message),
   which leaves out the client's start-up (routes, heartbeat, rebalance, offsets);
4. the broker's resident memory (VmRSS, VmHWM and RssAnon from /proc) after all that. The Java broker runs
   with the launcher's heap (-Xms512m -Xmx1g); serve is one process that also answers as the name server
   (the Java name server is a process of its own, not counted).

Reported: the median and range over the rounds of send msg/s, p50 and p99 latency (each send's own, as the
client measures it) for 1 and N threads, consume msg/s and memory, with serve/Java ratios (for latency and
memory: Java's figure / serve's, so above 1 is better for serve in every row).

    .venv/bin/python benchmarks/bench_vs_java_broker.py --rounds 3 --messages 20000 --save

--save appends the report (command, date, machine, every round's raw summaries) to
benchmarks/results/bench_vs_java_broker.txt. Without java, javac or ../shared/java-broker the script says
so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.broker.broker_support import free_port  # noqa: E402
from tests.broker.differential import JAVA_BROKER_DIR, JavaBroker, missing_reason  # noqa: E402

from rocketstore import MessageStore, StoreConfig  # noqa: E402
from rocketstore.protocol.client import RemotingClient  # noqa: E402

DRIVER_SOURCE = Path(__file__).resolve().parent / "java" / "BenchDriver.java"
RESULTS = Path(__file__).resolve().parent / "results" / "bench_vs_java_broker.txt"
TOPIC = "BenchTopic"
# The java-broker launcher's broker.conf: mappedFileSizeCommitLog=64 MiB, mappedFileSizeConsumeQueue=600,000
# bytes (30,000 entries), maxHashSlotNum=50,000, maxIndexNum=200,000.
GEOMETRY = StoreConfig(commitlog_file_size=64 * 1024 * 1024, consume_queue_file_entries=30_000,
                       index_hash_slots=50_000, index_max_entries=200_000)
START_TIMEOUT_S = 60


# -- the Java client --------------------------------------------------------------------------------


class JavaClient:
    """BenchDriver compiled into `classes`, run with the java-broker launcher's client options."""

    def __init__(self, classes: Path, logs: Path) -> None:
        self.classes = classes
        self.logs = logs
        lib = JAVA_BROKER_DIR / "lib"
        subprocess.run(["javac", "-cp", f"{lib}/*", "-d", str(classes), str(DRIVER_SOURCE)], check=True)
        opens = [f"--add-opens=java.base/{pkg}=ALL-UNNAMED" for pkg in
                 ("java.nio", "sun.nio.ch", "java.lang", "java.util", "java.util.concurrent", "java.net")]
        self.java = ["java", "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC", *opens, "-Djava.net.preferIPv4Stack=true",
                     f"-Drmq.logdir={logs}", f"-Drocketmq.client.logRoot={logs}",
                     f"-Dlogback.configurationFile={lib}/conf/logback_client.xml",
                     "-cp", f"{lib}/*{os.pathsep}{classes}", "BenchDriver"]

    def run(self, *args: str, timeout: float) -> dict[str, float]:
        """The driver's summary; raises RuntimeError when it fails or prints none."""
        done = subprocess.run([*self.java, *args], capture_output=True, text=True, timeout=timeout)
        for line in reversed(done.stdout.splitlines()):
            if line.startswith('{"summary"'):
                summary: dict[str, float] = json.loads(line)["summary"]
                if done.returncode != 0:  # failed sends are counted and reported, not fatal
                    print(f"BenchDriver {args[0]} exited {done.returncode}: {summary}", flush=True)
                return summary
        raise RuntimeError(f"BenchDriver {args[0]} printed no summary (exit {done.returncode}):\n"
                           f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


# -- the two brokers ----------------------------------------------------------------------------------


def memory_of(pid: int) -> dict[str, float]:
    """VmRSS, VmHWM and RssAnon of `pid` in MiB."""
    wanted = {"VmRSS": "rss_mib", "VmHWM": "hwm_mib", "RssAnon": "rss_anon_mib"}
    out: dict[str, float] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            name = line.split(":", 1)[0]
            if name in wanted:
                out[wanted[name]] = int(line.split()[1]) / 1024
    return out


class ServeBroker:
    """`rocketstore serve` over a fresh store with GEOMETRY, name server on a port of its own."""

    def __init__(self, root: Path) -> None:
        store = root / "store"
        MessageStore.open(store, GEOMETRY).close()
        self.port, self.ns_port = free_port(), free_port()
        self.log_path = root / "serve.log"
        cmd = [sys.executable, "-m", "rocketstore.cli", "serve", str(store), "--listen", self.addr,
               "--namesrv", self.namesrv, "--grpc", "off", "--log-level", "warning"]
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._ready():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"serve did not start:\n{self.log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _ready(self) -> bool:
        try:
            for addr in (self.addr, self.namesrv):
                with RemotingClient(addr, timeout_s=2):
                    pass
        except OSError:
            return False
        return True

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


class JavaSide:
    """The java-broker launcher's name server and broker (tests/broker/differential.py's JavaBroker)."""

    def __init__(self, root: Path) -> None:
        self.broker = JavaBroker(root).start()
        self.namesrv = self.broker.namesrv
        self.pid = self.broker.procs[-1].pid  # the launcher execs java: this is the broker JVM

    def stop(self) -> None:
        self.broker.stop()


# -- one round -------------------------------------------------------------------------------------


def run_round(kind: str, work: Path, client: JavaClient, args: argparse.Namespace) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix=f"{kind}-", dir=work))
    broker: JavaSide | ServeBroker = JavaSide(root) if kind == "java" else ServeBroker(root)
    try:
        ns = broker.namesrv
        size, warm = str(args.size), str(args.warmup)
        one = client.run("producer", ns, TOPIC, str(args.messages), "--threads", "1", "--size", size,
                         "--warmup", warm, timeout=args.timeout)
        many = client.run("producer", ns, TOPIC, str(args.messages), "--threads", str(args.threads),
                          "--size", size, "--warmup", warm, timeout=args.timeout)
        total = 2 * args.warmup + int(one["sent"]) + int(many["sent"])
        consumed = client.run("consumer", ns, TOPIC, f"bench_consumer_{kind}", "--expect", str(total),
                              "--timeout", str(int(args.timeout)), timeout=args.timeout + 30)
        memory = memory_of(broker.pid)
    finally:
        broker.stop()
        shutil.rmtree(root, ignore_errors=True)
    return {"kind": kind, "one": one, "many": many, "consume": consumed, "memory": memory}


# -- report -------------------------------------------------------------------------------------------

Pick = Callable[[dict[str, object]], float]
ROWS: list[tuple[str, str, Pick, bool]] = [
    # (label, unit, how to read it from a round, higher is better)
    ("send, 1 thread", "msg/s", lambda r: r["one"]["msgs_per_s"], True),  # type: ignore[index]
    ("send p50, 1 thread", "ms", lambda r: r["one"]["p50_ms"], False),  # type: ignore[index]
    ("send p90, 1 thread", "ms", lambda r: r["one"]["p90_ms"], False),  # type: ignore[index]
    ("send p99, 1 thread", "ms", lambda r: r["one"]["p99_ms"], False),  # type: ignore[index]
    ("send mean, 1 thread", "ms", lambda r: r["one"]["mean_ms"], False),  # type: ignore[index]
    ("send, {threads} threads", "msg/s", lambda r: r["many"]["msgs_per_s"], True),  # type: ignore[index]
    ("send p50, {threads} threads", "ms", lambda r: r["many"]["p50_ms"], False),  # type: ignore[index]
    ("send p99, {threads} threads", "ms", lambda r: r["many"]["p99_ms"], False),  # type: ignore[index]
    ("consume (whole topic)", "msg/s", lambda r: r["consume"]["msgs_per_s"], True),  # type: ignore[index]
    ("consume, first to last message", "msg/s",
     lambda r: r["consume"]["received"] / r["consume"]["first_to_last_s"], True),  # type: ignore[index]
    ("failed sends, 1 + {threads} threads", "", lambda r: r["one"]["failed"] + r["many"]["failed"],  # type: ignore[index]
     False),
    ("broker VmRSS after the run", "MiB", lambda r: r["memory"]["rss_mib"], False),  # type: ignore[index]
    ("broker VmHWM (peak RSS)", "MiB", lambda r: r["memory"]["hwm_mib"], False),  # type: ignore[index]
    ("broker RssAnon", "MiB", lambda r: r["memory"]["rss_anon_mib"], False),  # type: ignore[index]
]


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3f}" if value < 10 else f"{value:.1f}"


def report(rounds: list[dict[str, object]], args: argparse.Namespace) -> list[str]:
    lines = [f"{'figure':<30} {'serve median (range)':>30} {'Java median (range)':>30} {'serve/Java':>10}"]
    for label, unit, pick, higher in ROWS:
        sides = {}
        for kind in ("serve", "java"):
            values = [pick(r) for r in rounds if r["kind"] == kind]
            sides[kind] = (statistics.median(values), min(values), max(values))
        serve, java = sides["serve"][0], sides["java"][0]
        ratio = (serve / java if higher else java / serve) if serve and java else float("nan")
        cells = [f"{_fmt(m)} ({_fmt(lo)}-{_fmt(hi)}) {unit}" for m, lo, hi in (sides["serve"], sides["java"])]
        lines.append(f"{label.format(threads=args.threads):<30} {cells[0]:>30} {cells[1]:>30} {ratio:>9.2f}x")
    lines.append("ratios: serve/Java for rates, Java/serve for latency and memory (above 1: serve better)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each broker, alternating")
    parser.add_argument("--messages", type=int, default=20_000, help="timed sends of each producer phase")
    parser.add_argument("--warmup", type=int, default=5_000, help="untimed sends before each producer phase")
    parser.add_argument("--threads", type=int, default=8, help="producer threads of the second phase")
    parser.add_argument("--size", type=int, default=256, help="body bytes")
    parser.add_argument("--timeout", type=float, default=600, help="bound of each client run, in seconds")
    parser.add_argument("--save", action="store_true", help=f"append the report to {RESULTS.relative_to(ROOT)}")
    args = parser.parse_args()
    reason = missing_reason() or (None if shutil.which("javac") else "javac is not on PATH")
    if reason:
        print(f"skipped: {reason}")
        return
    header = [f"$ python benchmarks/bench_vs_java_broker.py {' '.join(sys.argv[1:])}",
              f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, commit {_commit()}, python "
              f"{platform.python_version()}, {os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}"]
    print("\n".join(header), flush=True)
    rounds: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="bench-vs-java-broker-") as tmp:
        work = Path(tmp)
        client = JavaClient(work / "classes", work / "client-logs")
        for i in range(args.rounds):
            for kind in ("java", "serve"):
                result = run_round(kind, work, client, args)
                rounds.append(result)
                print(f"round {i + 1} {kind}: {json.dumps({k: v for k, v in result.items() if k != 'kind'})}",
                      flush=True)
    lines = report(rounds, args)
    print("\n".join(lines))
    if args.save:
        with open(RESULTS, "a", encoding="utf-8") as fh:
            fh.write("\n".join(header + lines) + f"\n# load average after: {os.getloadavg()[0]:.1f}\n")
            fh.write("# rounds " + json.dumps(rounds) + "\n\n")


def _commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "?"


if __name__ == "__main__":
    main()
