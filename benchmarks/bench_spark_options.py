"""Spark full reads of one store with different read options, beside the Arrow intake ceiling, alternating.

Each round reads the store once per case (`spark.read.format("rocketstore")` with the case's options,
every column to Spark's `noop` sink) and once through the Arrow intake ceiling of `bench_spark_read.py`
(a Python source replaying the reader's own batches), the order of the cases rotated by one each round so
that no case always runs first. A case is `default` or comma-separated options, `name=value,...`.

    python benchmarks/bench_spark_options.py --store STORE default readAhead=2 --rounds 4 --save
    python benchmarks/bench_spark_options.py --store STORE bytesPerPartition=67108864 default --rounds 2

Beside each case's time it reports the machine's busy CPU time over the case (core-seconds from
/proc/stat, other processes included: run it on a quiet machine), the ceiling's scaled as its time is:
what a case spends beyond the ceiling's CPU, against what the ceiling's rate leaves for 0.9x of it when
the intake keeps every core busy.

With `--task-cost`, it times instead a source that reads nothing (one row per partition) with 20 and 160
partitions: the fixed cost of a task of a Python data source.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_spark_read as spark_read


def _options(spec: str) -> dict[str, str]:
    return {} if spec == "default" else dict(kv.split("=", 1) for kv in spec.split(","))


def read_cases(spark: Any, root: Path, specs: list[str]) -> tuple[dict[str, Callable[[], Any]], float, Path]:
    """The cases, the ceiling's first; the scale of the ceiling's time to the store's bytes; its replay
    file."""
    ceiling, scale, replay, _ = spark_read.intake_ceiling(spark, root)
    noop = {"format": "noop", "mode": "overwrite"}
    cases: dict[str, Callable[[], Any]] = {"Arrow intake ceiling": ceiling}
    for spec in specs:
        cases[spec] = _read(spark, root, _options(spec), noop)
    return cases, scale, replay


def _read(spark: Any, root: Path, options: dict[str, str], sink: dict[str, str]) -> Callable[[], Any]:
    return lambda: spark.read.format("rocketstore").options(**options).load(str(root)).write.save(**sink)


def busy_seconds() -> tuple[float, float]:
    """The machine's busy and total CPU time so far, in core-seconds (the `cpu` line of /proc/stat)."""
    with open("/proc/stat", encoding="ascii") as fh:
        ticks = [int(v) for v in fh.readline().split()[1:]]
    hertz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - ticks[3] - ticks[4]) / hertz, sum(ticks) / hertz  # idle and iowait are not busy


def task_cost(spark: Any, rounds: int) -> list[str]:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Nothing(DataSourceReader):
        def __init__(self, options: Mapping[str, str]) -> None:
            self.n = int(options["n"])

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(i) for i in range(self.n)]

        def read(self, partition: InputPartition) -> Iterator[Any]:
            import pyarrow as pa

            yield pa.RecordBatch.from_pydict({"x": [partition.value]})

    class NothingSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return "rocketstore_bench_nothing"

        def schema(self) -> str:
            return "x long"

        def reader(self, schema: Any) -> DataSourceReader:
            return Nothing(self.options)

    spark.dataSource.register(NothingSource)
    lines: list[str] = []
    seconds: dict[int, list[float]] = {20: [], 160: []}
    for _ in range(rounds + 1):  # the first round starts the workers and is not counted
        for n in seconds:
            t = time.perf_counter()
            spark.read.format("rocketstore_bench_nothing").option("n", str(n)).load().write.format("noop") \
                .mode("overwrite").save()
            seconds[n].append(time.perf_counter() - t)
    for n, values in seconds.items():
        lines.append(f"{n:>4} partitions of one row: {statistics.median(values[1:]):.2f} s (rounds "
                     + ", ".join(f"{v:.2f}" for v in values[1:]) + ")")
    per_task = (statistics.median(seconds[160][1:]) - statistics.median(seconds[20][1:])) / 140
    lines.append(f"a task's fixed cost: {per_task * 1e3:.0f} ms of wall time on `local[2]` "
                 f"({2 * per_task * 1e3:.0f} ms of a core)")
    return lines


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("cases", nargs="*", default=["default"], help="`default` or name=value,... options")
    p.add_argument("--store", help="an existing store (needed unless --task-cost)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--task-cost", action="store_true")
    p.add_argument("--save", action="store_true")
    args = p.parse_args()
    spark = spark_read.spark_session(args.master)
    if args.task_cost:
        lines = task_cost(spark, args.rounds)
    else:
        if not args.store:
            p.error("--store is needed")
        root = Path(args.store)
        cases, scale, replay = read_cases(spark, root, args.cases)
        spark_read.warm_up(spark, root)
        names = list(cases)
        results: dict[str, list[float]] = {name: [] for name in names}
        cpu: dict[str, list[tuple[float, float]]] = {name: [] for name in names}  # (busy core-s, utilization)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                busy, total = busy_seconds()
                t = time.perf_counter()
                cases[name]()
                seconds = time.perf_counter() - t
                busy_after, total_after = busy_seconds()
                factor = scale if name == names[0] else 1.0
                results[name].append(seconds * factor)
                cpu[name].append(((busy_after - busy) * factor, (busy_after - busy) / (total_after - total)))
        shutil.rmtree(replay.parent, ignore_errors=True)
        ceiling = statistics.median(results[names[0]])
        ceiling_cpu = statistics.median(b for b, _ in cpu[names[0]])
        lines = [f"{name:<32} median {statistics.median(v):6.2f} s, {ceiling / statistics.median(v):.2f}x the "
                 f"ceiling's rate; rounds " + ", ".join(f"{x:.2f}" for x in v) for name, v in results.items()]
        lines += [f"{name:<32} busy CPU median {statistics.median(b for b, _ in v):6.1f} core-s "
                  f"({statistics.median(b for b, _ in v) - ceiling_cpu:+.1f} beyond the ceiling's), the cores "
                  f"{statistics.median(u for _, u in v):.0%} busy; rounds "
                  + ", ".join(f"{b:.1f}" for b, _ in v) for name, v in cpu.items()]
        lines.append(f"0.9x the ceiling's rate with every core busy leaves {ceiling_cpu * (1 / 0.9 - 1):.1f} core-s "
                     f"beyond the ceiling's CPU")
    spark.stop()
    text = "\n".join([f"bench_spark_options {' '.join(sys.argv[1:])}", f"{args.master}", *lines])
    print(text)
    if args.save:
        spark_read.save("bench_spark_options", text)


if __name__ == "__main__":
    main()
