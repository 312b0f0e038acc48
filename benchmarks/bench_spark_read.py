"""Spark batch read throughput of the `rocketstore` source on a store of at least 1 GiB.

Measured in the same run, on the same files:

* `spark default`      - `spark.read.format("rocketstore")` with no option (the code under test picks
                          the scan mode), every column materialised by Spark's `noop` sink;
* `spark readAhead=2`  - the same with option `readAhead=2`;
* `spark scan=queues`   - the same through the consume queues, queue by queue (option `scan=queues`);
* `spark scan=commitlog`- the same over the commitlog in log order, every record (option `scan=commitlog`);
* `Arrow reader, one process` - the same work without Spark: `rocketstore.arrow.read` of the store in
                          this process, the read core Spark's tasks run, on one core;
* `binaryFile ceiling`  - `spark.read.format("binaryFile")` over the commitlog files (raw I/O through
                          Spark, no decoding): the most any Spark reader of these files can do;
* `Arrow intake ceiling`- a Python data source (defined here) that decodes nothing: it replays record
                          batches the rocketstore reader made of the store's first 256 MiB, saved in an
                          Arrow IPC file, until as many record bytes went by as the store holds: the most
                          a Python data source yielding this schema's batches can do, whatever its decoding
                          costs (its time is scaled to the store's bytes).

With `--queries`, each round also times, on the same store: one topic of the four (option `topics`; its
time beside the full scan's, as a ratio to its share of the messages), a store-time window of 1 % of the
store's time span (`startingTimestamp` / `endingTimestamp`), a msgId lookup (`where msgId = ...` with
`filterPushdown`; its planning, done on its own by `rocketstore.scan.plan.plan_partitions`, and the
Arrow reader's lookup after its planning), and the same count by
topic through `rocketstore sql` and through a Spark job, each a new process (start-up included).

Throughput is commitlog bytes (max - min physical offset) and messages per second. For each Spark case
the report also gives the driver's peak resident memory during it (Linux: the peak is reset through
/proc/PID/clear_refs before the case and read from VmHWM after) of the Python driver process, which
plans the read, and the driver JVM's heap still in use after a full GC once the case is over (what the
driver keeps; its peak RSS says little in `local[N]`, where the executors' threads share the JVM and the
heap grows lazily towards `spark.driver.memory`). The store is built
by the script (messages of `--body` bytes over 4 topics x 8 queues, one key each) unless `--store`
names an existing one.

    python benchmarks/bench_spark_read.py                          # builds ~1.1 GiB in a temp dir
    python benchmarks/bench_spark_read.py --store /data/store --repeat 3
    python benchmarks/bench_spark_read.py --size-mib 10400 --body 512 --queries --repeat 2 --save
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.scan.options import DEFAULT_BYTES_PER_PARTITION, DEFAULT_MESSAGES_PER_PARTITION

TOPICS = ("BenchA", "BenchB", "BenchC", "BenchD")
QUEUES = 8
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def base_parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--store", default=None, help="an existing store to use instead of building one")
    p.add_argument("--size-mib", type=int, default=1100, help="commitlog size of the built store")
    p.add_argument("--body", type=int, default=1024, help="body bytes per message of the built store")
    p.add_argument("--commitlog-file-size", type=int, default=128 * 1024 * 1024)
    p.add_argument("--dir", default=None, help="scratch directory (default: a temp dir, removed after)")
    p.add_argument("--repeat", type=int, default=1, help="interleaved rounds; the median is reported")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--save", action="store_true", help="append the report to benchmarks/results/<script>.txt")
    return p


def bench_config(args: argparse.Namespace) -> StoreConfig:
    return StoreConfig(commitlog_file_size=args.commitlog_file_size)


def build_store(root: Path, config: StoreConfig, size_mib: int, body_size: int) -> float:
    """Fill a new store to `size_mib` MiB of commitlog; returns the seconds it took."""
    body = bytes((i * 7 + 13) % 251 for i in range(body_size))
    target = size_mib * 1024 * 1024
    began = time.perf_counter()
    n = 0
    with MessageStore.open(root, config) as store:
        while store.max_phy_offset < target:
            batch = [
                Message(TOPICS[i % len(TOPICS)], body, queue_id=(i // len(TOPICS)) % QUEUES, tags="TagA",
                        keys=(f"order-{i:010d}",))
                for i in range(n, n + 1000)
            ]
            store.put_batch(batch)
            n += len(batch)
    return time.perf_counter() - began


def store_extent(root: Path) -> tuple[int, int]:
    """(commitlog bytes, messages) of the store."""
    with MessageStore.open(root, read_only=True) as store:
        total = sum(store.max_offset(t, q) - store.min_offset(t, q) for t, qs in store.queues().items() for q in qs)
        return store.max_phy_offset - store.min_phy_offset, total


def spark_session(master: str) -> Any:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName("rocketstore-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "6g")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(work: Callable[[], Any]) -> float:
    began = time.perf_counter()
    work()
    return time.perf_counter() - began


def _peak_reset(pid: int) -> None:
    Path(f"/proc/{pid}/clear_refs").write_text("5", encoding="ascii")  # resets VmHWM to the current RSS


def _peak_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def driver_memory(spark: Any, work: Callable[[], Any]) -> tuple[float, float, float]:
    """(seconds, peak RSS MiB of the Python driver during `work`, MiB of the driver JVM's heap in use
    after a full GC once it is over)."""
    _peak_reset(os.getpid())
    seconds = timed(work)
    jvm = spark.sparkContext._jvm
    jvm.java.lang.System.gc()
    runtime = jvm.java.lang.Runtime.getRuntime()
    return seconds, _peak_mib(os.getpid()), (runtime.totalMemory() - runtime.freeMemory()) / 2**20


def warm_up(spark: Any, root: Path) -> None:
    """Start what every case needs before any is timed: the JVM's code paths and page cache
    (`binaryFile` over the files) and the Python workers with their imports (a read of the first 100
    messages of each queue, one task per queue, so that every worker starts). Without the second,
    whichever `rocketstore` case ran first paid the workers' start (at 600 MiB: 9.4 s against 4.6 s
    for the same read run again)."""
    import json

    binary_file_ceiling(spark, root)
    with MessageStore.open(root, read_only=True) as store:
        ending = {topic: {str(q): store.min_offset(topic, q) + 100 for q in queue_ids}
                  for topic, queue_ids in store.queues().items()}
    (spark.read.format("rocketstore").option("endingOffsets", json.dumps(ending)).load(str(root))
     .write.format("noop").mode("overwrite").save())


def binary_file_ceiling(spark: Any, root: Path) -> None:
    spark.read.format("binaryFile").load(str(root / "commitlog")).write.format("noop").mode("overwrite").save()


REPLAY_MIB = 256
REPLAY_PARTITIONS = 8


def replay_file(root: Path, path: Path) -> int:
    """The rocketstore reader's record batches of the store's first REPLAY_MIB MiB, written to the Arrow
    IPC file `path`; the record bytes they hold."""
    import pyarrow as pa

    from rocketstore.spark.columnar import batches

    held = 0
    with MessageStore.open(root, read_only=True) as store, pa.OSFile(str(path), "wb") as sink:
        writer = None
        for batch in batches(store.scan(), str(root)):
            writer = writer or pa.ipc.new_file(sink, batch.schema)
            writer.write_batch(batch)
            held += int(pa.compute.sum(batch.column("storeSize")).as_py())
            if held >= REPLAY_MIB * 2**20:
                break
        if writer is not None:
            writer.close()
    return held


def replay_source() -> type:
    """The `rocketstore_replay` data source: options `path` (an Arrow IPC file), `times` (how often each
    of the REPLAY_PARTITIONS partitions yields all of its batches)."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from rocketstore.spark.schema import MESSAGE_SCHEMA

    class Replay(DataSourceReader):
        def __init__(self, options: Mapping[str, str]) -> None:
            self.path, self.times = options["path"], int(options["times"])

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(REPLAY_PARTITIONS)]

        def read(self, partition: InputPartition) -> Any:
            import pyarrow as pa

            with pa.memory_map(self.path) as source:
                reader = pa.ipc.open_file(source)
                kept = [reader.get_batch(i) for i in range(reader.num_record_batches)]
                for _ in range(self.times):
                    yield from kept

    class ReplaySource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketstore_replay"

        def schema(self) -> Any:
            return MESSAGE_SCHEMA

        def reader(self, schema: Any) -> DataSourceReader:
            return Replay(self.options)

    return ReplaySource


