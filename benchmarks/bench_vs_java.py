"""rocketstore beside the real RocketMQ 4.9.8 store (`rocketmq-java bench`), alternating, in one run.

Both sides do the work of `rocketmq-java bench STORE N BODY` (java-reference/src/Bench.java): N puts of
BODY bytes with one key each (`key-%08d`) to topic `P`, queues 0-3, one thread, ASYNC flush, RocketMQ's
default geometry; then every message read back 32 per get call and decoded; then 10,000 queries for
random keys after 2,000 warm-up queries. Rounds alternate Java and rocketstore (`--rounds`, default 2);
the report gives each side's median and range and the ratio of the medians.

`--recover` times recovery of one store written by the Java store and halted without shutdown, opened
in turn by `rocketmq-java recover` (load() + start() until dispatch caught up) and by
`MessageStore.open`, each on its own copy. `--written-by rocketstore` writes that store with rocketstore
instead (`--count` messages of `--body` bytes, the process ended without close()), which makes stores of
millions of messages practical; `--drop-queues` removes its consume queues and index first, so both
sides rebuild all of them from the commitlog:

    .venv/bin/python benchmarks/bench_vs_java.py --recover --written-by rocketstore --count 2000000 \
        --body 1024 --rounds 2 [--drop-queues] --save

`--arrow` sets the Arrow reader (`rocketstore.arrow.read`, every column of every message decoded into
record batches; with its default, one thread, and with `readThreads` a thread per CPU) beside the
reference's get + decode (the `get` figure of `rocketmq-java bench`), both in messages per second,
alternating in one run; the store it reads has the bench's shape (`--count` messages of `--body` bytes,
topic `P`, queues 0-3, one key each), written once before the rounds:

    .venv/bin/python benchmarks/bench_vs_java.py --arrow --count 10000000 --rounds 2 --save

The reference is looked for at `$ROCKETSTORE_JAVA_REFERENCE`, else `../shared/java-reference` beside the
repository; without it (or without `java`) the script says so and exits 0 without figures.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _harness import Report, parser, scratch
from rocketstore import Message, MessageStore, StoreConfig

REFERENCE_DIR = Path(os.environ.get("ROCKETSTORE_JAVA_REFERENCE",
                                    Path(__file__).resolve().parents[2] / "shared" / "java-reference"))
SCRIPT = REFERENCE_DIR / "rocketmq-java"
TOPIC = "P"
QUEUES = 4
WARMUP_QUERIES = 2_000
QUERIES = 10_000
BORN_HOST = "127.0.0.1:40000"


def _java_env(root: Path, java_opts: str) -> dict[str, str]:
    """The reference's environment: its JVM options, and its log in the scratch directory `root` (removed
    with it) instead of a file of its own in /tmp."""
    return dict(os.environ, JAVA_OPTS=java_opts, RMQ_LOG=str(root / "java.log"))


def java_bench(root: Path, count: int, body: int) -> dict[str, float]:
    store = root / "java"
    out = subprocess.run([str(SCRIPT), "bench", str(store), str(count), str(body)], check=True,
                         capture_output=True, text=True, env=_java_env(root, "-Xmx4g")).stdout
    shutil.rmtree(store, ignore_errors=True)
    line = next(s for s in out.splitlines() if s.startswith("{"))
    return {k: float(v) for k, v in json.loads(line).items() if k in ("put", "get", "q50", "q99")}


def python_bench(root: Path, count: int, body_size: int) -> dict[str, float]:
    """The same loop as Bench.java through the public API (a Message built per put, as Java builds one)."""
    path = root / "python"
    body = b"x" * body_size
    figures: dict[str, float] = {}
    with MessageStore.open(path, StoreConfig()) as store:
        put = store.put
        t0 = time.perf_counter()
        for i in range(count):
            if not put(Message(TOPIC, body, queue_id=i % QUEUES, keys=(f"key-{i:08d}",), born_host=BORN_HOST)).ok:
                raise RuntimeError(f"put {i} failed")
        figures["put"] = count / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        got = 0
        for q in range(QUEUES):
            offset = 0
            while True:
                result = store.get(TOPIC, q, offset, 32)
                if not result.messages:
                    break
                for m in result.messages:
                    got += len(m.body) > 0 and m.keys is not None
                offset = result.next_offset
        figures["get"] = count / (time.perf_counter() - t0)
        if got != count:
            raise RuntimeError(f"read back {got} of {count} messages")
        rnd = random.Random(1)
        for _ in range(WARMUP_QUERIES):
            store.query(TOPIC, f"key-{rnd.randrange(count):08d}")
        latencies = []
        clock = time.perf_counter_ns
        for _ in range(QUERIES):
            key = f"key-{rnd.randrange(count):08d}"
            t = clock()
            found = store.query(TOPIC, key)
            latencies.append(clock() - t)
            if not found:
                raise RuntimeError(f"query missed {key}")
        latencies.sort()
        figures["q50"] = latencies[len(latencies) // 2] / 1e3
        figures["q99"] = latencies[len(latencies) * 99 // 100] / 1e3
    shutil.rmtree(path, ignore_errors=True)
    return figures


def _spread(values: list[float]) -> str:
    return f"{statistics.median(values):>12,.2f} ({min(values):,.1f}-{max(values):,.1f})"


def compare_workload(report: Report, root: Path, count: int, body: int, rounds: int) -> None:
    java: dict[str, list[float]] = {}
    ours: dict[str, list[float]] = {}
    for n in range(rounds):
        for name, run, into in (("java", java_bench, java), ("rocketstore", python_bench, ours)):
            figures = run(root, count, body)
            report.line(f"# round {n + 1} {name}: " + json.dumps({k: round(v, 2) for k, v in figures.items()}))
            for key, value in figures.items():
                into.setdefault(key, []).append(value)
    report.line(f"{count:,} messages of {body} B, medians of {rounds} alternating rounds (range):")
    for key, unit, higher in (("put", "msg/s", True), ("get", "msg/s", True), ("q50", "us", False),
                              ("q99", "us", False)):
        j, o = statistics.median(java[key]), statistics.median(ours[key])
        report.figure(f"{key} rocketstore {_spread(ours[key])}", o, unit, f"java {_spread(java[key])}", j,
                      higher_is_better=higher)


def arrow_store(root: Path, count: int, body_size: int) -> Path:
    """A store of the bench's shape for the Arrow reader, written with put_batch."""
    path = root / "arrow"
    body = b"x" * body_size
    with MessageStore.open(path, StoreConfig()) as store:
        for start in range(0, count, 1000):
            batch = [Message(TOPIC, body, queue_id=i % QUEUES, keys=(f"key-{i:08d}",), born_host=BORN_HOST)
                     for i in range(start, min(start + 1000, count))]
            if not all(r.ok for r in store.put_batch(batch)):
                raise RuntimeError(f"put_batch at {start} failed")
    return path


