"""Store maintenance as Spark jobs: `rebuild` (consume queues and index from the commitlog) and `export`.

Rebuild, in three steps:

1. *Dispatch* (parallel, one task per commitlog range split at record starts): each task packs its
   range's records with the store's own catch-up dispatch (`services.dispatch.packed_from`, the
   compiled `dispatch_packed`, which recovery and the put left behind use): each queue's entries as
   runs of consecutive queue offsets in consume-queue units, and the index keys (UNIQ_KEY, then each
   KEYS token) in log order with their index hashes.
2. *Consume queues* (parallel by queue): the runs of one queue from every range, in queue-offset
   order, are written through the store's own `log.consume_queue.ConsumeQueue.put_units`, so the
   files are the ones the store writes itself, byte for byte (pre-fill of a queue starting past 0
   included).
3. *Index* (parallel by index file): the driver numbers the keys from the per-range key counts; index
   file k takes keys `[k*(maxEntries-1), (k+1)*(maxEntries-1))`, exactly what sequential building would
   put in it, starts with the header values the previous file ended with (as `IndexService` does for a
   file created after a full one), and is filled through `log.index_file.IndexFile.put_keys`.

The new files are written next to the store (`<store>/rebuild-<id>/`) and swapped in at the end; the
job holds the store's lock throughout, so no writer can open the store while it runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore._readable import human_bytes, human_seconds
from rocketstore.format.consume_queue import UNIT_SIZE
from rocketstore.format.index import KEY_LAYOUT
from rocketstore.format.store_dirs import CONSUME_QUEUE_DIR, INDEX_DIR
from rocketstore.spark._stores import LogReader, commitlog_extent, record_starts, store_config
from rocketstore.spark.progress import Progress, StageCallback

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rocketstore import StoreConfig

__all__ = ["ExportReport", "RebuildReport", "export", "main", "rebuild", "summary"]

_DEFAULT_RANGE_BYTES = 64 * 1024 * 1024

_KEY_ROW = [("hash", "<i8"), ("phy", "<i8"), ("ts", "<i8")]
"""An index key between the job's stages (not a store layout): its index hash, its record's physical
offset and store timestamp, little-endian whatever the executor's byte order."""
_KEY_ROW_SIZE = 24