def intake_ceiling(spark: Any, root: Path, scratch: str | None = None) -> tuple[Callable[[], Any], float, Path, str]:
    """The Arrow intake ceiling's case over the store at `root`: the work (replaying the reader's batches
    of the store's first REPLAY_MIB MiB until as many record bytes went by as the store holds), the scale
    of its seconds to the store's bytes, the replay file (its folder to delete after) and a note."""
    spark.dataSource.register(replay_source())
    replay = Path(tempfile.mkdtemp(prefix="rsbench-replay-", dir=scratch)) / "batches.arrow"
    held = replay_file(root, replay)
    nbytes, _ = store_extent(root)
    times = max(1, round(nbytes / (held * REPLAY_PARTITIONS)))
    scale = nbytes / (held * REPLAY_PARTITIONS * times)  # its seconds, as if it had moved nbytes

    def work() -> None:
        spark.read.format("rocketstore_replay").option("path", str(replay)).option("times", str(times)).load() \
            .write.format("noop").mode("overwrite").save()

    note = (f"Arrow intake ceiling: {REPLAY_PARTITIONS} partitions x {times} x {held / 2**20:.0f} MiB of record "
            f"bytes in batches, time scaled by {scale:.3f}")
    return work, scale, replay, note


def report(title: str, rows: list[tuple[str, list[float]]], nbytes: int, messages: int, notes: list[str]) -> str:
    lines = [title, f"store: {nbytes / 2**20:.0f} MiB of commitlog, {messages:,} messages", *notes,
             f"{'case':<26}{'seconds':>10}{'MB/s':>10}{'msgs/s':>14}"]
    for name, seconds in rows:
        s = statistics.median(seconds)
        lines.append(f"{name:<26}{s:>10.2f}{nbytes / 1e6 / s:>10.1f}{messages / s:>14,.0f}")
    return "\n".join(lines)