def arrow_read(path: Path, count: int, threads: int = 1) -> tuple[float, float]:
    """Messages per second of a full `rocketstore.arrow.read` of the store at `path` with option
    `readThreads`: in all (its planning, a read-only open of the store,
    included) and after the planning."""
    import rocketstore.arrow

    options = {"readThreads": str(threads)}
    t0 = time.perf_counter()
    reader = rocketstore.arrow.read(str(path), options)
    t1 = time.perf_counter()
    rows = sum(batch.num_rows for batch in reader)
    t2 = time.perf_counter()
    if rows != count:
        raise RuntimeError(f"the Arrow reader read {rows} of {count} messages")
    return count / (t2 - t0), count / (t2 - t1)


def compare_arrow(report: Report, root: Path, count: int, body: int, rounds: int) -> None:
    """The Arrow reader (its default: one thread; and with a thread per CPU) beside the reference's get +
    decode, alternating."""
    import rocketstore.arrow  # noqa: F401  (its first import, pyarrow's included, is not the read's: the JVM's start is not Java's)

    store = arrow_store(root, count, body)
    os.sync()  # the rounds' fixture: the kernel writing its pages back while a round reads halved the first one
    java: list[float] = []
    ours: list[float] = []
    after: list[float] = []
    pooled: list[float] = []
    cpus = os.cpu_count() or 1
    for n in range(rounds):
        java.append(java_bench(root, count, body)["get"])
        if n % 2:  # the two reads take turns going first
            pooled.append(arrow_read(store, count, threads=cpus)[0])
        whole, read = arrow_read(store, count)
        ours.append(whole)
        after.append(read)
        if not n % 2:
            pooled.append(arrow_read(store, count, threads=cpus)[0])
        report.line(f"# round {n + 1}: java get {java[-1]:,.0f} msg/s, rocketstore.arrow.read {ours[-1]:,.0f} msg/s "
                    f"({after[-1]:,.0f} msg/s after its planning; readThreads={cpus}: {pooled[-1]:,.0f} msg/s)")
    report.line(f"{count:,} messages of {body} B, medians of {rounds} alternating rounds (range); java: "
                "get 32 a call + decode (rocketmq-java bench), rocketstore: rocketstore.arrow.read, every column, "
                f"one thread (the default) and readThreads={cpus}")
    report.figure(f"arrow read rocketstore {_spread(ours)}", statistics.median(ours), "msg/s",
                  f"java get {_spread(java)}", statistics.median(java), goal=">= 3x", higher_is_better=True)
    report.figure(f"after planning {_spread(after)}", statistics.median(after), "msg/s",
                  f"java get {_spread(java)}", statistics.median(java), goal=">= 3x", higher_is_better=True)
    report.figure(f"readThreads={cpus} {_spread(pooled)}", statistics.median(pooled), "msg/s",
                  f"java get {_spread(java)}", statistics.median(java), higher_is_better=True)