@dataclass(frozen=True)
class RebuildReport:
    """What a rebuild wrote."""

    ranges: int
    """Commitlog ranges dispatched in parallel."""
    queues: int
    """Consume queues written."""
    queue_entries: int
    """Consume-queue entries written."""
    index_files: int
    """Index files written."""
    index_keys: int
    """Index keys written."""
    seconds: float
    """Wall time of the job."""
    store: str = ""
    """The store's root (absolute)."""
    commitlog_bytes: int = 0
    """Bytes of commitlog read (from the first record kept to the end of the log)."""
    queue_files: int = 0
    """Consume-queue files written."""
    queue_bytes: int = 0
    """Bytes of the consume-queue files written."""
    index_bytes: int = 0
    """Bytes of the index files written."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        """What was rebuilt, in a few lines for a reader."""
        return (f"rebuilt {self.store} from its commitlog ({human_bytes(self.commitlog_bytes)} read as "
                f"{_plural(self.ranges, 'range')}) in {human_seconds(self.seconds)}:\n"
                f"  consume queues: {_plural(self.queues, 'queue')}, {_plural(self.queue_entries, 'entry', 'entries')}"
                f" in {_plural(self.queue_files, 'file')} ({human_bytes(self.queue_bytes)}) under "
                f"{os.path.join(self.store, CONSUME_QUEUE_DIR)}\n"
                f"  index: {_plural(self.index_keys, 'key')} in {_plural(self.index_files, 'file')} "
                f"({human_bytes(self.index_bytes)}) under {os.path.join(self.store, INDEX_DIR)}")


@dataclass(frozen=True)
class ExportReport:
    """What an export wrote."""

    store: str
    out: str
    """The output directory (absolute)."""
    format: str
    partition_by: tuple[str, ...]
    rows: int
    """Rows in the output, counted by reading it back."""
    files: int
    """Data files written (Spark's `_SUCCESS` and checksum files left out)."""
    bytes: int
    """Bytes of those files."""
    partitions: int
    """Leaf partition folders (`topic=TopicA/...`); 0 without `partition_by`."""
    seconds: float
    """Wall time of the job."""

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["partition_by"] = list(self.partition_by)
        return document

    def describe(self) -> str:
        """What was exported, in a few lines for a reader."""
        where = (f", {_plural(self.partitions, 'partition')} by {', '.join(self.partition_by)}"
                 if self.partition_by else "")
        return (f"exported {_plural(self.rows, 'message')} of {self.store} in {human_seconds(self.seconds)}:\n"
                f"  {_plural(self.files, f'{self.format} file')} ({human_bytes(self.bytes)}{where}) under {self.out}")


def _plural(count: int, noun: str, plural: str | None = None) -> str:
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def _tree_files(root: str) -> tuple[int, int, int]:
    """(files, bytes, leaf folders) under `root`, leaving out Spark's bookkeeping (`_SUCCESS`, `.crc`
    and other names starting with `_` or `.`)."""
    files = size = leaves = 0
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        if folder != root and not dirs:
            leaves += 1
        for name in names:
            if not name.startswith(("_", ".")):
                files += 1
                size += os.path.getsize(os.path.join(folder, name))
    return files, size, leaves


@dataclass(frozen=True)
class _RangeOutput:
    """Stage 1's result for one commitlog range."""

    range_no: int
    queues: dict[tuple[str, int], list[tuple[int, bytes]]]
    """Per queue, its runs of entries: (first queue offset, consume-queue units), ascending."""
    keys: bytes
    """The range's index keys as `_KEY_ROW`s, in log order."""
    tail: bool
    """An indexed record without keys follows the range's last key (or, without keys, exists):
    sequential building opens the next index file for it even when it adds nothing."""

    @property
    def key_count(self) -> int:
        return len(self.keys) // _KEY_ROW_SIZE


def _range_counts(out: _RangeOutput) -> tuple[int, int, bool]:
    return out.range_no, out.key_count, out.tail


def _dispatch_range(root: str, config: StoreConfig, planned: tuple[int, int, int]) -> _RangeOutput:
    """Pack one commitlog range's queue entries and index keys, as the store's catch-up packs them."""
    import numpy as np

    from rocketstore.store.files import DISPATCH_BATCH, packed_from

    range_no, start, end = planned
    queues: dict[tuple[str, int], list[tuple[int, bytes]]] = {}
    key_blobs: list[bytes] = []
    key_times: list[int] = []
    key_counts: list[int] = []
    tail = False
    with LogReader(root, config) as log:
        for packed in packed_from(log.commitlog, start, config.delay_level_millis(), DISPATCH_BATCH, 0, 0, True,
                                  end):
            for key, first_offset, units, _, _ in packed.runs:
                runs = queues.setdefault(key, [])
                if runs and runs[-1][0] + len(runs[-1][1]) // UNIT_SIZE == first_offset:
                    runs[-1] = (runs[-1][0], runs[-1][1] + bytes(units))
                else:
                    runs.append((first_offset, bytes(units)))
            for store_timestamp, keys, ends_keyless, _ in packed.groups:
                tail = ends_keyless
                if keys:
                    key_blobs.append(bytes(keys))
                    key_times.append(store_timestamp)
                    key_counts.append(len(keys) // KEY_LAYOUT.size)
    pairs = np.frombuffer(b"".join(key_blobs), dtype=np.int64).reshape(-1, 2)
    rows = np.empty(len(pairs), dtype=_KEY_ROW)
    rows["hash"], rows["phy"] = pairs[:, 0], pairs[:, 1]
    rows["ts"] = np.repeat(np.array(key_times, dtype=np.int64), key_counts)
    return _RangeOutput(range_no, queues, rows.tobytes(), tail)


def _queue_items(out: _RangeOutput) -> list[tuple[tuple[str, int], list[tuple[int, bytes]]]]:
    return list(out.queues.items())


def _write_queue(staging: str, config: StoreConfig,
                 item: tuple[tuple[str, int], Iterable[list[tuple[int, bytes]]]]) -> int:
    """Write one consume queue from the runs of its entries each range packed; returns the number of entries."""
    from rocketstore.store.files import ConsumeQueue

    queue, per_range = item
    runs = sorted(run for runs in per_range for run in runs)
    cq = ConsumeQueue(Path(staging), queue[0], queue[1], config.consume_queue_file_entries)
    try:
        cq.load()
        for first_offset, units in runs:
            cq.put_units(first_offset, units)
        cq.flush()
    finally:
        cq.close()
    return sum(len(units) // UNIT_SIZE for _, units in runs)


@dataclass(frozen=True)
class _IndexSlice:
    """Keys `[lo, hi)` (range-local numbers) of one range that belong to index file `file_no`."""

    file_no: int
    range_no: int
    keys: bytes


def _index_slices(firsts: dict[int, int], per_file: int, out: _RangeOutput) -> Iterator[tuple[int, _IndexSlice]]:
    """Cut one range's keys (global numbers from `firsts[range]`) at index-file boundaries."""
    first_key = firsts[out.range_no]
    count = out.key_count
    g = first_key
    while g < first_key + count:
        file_no = g // per_file
        stop = min((file_no + 1) * per_file, first_key + count)
        lo, hi = (g - first_key) * _KEY_ROW_SIZE, (stop - first_key) * _KEY_ROW_SIZE
        yield file_no, _IndexSlice(file_no, out.range_no, out.keys[lo:hi])
        g = stop


def _keys_by_time(rows: bytes) -> Iterator[tuple[bytes, int]]:
    """The `_KEY_ROW` rows of `rows` as runs of `IndexFile.put_keys`'s (index hash, phy offset) pairs,
    one run per stretch of rows with the same store timestamp, in order."""
    import numpy as np

    table = np.frombuffer(rows, dtype=_KEY_ROW)
    if not len(table):
        return
    pairs = np.empty((len(table), 2), dtype=np.int64)
    pairs[:, 0], pairs[:, 1] = table["hash"], table["phy"]
    times = table["ts"].astype(np.int64)
    cuts = [0, *(np.flatnonzero(times[1:] != times[:-1]) + 1).tolist(), len(table)]
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        yield pairs[lo:hi].tobytes(), int(times[lo])


def _write_index_group(names: dict[int, str], config: StoreConfig, seeds: dict[int, tuple[int, int]],
                       item: tuple[int, Iterable[_IndexSlice]]) -> int:
    file_no, slices = item
    return _write_index_file(names[file_no], config, seeds.get(file_no), slices)


def _write_index_file(path: str, config: StoreConfig, seed: tuple[int, int] | None,
                      slices: Iterable[_IndexSlice]) -> int:
    """Write one index file from its keys in log order; `seed` = (endTimestamp, endPhyOffset) of the
    previous file, which a file created after a full one starts with."""
    from rocketstore.store.files import IndexFile

    index = IndexFile(Path(path), config.index_hash_slots, config.index_max_entries, create=True)
    written = 0
    try:
        if seed is not None:
            end_timestamp, end_phy_offset = seed
            if end_phy_offset > 0:
                index.header.begin_phy_offset = index.header.end_phy_offset = end_phy_offset
            if end_timestamp > 0:
                index.header.begin_timestamp = index.header.end_timestamp = end_timestamp
            index.write_header()
        for piece in sorted(slices, key=lambda s: s.range_no):
            for keys, store_timestamp in _keys_by_time(piece.keys):  # put_keys takes one store time a call
                added = index.put_keys(keys, store_timestamp)
                written += added
                if added < len(keys) // 16:
                    raise RuntimeError(f"{path}: index file full after {written} keys")
        index.flush()
    finally:
        index.close()
    return written


def _plan_ranges(root: str, config: StoreConfig | None,
                 range_bytes: int) -> tuple[StoreConfig, list[tuple[int, int, int]]]:
    """The store's config and its commitlog cut into numbered ranges `(no, start, end)`."""
    resolved = config if config is not None else store_config(root)
    lo, hi = commitlog_extent(root, resolved)
    if hi <= lo:
        return resolved, []
    starts = record_starts(root, resolved.commitlog_file_size, lo, hi, range_bytes)
    return resolved, [(i, a, b) for i, (a, b) in enumerate(zip(starts, [*starts[1:], hi], strict=True))]


def _ignore_stage(name: str) -> None:
    """The stage callback when nobody listens."""


def _swap_in(root: str, staging: str) -> None:
    """Replace `consumequeue/` and `index/` with the rebuilt ones."""
    for name in (CONSUME_QUEUE_DIR, INDEX_DIR):
        live, new, old = os.path.join(root, name), os.path.join(staging, name), os.path.join(staging, f"old-{name}")
        if os.path.exists(live):
            os.rename(live, old)
        if os.path.exists(new):
            os.rename(new, live)
    shutil.rmtree(staging, ignore_errors=True)


def rebuild(spark: SparkSession, store_path: str | os.PathLike[str], config: StoreConfig | None = None, *,
            range_bytes: int = _DEFAULT_RANGE_BYTES, progress: StageCallback | None = None) -> RebuildReport:
    """Rebuild `consumequeue/` and `index/` of a store from its commitlog, in parallel.

    Args:
        spark: the Spark session to run on (the store path must be reachable by the driver and executors).
        store_path: the store root.
        config: the store's geometry; None reads the store's `config/rocketstore.json` (or defaults).
        range_bytes: commitlog bytes per dispatch task.
        progress: called with the name of each step as it starts (`Progress.stage`).

    Raises:
        rocketstore.errors.StoreLockedError: a writer (or a broker) has the store open.
        rocketstore.errors.InvalidArgumentError: `spark` is a Spark Connect session (the rebuild hands
            commitlog ranges to the executors as an RDD, which Spark Connect does not offer).
    """
    from rocketstore.errors import InvalidArgumentError
    from rocketstore.format.filenames import index_file_name
    from rocketstore.store.files import StoreLock

    if _is_connect(spark):
        raise InvalidArgumentError("rebuild needs a classic Spark session (SparkSession.builder.master(...), or "
                                   "`rocketstore rebuild --master ...`): it runs as RDD tasks, which Spark "
                                   "Connect does not offer")
    stage = progress or _ignore_stage
    began = time.monotonic()
    root = os.path.abspath(os.fspath(store_path))
    lock = StoreLock(Path(root))
    lock.acquire()
    staging = os.path.join(root, f"rebuild-{uuid.uuid4().hex[:12]}")
    try:
        stage("planning: cutting the commitlog into ranges")
        cfg, ranges = _plan_ranges(root, config, range_bytes)
        sc = spark.sparkContext
        stage(f"reading the commitlog ({len(ranges)} {'range' if len(ranges) == 1 else 'ranges'})")
        dispatched = sc.parallelize(ranges, max(len(ranges), 1)).map(partial(_dispatch_range, root, cfg)).cache()
        counts = sorted(dispatched.map(_range_counts).collect())
        os.makedirs(staging)
        stage("writing consume queues")
        queue_stats = _write_queues(dispatched, staging, cfg, sc.defaultParallelism)
        stage("writing index files")
        index_files, index_keys = _write_index(dispatched, staging, cfg, counts, index_file_name)
        dispatched.unpersist()
        queue_files, queue_bytes, _ = _tree_files(os.path.join(staging, CONSUME_QUEUE_DIR))
        _, index_bytes, _ = _tree_files(os.path.join(staging, INDEX_DIR))
        stage("swapping the new files in")
        _swap_in(root, staging)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        lock.release()
    read = ranges[-1][2] - ranges[0][1] if ranges else 0
    return RebuildReport(len(ranges), queue_stats[0], queue_stats[1], index_files, index_keys,
                         time.monotonic() - began, root, read, queue_files, queue_bytes, index_bytes)


def _is_connect(spark: Any) -> bool:
    """Whether `spark` is a Spark Connect (remote) session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _write_queues(dispatched: Any, staging: str, cfg: StoreConfig, parallelism: int) -> tuple[int, int]:
    per_queue = dispatched.flatMap(_queue_items).groupByKey(max(parallelism, 1))
    written = per_queue.map(partial(_write_queue, staging, cfg)).collect()
    return len(written), sum(written)


def _write_index(dispatched: Any, staging: str, cfg: StoreConfig, counts: Sequence[tuple[int, int, bool]],
                 name_for: Any) -> tuple[int, int]:
    per_file = cfg.index_max_entries - 1
    firsts: dict[int, int] = {}
    total = 0
    trailing = False  # an indexed record without keys after the last key
    for range_no, count, tail in counts:
        firsts[range_no] = total
        total += count
        trailing = tail if count else trailing or tail
    files = -(-total // per_file)
    empty_last = trailing and total % per_file == 0  # the store opens a file it puts nothing into
    if files == 0 and not empty_last:
        return 0, 0
    seeds = _index_seeds(dispatched, firsts, per_file, files + 1)
    index_dir = os.path.join(staging, INDEX_DIR)
    os.makedirs(index_dir)
    now = int(time.time() * 1000)
    names = {f: os.path.join(index_dir, name_for(now + f)) for f in range(files + 1)}
    written = (
        dispatched.flatMap(partial(_index_slices, firsts, per_file))
        .groupByKey(max(files, 1))
        .map(partial(_write_index_group, names, cfg, seeds))
        .collect()
    )
    if empty_last:
        written.append(_write_index_file(names[files], cfg, seeds.get(files), ()))
    return len(written), sum(written)


def _index_seeds(dispatched: Any, firsts: dict[int, int], per_file: int, files: int) -> dict[int, tuple[int, int]]:
    """(endTimestamp, endPhyOffset) of the last key of each full file, keyed by the next file."""
    wanted = {(f + 1) * per_file - 1: f + 1 for f in range(files - 1)}
    return dict(dispatched.flatMap(partial(_seed_keys, wanted, firsts)).collect())


def _seed_keys(wanted: dict[int, int], firsts: dict[int, int], out: _RangeOutput) -> list[tuple[int, tuple[int, int]]]:
    """(next file, (store time, physical offset)) of the wanted key numbers this range holds."""
    first = firsts[out.range_no]
    import numpy as np

    table = np.frombuffer(out.keys, dtype=_KEY_ROW)
    return [(next_file, (int(table["ts"][g - first]), int(table["phy"][g - first])))
            for g, next_file in wanted.items() if first <= g < first + out.key_count]


def export(spark: SparkSession, store_path: str | os.PathLike[str], out: str | os.PathLike[str],
           format: str = "parquet", partition_by: Sequence[str] = ("topic",), *,
           mode: str = "error", options: dict[str, str] | None = None,
           progress: StageCallback | None = None) -> ExportReport:
    """Write every message of a store (read through its consume queues) as a Spark table; returns what
    was written (the rows counted by reading the output back, its files and bytes when `out` is a local
    path).

    Args:
        spark: the Spark session to run on.
        store_path: the store root (or several, comma-separated).
        out: the output directory.
        format: any Spark file format (`parquet`, `json`, `orc`, ...).
        partition_by: columns to partition the output by.
        mode: Spark save mode (`error`, `append`, `overwrite`, `ignore`; Spark Connect knows no
            `errorifexists`, classic Spark takes both).
        options: further read options of the `rocketstore` source (`topics`, `scan`, geometry ...).
        progress: called with the name of each step as it starts (`Progress.stage`).

    Raises:
        ValueError: a bad read option.
    """
    stage = progress or _ignore_stage
    began = time.monotonic()
    stage("planning: listing the store's queues")
    reader = spark.read.format("rocketstore")
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    df = reader.load(os.fspath(store_path))
    writer = df.write.format(format).mode(mode)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    stage(f"reading messages and writing {format} files")
    writer.save(os.fspath(out))
    stage("counting the rows written")
    rows = spark.read.format(format).load(os.fspath(out)).count()
    target = os.fspath(out) if "://" in os.fspath(out) else os.path.abspath(os.fspath(out))
    files, size, leaves = _tree_files(target) if os.path.isdir(target) else (0, 0, 0)  # a local path
    return ExportReport(os.fspath(store_path), target, format, tuple(partition_by), rows, files, size,
                        leaves if partition_by else 0, time.monotonic() - began)


SUMMARY_SQL = """
SELECT broker, topic, queueId,
       count(*)                AS messages,
       min(queueOffset)        AS minQueueOffset,
       max(queueOffset) + 1    AS maxQueueOffset,
       sum(storeSize)          AS storeBytes,
       sum(length(body))       AS bodyBytes,
       min(storeTimestamp)     AS firstStoreTimestamp,
       max(storeTimestamp)     AS lastStoreTimestamp
FROM {view}
GROUP BY broker, topic, queueId
ORDER BY broker, topic, queueId
"""


def summary(spark: SparkSession, store_path: str | os.PathLike[str], *,
            options: dict[str, str] | None = None) -> DataFrame:
    """A Spark SQL summary per store, topic and queue: message count, queue-offset range, bytes and
    store-time range (columns as in `SUMMARY_SQL`).

    Raises:
        ValueError: a bad read option.
    """
    reader = spark.read.format("rocketstore")
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    view = f"rocketstore_summary_{uuid.uuid4().hex[:8]}"
    reader.load(os.fspath(store_path)).createOrReplaceTempView(view)
    return spark.sql(SUMMARY_SQL.format(view=view))


_GEOMETRY_FLAGS = ("commitlog-file-size", "consume-queue-file-entries", "index-hash-slots", "index-max-entries")


def _geometry_args(args: argparse.Namespace) -> dict[str, int]:
    names = (flag.replace("-", "_") for flag in _GEOMETRY_FLAGS)
    return {name: value for name in names if (value := getattr(args, name)) is not None}


def _config_from_args(args: argparse.Namespace) -> StoreConfig | None:
    from rocketstore import StoreConfig

    geometry = _geometry_args(args)
    return StoreConfig().with_geometry(geometry) if geometry else None


def _read_options(args: argparse.Namespace) -> dict[str, str]:
    """The geometry flags as read options of the `rocketstore` source."""
    camel = {"commitlog_file_size": "commitlogFileSize", "consume_queue_file_entries": "consumeQueueFileEntries",
             "index_hash_slots": "indexHashSlots", "index_max_entries": "indexMaxEntries"}
    return {camel[name]: str(value) for name, value in _geometry_args(args).items()}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: `python -m rocketstore.spark.jobs {rebuild,export,summary} STORE ...` (spark-submit
    too). Prints what was done at the end (`--json`: as one JSON document); while it runs, one progress
    line on stderr when stderr is a terminal."""
    parser = argparse.ArgumentParser(prog="python -m rocketstore.spark.jobs", description=__doc__.splitlines()[0])
    parser.add_argument("--master", default=None, help="Spark master when not run by spark-submit")
    common = argparse.ArgumentParser(add_help=False)
    for flag in _GEOMETRY_FLAGS:
        common.add_argument(f"--{flag}", type=int, dest=flag.replace("-", "_"),
                            help="store geometry (default: the store's config/rocketstore.json)")
    common.add_argument("--json", action="store_true", help="print the result as one JSON document")
    sub = parser.add_subparsers(dest="command", required=True)
    p_rebuild = sub.add_parser("rebuild", parents=[common],
                               help="rebuild consumequeue/ and index/ from the commitlog")
    p_rebuild.add_argument("store")
    p_export = sub.add_parser("export", parents=[common], help="write a store's messages as files")
    p_export.add_argument("store")
    p_export.add_argument("out")
    p_export.add_argument("--format", default="parquet")
    p_export.add_argument("--partition-by", default="topic", help="comma-separated columns ('' for none)")
    p_export.add_argument("--mode", default="error")
    p_summary = sub.add_parser("summary", parents=[common],
                               help="print messages, offsets, bytes and times per topic and queue")
    p_summary.add_argument("store")
    args = parser.parse_args(argv)

    import tempfile

    from pyspark.sql import SparkSession

    from rocketstore.spark.progress import quiet_jvm_launch, quiet_jvm_options

    builder = (SparkSession.builder.appName(f"rocketstore-{args.command}")
               .config("spark.ui.showConsoleProgress", "false")  # the progress line says what runs
               .config("spark.sql.python.filterPushdown.enabled", "true"))  # the source's option filterPushdown
    if args.master:
        # A Spark session this command starts itself: its Python workers are this interpreter unless told.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(args.master)
    with tempfile.TemporaryDirectory(prefix="rocketstore-jobs-") as scratch, Progress(args.command) as progress:
        progress.stage("starting Spark")
        quiet_jvm_options(Path(scratch))
        with quiet_jvm_launch():
            spark = builder.getOrCreate()
        progress.watch(spark)
        try:
            document, text = _run_job(spark, args, progress)
        finally:
            progress.unwatch()
            spark.stop()
    if args.json:
        print(json.dumps(document, indent=2, default=str))
    else:
        print(text)
    return 0


def _run_job(spark: SparkSession, args: argparse.Namespace, progress: Progress) -> tuple[Any, str]:
    """Run the chosen job: (its JSON document, the text a reader gets)."""
    if args.command == "rebuild":
        report = rebuild(spark, args.store, _config_from_args(args), progress=progress.stage)
        return report.to_dict(), report.describe()
    if args.command == "export":
        columns = tuple(c for c in args.partition_by.split(",") if c)
        exported = export(spark, args.store, args.out, args.format, columns, mode=args.mode,
                          options=_read_options(args), progress=progress.stage)
        return exported.to_dict(), exported.describe()
    progress.stage("summarising per topic and queue")
    frame = summary(spark, args.store, options=_read_options(args))
    rows = [row.asDict() for row in frame.collect()]
    return rows, _text_table(frame.columns, rows)


def _text_table(columns: Sequence[str], rows: Sequence[dict[str, Any]]) -> str:
    """`rows` as a plain table: a header line, then one line a row, columns aligned (numbers right)."""
    cells = [["" if row[c] is None else str(row[c]) for c in columns] for row in rows]
    widths = [max([len(c), *(len(line[i]) for line in cells)]) for i, c in enumerate(columns)]
    numeric = [all(isinstance(row[c], int) for row in rows) and bool(rows) for c in columns]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric, strict=True))

    return "\n".join([line(list(columns)), *(line(values) for values in cells)]).rstrip() + (
        "" if rows else "\n(no messages)")


if __name__ == "__main__":
    # Run the imported module's main so that Spark pickles its functions by reference, not `__main__`'s.
    from rocketstore.spark import jobs as _jobs

    sys.exit(_jobs.main())