def save(script: str, text: str) -> None:
    RESULTS_DIR.mkdir(exist_ok=True)
    with open(RESULTS_DIR / f"{script}.txt", "a", encoding="utf-8") as fh:
        fh.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')} {os.cpu_count()} cores\n{text}\n\n")


def with_store(args: argparse.Namespace, body: Callable[[Path, list[str]], None]) -> None:
    """Run `body` on `--store` or on a freshly built store in a scratch directory."""
    if args.store:
        body(Path(args.store), [f"store given: {args.store}"])
        return
    scratch = Path(tempfile.mkdtemp(prefix="rsbench-spark-", dir=args.dir))
    try:
        root = scratch / "store"
        seconds = build_store(root, bench_config(args), args.size_mib, args.body)
        body(root, [f"built in {seconds:.1f} s ({args.body} B bodies, {len(TOPICS)} topics x {QUEUES} queues, "
                    f"{args.commitlog_file_size // 2**20} MiB commitlog files)"])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def one_process_read(root: Path) -> int:
    """Every message through the read core Spark's tasks run, in this process (`rocketstore.arrow`)."""
    import rocketstore.arrow

    return sum(b.num_rows for b in rocketstore.arrow.read(str(root)))


COUNT_BY_TOPIC = "SELECT topic, count(*) AS n FROM messages GROUP BY topic ORDER BY topic"

_SPARK_COUNT = r"""
import os, sys
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
from pyspark.sql import SparkSession
spark = (SparkSession.builder.master(sys.argv[2]).config("spark.ui.enabled", "false")
         .config("spark.sql.shuffle.partitions", "4")
        .config("spark.ui.showConsoleProgress", "false").getOrCreate())
spark.read.format("rocketstore").load(sys.argv[1]).createOrReplaceTempView("messages")
print(spark.sql(sys.argv[3]).collect())
spark.stop()
"""


def time_span(root: Path) -> tuple[int, int]:
    """(first, last) store time of the store's messages, from the ends of its queues."""
    first, last = [], []
    with MessageStore.open(root, read_only=True) as store:
        for topic, queue_ids in store.queues().items():
            for q in queue_ids:
                first += [m.store_timestamp for m in store.get(topic, q, store.min_offset(topic, q), 1).messages]
                last += [m.store_timestamp for m in store.get(topic, q, store.max_offset(topic, q) - 1, 1).messages]
    return min(first), max(last)


def middle_msg_id(root: Path) -> str:
    with MessageStore.open(root, read_only=True) as store:
        topic = TOPICS[1]
        middle = (store.min_offset(topic, 3) + store.max_offset(topic, 3)) // 2
        return store.get(topic, 3, middle, 1).messages[0].msg_id


def subprocess_seconds(argv: list[str], expect: str) -> float:
    """Wall seconds of a command run to its end (start-up included); checks its output holds `expect`."""
    import subprocess

    began = time.perf_counter()
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    seconds = time.perf_counter() - began
    if expect not in out:
        raise RuntimeError(f"{argv[:3]}: {expect!r} not in its output {out[:400]!r}")
    return seconds