def java_crashed_store(root: Path, count: int, body: int) -> Path:
    """A store of `count` messages written by the Java store and halted without shutdown (abort file left)."""
    store = root / "crashed"
    env = _java_env(root, "-Xmx4g -DcommitlogFileSize=1073741824 -DconsumeQueueFileEntries=300000 "
                          "-DindexHashSlots=5000000 -DindexMaxEntries=20000000 -Dcrash=true -DcrashWaitMs=2000")
    subprocess.run([str(SCRIPT), "write", str(store), str(count), "rc", str(root / "write.json")], check=True,
                   capture_output=True, env=env)
    del body  # the harness's write mode picks its own body sizes (100 B to 3 KiB)
    return store


_CRASHING_WRITER = r"""
import os, sys
from rocketstore import Message, MessageStore, StoreConfig
store = MessageStore.open(sys.argv[1], StoreConfig())
count, body = int(sys.argv[2]), b"x" * int(sys.argv[3])
for start in range(0, count, 256):
    store.put_batch([Message(f"Topic{i % 4}", body, queue_id=i % 8, tags="TagA", keys=(f"key-{i}",))
                     for i in range(start, min(start + 256, count))])
os._exit(0)  # no close(): the abort file stays, as after a crash of the process
"""


def rocketstore_crashed_store(root: Path, count: int, body: int, drop_queues: bool) -> Path:
    """A store of `count` messages of `body` bytes written by rocketstore, whose process ended without
    close(); with `drop_queues` its consume queues and index are removed, so both stores rebuild all of
    them from the commitlog."""
    store = root / "crashed"
    subprocess.run([sys.executable, "-c", _CRASHING_WRITER, str(store), str(count), str(body)], check=True)
    if drop_queues:
        for name in ("consumequeue", "index"):
            shutil.rmtree(store / name)
    return store


def compare_recovery(report: Report, root: Path, count: int, rounds: int, source: str = "java", body: int = 1024,
                     drop_queues: bool = False) -> None:
    crashed = java_crashed_store(root, count, 0) if source == "java" else \
        rocketstore_crashed_store(root, count, body, drop_queues)
    java_s: list[float] = []
    end = 0
    ours_s: list[float] = []
    for _ in range(rounds):
        copy = root / "copy"
        shutil.copytree(crashed, copy)
        out = subprocess.run([str(SCRIPT), "recover", str(copy)], check=True, capture_output=True, text=True,
                             env=_java_env(root, "-Xmx4g")).stdout
        answer = json.loads(next(s for s in out.splitlines() if s.startswith("{")))
        java_s.append(float(answer["seconds"]))
        end = int(answer["maxPhyOffset"])
        shutil.rmtree(copy)
        shutil.copytree(crashed, copy)
        t0 = time.perf_counter()
        with MessageStore.open(copy, StoreConfig()) as store:
            ours_s.append(time.perf_counter() - t0)
            mode = store.recovery.mode.value
        shutil.rmtree(copy)
    report.line(f"recovery of a crashed store of {count:,} messages ({end / 2**20:,.1f} MiB of records) written "
                f"by {source}{', consume queues and index removed' if drop_queues else ''}, "
                f"rocketstore's mode: {mode}")
    report.figure(f"recovery rocketstore {_spread(ours_s)}", statistics.median(ours_s), "s",
                  f"java {_spread(java_s)}", statistics.median(java_s), higher_is_better=False)


def main() -> int:
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=1_000_000, help="messages per round (Java's JIT needs 1M+)")
    p.add_argument("--body", type=int, default=100, help="body size in bytes")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds per side")
    p.add_argument("--recover", action="store_true", help="time crash recovery instead of put/get/query")
    p.add_argument("--arrow", action="store_true",
                   help="the Arrow reader's full read beside the reference's get + decode")
    p.add_argument("--written-by", choices=["java", "rocketstore"], default="java",
                   help="--recover: which store writes the crashed store (rocketstore's writer is fast: "
                        "large stores; --body applies)")
    p.add_argument("--drop-queues", action="store_true",
                   help="--recover --written-by rocketstore: remove consumequeue/ and index/ first")
    args = p.parse_args()
    if not SCRIPT.is_file() or shutil.which("java") is None:
        print(f"bench_vs_java: the RocketMQ java-reference is not at {REFERENCE_DIR} (or java is missing); "
              "no figures (set ROCKETSTORE_JAVA_REFERENCE)")
        return 0
    report = Report("bench_vs_java.py", args)
    with scratch(args.dir) as root:
        if args.arrow:
            compare_arrow(report, root, args.count, args.body, args.rounds)
        elif args.recover:
            compare_recovery(report, root, args.count, args.rounds, args.written_by, args.body, args.drop_queues)
        else:
            compare_workload(report, root, args.count, args.body, args.rounds)
    report.save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
