"""Spark batch read throughput of the `rocketstore` source on a store of at least 1 GiB.

Measured in the same run, on the same files:

* `spark scan=queues`   - `spark.read.format("rocketstore")` (through the consume queues), every column
                          materialised by Spark's `noop` sink;
* `spark scan=commitlog`- the same over the commitlog in log order;
* `one process`         - the same work without Spark: one Python process opens the store read-only and
                          turns `scan()` into the same Arrow record batches;
* `binaryFile ceiling`  - `spark.read.format("binaryFile")` over the commitlog files (raw I/O through
                          Spark, no decoding): the most any Spark reader of these files can do;
* `Arrow intake ceiling`- a Python data source (defined here) that decodes nothing: it replays record
                          batches the rocketstore reader made of the store's first 256 MiB, saved in an
                          Arrow IPC file, until as many record bytes went by as the store holds: the most
                          a Python data source yielding this schema's batches can do, whatever its decoding
                          costs (its time is scaled to the store's bytes).

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
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rocketstore import Message, MessageStore, StoreConfig

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
        def __init__(self, options: dict[str, str]) -> None:
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
    from rocketstore.spark.columnar import batches

    with MessageStore.open(root, read_only=True) as store:
        return sum(b.num_rows for b in batches(store.scan(), str(root)))


def main() -> None:
    args = base_parser(__doc__.splitlines()[0]).parse_args()

    def run(root: Path, notes: list[str]) -> None:
        nbytes, messages = store_extent(root)
        open_seconds = timed(lambda: MessageStore.open(root, read_only=True).close())
        notes = [*notes, f"one read-only MessageStore.open (done once by every read's planning): {open_seconds:.2f} s"]
        spark = spark_session(args.master)
        spark.dataSource.register(replay_source())
        replay = Path(tempfile.mkdtemp(prefix="rsbench-replay-", dir=args.dir)) / "batches.arrow"
        held = replay_file(root, replay)
        times = max(1, round(nbytes / (held * REPLAY_PARTITIONS)))
        replay_scale = nbytes / (held * REPLAY_PARTITIONS * times)  # its seconds, as if it had moved nbytes
        notes = [*notes, f"Arrow intake ceiling: {REPLAY_PARTITIONS} partitions x {times} x {held / 2**20:.0f} MiB "
                         f"of record bytes in batches, time scaled by {replay_scale:.3f}"]
        noop = {"format": "noop", "mode": "overwrite"}
        cases: dict[str, Callable[[], Any]] = {
            "spark scan=queues": lambda: spark.read.format("rocketstore").load(str(root)).write.save(**noop),
            "spark scan=commitlog": lambda: spark.read.format("rocketstore").option("scan", "commitlog")
            .load(str(root)).write.save(**noop),
            "one process (no Spark)": lambda: one_process_read(root),
            "binaryFile ceiling": lambda: binary_file_ceiling(spark, root),
            "Arrow intake ceiling": lambda: spark.read.format("rocketstore_replay").option("path", str(replay))
            .option("times", str(times)).load().write.save(**noop),
        }
        warm_up(spark, root)
        results: dict[str, list[float]] = {name: [] for name in cases}
        peaks: dict[str, tuple[float, float]] = {}
        for _ in range(args.repeat):
            for name, work in cases.items():
                if name.startswith("spark "):
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
        partitions = f"{args.master}, default options (bytesPerPartition 64 MiB, messagesPerPartition 200000)"
        memory = [f"driver during {name}: Python peak RSS {py:.0f} MiB, JVM heap kept after GC {jvm:.0f} MiB"
                  for name, (py, jvm) in peaks.items()]
        text = report("bench_spark_read", list(results.items()), nbytes, messages, [*notes, partitions, *memory])
        print(text)
        if args.save:
            save("bench_spark_read", text)

    with_store(args, run)


if __name__ == "__main__":
    main()