def query_cases(spark: Any, root: Path, master: str) -> tuple[dict[str, Callable[[], Any]], list[str], float]:
    """The `--queries` cases, the notes that say what they read, and the share of the messages the topic
    case reads."""
    import rocketstore.arrow
    from rocketstore.scan.filters import Prune
    from rocketstore.scan.options import ReadOptions
    from rocketstore.scan.plan import plan_partitions

    lo, hi = time_span(root)
    w_lo = lo + (hi - lo) // 2
    w_hi = w_lo + max(1, (hi - lo) // 100)
    msg_id = middle_msg_id(root)
    noop = {"format": "noop", "mode": "overwrite"}
    window_rows = sum(b.num_rows for b in rocketstore.arrow.read(
        str(root), {"startingTimestamp": w_lo, "endingTimestamp": w_hi}))
    with MessageStore.open(root, read_only=True) as store:
        per_topic = {t: sum(store.max_offset(t, q) - store.min_offset(t, q) for q in qs)
                     for t, qs in store.queues().items()}
    share = per_topic[TOPICS[0]] / sum(per_topic.values())

    def lookup_spark() -> None:
        spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
        try:
            rows = (spark.read.format("rocketstore").option("filterPushdown", "true").load(str(root))
                    .where(f"msgId = '{msg_id}'").collect())
        finally:
            spark.conf.set("spark.sql.python.filterPushdown.enabled", "false")
        if len(rows) != 1:
            raise RuntimeError(f"msgId {msg_id}: {len(rows)} rows")

    def plan_lookup() -> None:
        opts = ReadOptions.parse({"path": str(root)})
        plan_partitions(opts, Prune.of([("msgId", "=", msg_id)]))

    arrow_reader: list[Any] = []

    def lookup_arrow_plan() -> None:
        arrow_reader.append(rocketstore.arrow.read(str(root), filters=[("msgId", "=", msg_id)]))

    def lookup_arrow_read() -> None:
        if arrow_reader.pop().read_all().num_rows != 1:
            raise RuntimeError(f"msgId {msg_id}: not one row")

    rocketstore_cli = [sys.executable, "-m", "rocketstore.cli", "sql", str(root), COUNT_BY_TOPIC]
    spark_job = [sys.executable, "-c", _SPARK_COUNT, str(root), master, COUNT_BY_TOPIC]
    cases: dict[str, Callable[[], Any]] = {
        "spark one topic of four": lambda: spark.read.format("rocketstore").option("topics", TOPICS[0])
        .load(str(root)).write.save(**noop),
        "spark 1% time window": lambda: spark.read.format("rocketstore").option("startingTimestamp", str(w_lo))
        .option("endingTimestamp", str(w_hi)).load(str(root)).write.save(**noop),
        "spark msgId lookup": lookup_spark,
        "plan of the msgId lookup": plan_lookup,
        "arrow msgId: plan": lookup_arrow_plan,
        "arrow msgId: after plan": lookup_arrow_read,
        "sql count by topic (process)": lambda: subprocess_seconds(rocketstore_cli, f"{per_topic[TOPICS[0]]}"),
        "spark count by topic (process)": lambda: subprocess_seconds(spark_job, f"n={per_topic[TOPICS[0]]}"),
    }
    notes = [f"one topic of four: {TOPICS[0]}, {share:.1%} of the messages",
             f"1% time window: store times [{w_lo}, {w_hi}) of [{lo}, {hi}], {window_rows:,} messages "
             f"({window_rows / sum(per_topic.values()):.2%})",
             f"msgId lookup: {msg_id}; count by topic: {COUNT_BY_TOPIC}"]
    return cases, notes, share


FULL_SCANS = ("spark default", "spark readAhead=2", "spark scan=queues", "spark scan=commitlog")


def ratios(results: dict[str, list[float]], share: float) -> list[str]:
    """The goals' ratios from the medians."""
    med = {name: statistics.median(values) for name, values in results.items() if values}
    full = med["spark default"]
    ceiling = med["Arrow intake ceiling"]
    lines = ["full scans as a share of the Arrow intake ceiling's rate (goal >= 0.9): "
             + ", ".join(f"{name} {ceiling / med[name]:.2f}x" for name in FULL_SCANS),
             f"spark default / binaryFile ceiling: {med['binaryFile ceiling'] / full:.2f}x of binaryFile's rate"]
    if "spark one topic of four" in med:
        lines += [
            f"one topic of four: {med['spark one topic of four'] / full:.3f} of the full scan's time for "
            f"{share:.3f} of the messages: {med['spark one topic of four'] / full / share:.2f}x its share "
            f"(goal <= 1.3)",
            f"1% time window: {med['spark 1% time window'] / full:.2%} of the full scan's time (goal <= 5%)",
            f"msgId lookup: Spark {med['spark msgId lookup']:.2f} s in all, of which planning "
            f"{med['plan of the msgId lookup']:.2f} s; Arrow reader {med['arrow msgId: after plan']:.3f} s after "
            f"its planning ({med['arrow msgId: plan']:.2f} s) (goal < 1 s after planning)",
            f"count by topic, start-up included: rocketstore sql {med['sql count by topic (process)']:.1f} s, "
            f"Spark {med['spark count by topic (process)']:.1f} s",
        ]
    return lines


def main() -> None:
    p = base_parser(__doc__.splitlines()[0])
    p.add_argument("--queries", action="store_true", help="also the topic, window, msgId and sql cases")
    p.add_argument("--label", default="", help="a line naming the code measured, first in the report")
    args = p.parse_args()

    def run(root: Path, notes: list[str]) -> None:
        nbytes, messages = store_extent(root)
        open_seconds = timed(lambda: MessageStore.open(root, read_only=True).close())
        notes = [*notes, f"one read-only MessageStore.open (done once by every read's planning): {open_seconds:.2f} s"]
        spark = spark_session(args.master)
        ceiling, replay_scale, replay, ceiling_note = intake_ceiling(spark, root, args.dir)
        notes = [*notes, ceiling_note]
        noop = {"format": "noop", "mode": "overwrite"}
        cases: dict[str, Callable[[], Any]] = {
            "spark default": lambda: spark.read.format("rocketstore").load(str(root)).write.save(**noop),
            "spark readAhead=2": lambda: spark.read.format("rocketstore").option("readAhead", "2").load(str(root))
            .write.save(**noop),
            "spark scan=queues": lambda: spark.read.format("rocketstore").option("scan", "queues")
            .load(str(root)).write.save(**noop),
            "spark scan=commitlog": lambda: spark.read.format("rocketstore").option("scan", "commitlog")
            .load(str(root)).write.save(**noop),
            "Arrow reader, one process": lambda: one_process_read(root),
            "binaryFile ceiling": lambda: binary_file_ceiling(spark, root),
            "Arrow intake ceiling": ceiling,
        }
        share = 1.0
        if args.queries:
            more, more_notes, share = query_cases(spark, root, args.master)
            cases.update(more)
            notes = [*notes, *more_notes]
        warm_up(spark, root)
        results: dict[str, list[float]] = {name: [] for name in cases}
        peaks: dict[str, tuple[float, float]] = {}
        names = list(cases)
        for round_no in range(args.repeat):
            # each round starts one case later, so that no case is always the first after the warm-up
            for name in names[round_no % len(names):] + names[:round_no % len(names)]:
                work = cases[name]
                if name in FULL_SCANS:
                    seconds, python_mib, jvm_mib = driver_memory(spark, work)
                    old = peaks.get(name, (0.0, 0.0))
                    peaks[name] = (max(old[0], python_mib), max(old[1], jvm_mib))
                    results[name].append(seconds)
                elif name == "Arrow intake ceiling":
                    results[name].append(timed(work) * replay_scale)
                else:
                    results[name].append(timed(work))
        spark.stop()
        shutil.rmtree(replay.parent, ignore_errors=True)
        partitions = (f"{args.master}, default options (bytesPerPartition {DEFAULT_BYTES_PER_PARTITION // 2**20} MiB, "
                      f"messagesPerPartition {DEFAULT_MESSAGES_PER_PARTITION})")
        memory = [f"driver during {name}: Python peak RSS {py:.0f} MiB, JVM heap kept after GC {jvm:.0f} MiB"
                  for name, (py, jvm) in peaks.items()]
        title = f"bench_spark_read {args.label}".strip()
        text = report(title, list(results.items()), nbytes, messages, [*notes, partitions, *memory])
        text += "\n" + "\n".join(ratios(results, share))
        print(text)
        if args.save:
            save("bench_spark_read", text)

    with_store(args, run)


if __name__ == "__main__":
    main()
