"""Shared pieces of the benchmark scripts: message sets, the sqlite3 WAL baseline, timing, reporting.

The machine is shared and noisy, so every figure is printed next to a baseline measured in the same
run, and store and baseline runs are interleaved (`--repeat` rounds, the median of each is kept).
Nothing here is imported by the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from rocketstore import Message, MessageStore, StoreConfig, native

TOPIC = "BenchTopic"
QUEUES = 4
RESULTS_DIR = Path(__file__).resolve().parent / "results"

# RocketMQ's default geometry (1 GiB commitlog files, 5M slots x 20M entries per index file), as the
# reference Java figures were taken with; the files are sparse until written.
BENCH_CONFIG = StoreConfig()


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--repeat", type=int, default=3, help="interleaved rounds; the median is reported")
    p.add_argument("--dir", default=None, help="scratch directory (default: a temp dir, removed after)")
    p.add_argument("--save", action="store_true", help="append the report to benchmarks/results/<script>.txt")
    p.add_argument("--sqlite-synchronous", default="NORMAL", choices=["OFF", "NORMAL", "FULL"],
                   help="sqlite PRAGMA synchronous of the baseline (NORMAL: sqlite's usual WAL setting)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="wall time (default: what a producer sees) or process CPU time for the CPU-bound "
                        "figures (steadier on a loaded machine, but it leaves out the time sqlite waits on "
                        "its own I/O); disk-bound figures are always wall time")
    return p


@contextmanager
def scratch(base: str | None) -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="rsbench-", dir=base))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def body_of(size: int) -> bytes:
    return bytes((i * 7 + 13) % 251 for i in range(size))


def key_of(i: int) -> str:
    return f"order-{i:010d}"


def messages(count: int, body_size: int, start: int = 0) -> list[Message]:
    """`count` messages spread over QUEUES queues, one key each, one tag."""
    body = body_of(body_size)
    return [Message(TOPIC, body, queue_id=i % QUEUES, tags="TagA", keys=(key_of(i),))
            for i in range(start, start + count)]


def open_store(path: Path, config: StoreConfig = BENCH_CONFIG) -> MessageStore:
    return MessageStore.open(path, config)


# -- the sqlite3 baseline ------------------------------------------------------------------------------

SQLITE_SCHEMA = """
CREATE TABLE msg (
    phy INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    queue_offset INTEGER NOT NULL,
    tags TEXT,
    msg_key TEXT,
    store_ts INTEGER NOT NULL,
    body BLOB NOT NULL
);
CREATE INDEX msg_key_idx ON msg (msg_key);
CREATE UNIQUE INDEX msg_queue_idx ON msg (topic, queue_id, queue_offset);
"""
SQLITE_INSERT = "INSERT INTO msg VALUES (?, ?, ?, ?, ?, ?, ?, ?)"


SQLITE_SYNCHRONOUS = "NORMAL"


def open_sqlite(path: Path, synchronous: str | None = None) -> sqlite3.Connection:
    """sqlite3 in WAL mode, autocommit (every statement outside an explicit BEGIN is its own
    transaction). synchronous=NORMAL by default, sqlite's usual WAL setting: commits are not synced,
    checkpoints are, which is about what an async-flush store promises."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA synchronous={synchronous or SQLITE_SYNCHRONOUS}")
    conn.executescript(SQLITE_SCHEMA)
    return conn


class SqliteProducer:
    """Does what a put does: assign a queue offset, store the row, index the key."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.phy = 0
        self.queue_table: dict[tuple[str, int], int] = {}

    def _row(self, m: Message) -> tuple:
        qkey = (m.topic, m.queue_id)
        offset = self.queue_table.get(qkey, 0)
        self.queue_table[qkey] = offset + 1
        self.phy += 1
        return (self.phy, m.topic, m.queue_id, offset, m.tags, m.keys[0] if m.keys else None,
                time.time_ns() // 1_000_000, m.body)

    def put(self, m: Message) -> None:
        self.conn.execute(SQLITE_INSERT, self._row(m))

    def put_batch(self, batch: list[Message]) -> None:
        rows = [self._row(m) for m in batch]
        self.conn.execute("BEGIN")
        self.conn.executemany(SQLITE_INSERT, rows)
        self.conn.execute("COMMIT")


# -- timing and reporting ------------------------------------------------------------------------------

CLOCKS = {"cpu": (time.process_time, time.thread_time_ns), "wall": (time.perf_counter, time.perf_counter_ns)}
clock, clock_ns = CLOCKS["wall"]  # set from --clock by Report


def timed(fn: Callable[[], object]) -> float:
    """Seconds `fn` took on the chosen clock (process CPU time counts every thread of the process)."""
    t0 = clock()
    fn()
    return clock() - t0


def wall_timed(fn: Callable[[], object]) -> float:
    """Wall seconds of `fn` (for work that waits on the disk)."""
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def median(values: list[float]) -> float:
    return statistics.median(values)


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    idx = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[idx]


def rss_anon_bytes() -> int:
    """Anonymous resident memory (heap, not file-backed mappings) of this process."""
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    return -1


class Report:
    """Collects result lines, prints them as they come, and optionally saves them."""

    def __init__(self, script: str, args: argparse.Namespace) -> None:
        global SQLITE_SYNCHRONOUS, clock, clock_ns
        SQLITE_SYNCHRONOUS = getattr(args, "sqlite_synchronous", SQLITE_SYNCHRONOUS)
        clock, clock_ns = CLOCKS[getattr(args, "clock", "wall")]
        self.script = script
        self.args = args
        self.lines: list[str] = []
        self.records: list[dict] = []
        self.header = (f"$ python benchmarks/{script} {' '.join(sys.argv[1:])}\n"
                       f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, python "
                       f"{platform.python_version()}, {os.cpu_count()} cpus, {platform.platform()}, "
                       f"clock: {getattr(args, 'clock', 'wall')}, load average {os.getloadavg()[0]:.1f}, "
                       f"hot functions: {'compiled' if native.speedups is not None else 'pure Python'}")
        print(self.header, flush=True)

    def line(self, text: str) -> None:
        self.lines.append(text)
        print(text, flush=True)

    def figure(self, name: str, value: float, unit: str, baseline_name: str, baseline: float,
               goal: str = "", higher_is_better: bool = True) -> None:
        ratio = value / baseline if higher_is_better else baseline / value
        text = (f"{name:<38} {value:>14,.1f} {unit:<6} | {baseline_name} {baseline:>12,.1f} {unit:<6}"
                f"| ratio {ratio:6.2f}x" + (f"  (goal {goal})" if goal else ""))
        self.records.append({"name": name, "value": value, "unit": unit, "baseline": baseline_name,
                             "baseline_value": baseline, "ratio": ratio, "goal": goal})
        self.line(text)

    def save(self) -> None:
        if not self.args.save:
            return
        RESULTS_DIR.mkdir(exist_ok=True)
        out = RESULTS_DIR / (Path(self.script).stem + ".txt")
        with open(out, "a", encoding="utf-8") as fh:
            fh.write(self.header + "\n" + "\n".join(self.lines) + "\n")
            fh.write("# json " + json.dumps(self.records) + "\n\n")
