"""The figures the HTML report plots, gathered with Spark (messages) and from the store files (index,
disk use). Functions that run on executors take only picklable arguments.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore.format import index as index_format
from rocketstore.format.store_dirs import COMMITLOG_DIR, CONFIG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR
from rocketstore.format.times import format_time_ms
from rocketstore.report._files import mapped

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from rocketstore import StoreConfig

SIZE_BUCKETS = 40
TIME_BUCKETS_MS = (1_000, 5_000, 10_000, 30_000, 60_000, 300_000, 900_000, 3_600_000, 21_600_000, 86_400_000)
MAX_TIME_BUCKETS = 120


def time_bucket_ms(first_ms: int, last_ms: int) -> int:
    """The smallest bucket width that cuts [first, last] into at most MAX_TIME_BUCKETS buckets."""
    span = max(last_ms - first_ms, 0)
    for width in TIME_BUCKETS_MS:
        if span // width < MAX_TIME_BUCKETS:
            return width
    return TIME_BUCKETS_MS[-1] * (span // (TIME_BUCKETS_MS[-1] * MAX_TIME_BUCKETS) + 1)


FILE_KINDS = (COMMITLOG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR, CONFIG_DIR, "other")

# StoreConfig geometry field -> option of the `rocketstore` Spark source.
SOURCE_GEOMETRY_OPTIONS = {
    "commitlog_file_size": "commitlogFileSize",
    "consume_queue_file_entries": "consumeQueueFileEntries",
    "index_hash_slots": "indexHashSlots",
    "index_max_entries": "indexMaxEntries",
}


@dataclass
class IndexFileStats:
    """Fill and slot-chain lengths of one index file."""

    name: str
    entries: int
    capacity: int
    """Entries the file can hold: maxIndexNum - 1, since entry 0 is never written (RocketMQ counts entries
    from 1, and a slot holding 0 means empty)."""
    slots: int
    slots_used: int
    chain_lengths: dict[int, int]
    """chain length -> number of slots with a chain that long."""
    begin_timestamp: int = 0
    """Store time of the file's first entry (header beginTimestamp; 0 when it has none)."""
    end_timestamp: int = 0
    """Store time of the file's last entry (header endTimestamp)."""

    @property
    def fill(self) -> float:
        return self.entries / self.capacity if self.capacity else 0.0

    @property
    def configured(self) -> int:
        """maxIndexNum: the entries configured, the reserved entry 0 included."""
        return self.capacity + index_format.FIRST_ENTRY

    @property
    def full(self) -> bool:
        return self.entries >= self.capacity > 0


@dataclass
class QueueStats:
    topic: str
    queue_id: int
    min_offset: int
    max_offset: int
    lags: dict[str, int] = field(default_factory=dict)
    """consumer group -> lag (max offset - committed offset)."""

    @property
    def depth(self) -> int:
        return self.max_offset - self.min_offset


@dataclass
class StoreStats:
    """Everything the report shows."""

    store: str
    messages: int = 0
    total_bytes: int = 0
    first_store_timestamp: int | None = None
    last_store_timestamp: int | None = None
    bucket_ms: int = 60_000
    per_bucket: dict[str, dict[int, int]] = field(default_factory=dict)
    """topic -> bucket (epoch ms // bucket_ms) -> messages stored in it."""
    size_buckets: list[float] = field(default_factory=list)
    size_counts: list[int] = field(default_factory=list)
    queues: list[QueueStats] = field(default_factory=list)
    index_files: list[IndexFileStats] = field(default_factory=list)
    disk_use: dict[str, tuple[int, int]] = field(default_factory=dict)
    """file kind -> (apparent bytes, allocated bytes)."""
    index_max_entries: int = 0
    """maxIndexNum of the store's geometry (0: not known)."""


def index_file_stats(path: str, slots: int, max_entries: int) -> IndexFileStats:
    """Read one index file (read-only) and count its entries per hash slot."""
    with mapped(Path(path)) as buf:
        header = index_format.IndexHeader.unpack(buf)
        count = min(header.index_count, max_entries)
        first = index_format.entry_pos(index_format.FIRST_ENTRY, slots)
        view = memoryview(buf)[first:index_format.entry_pos(max(count, index_format.FIRST_ENTRY), slots)]
        per_slot = Counter(key_hash % slots for key_hash, _, _, _ in index_format.ENTRY.iter_unpack(view))
        del view
    entries = max(count - index_format.FIRST_ENTRY, 0)
    return IndexFileStats(
        name=os.path.basename(path), entries=entries,
        capacity=max_entries - index_format.FIRST_ENTRY, slots=slots, slots_used=len(per_slot),
        chain_lengths=dict(sorted(Counter(per_slot.values()).items())),
        begin_timestamp=header.begin_timestamp if entries else 0, end_timestamp=header.end_timestamp if entries else 0,
    )


def disk_use(root: Path) -> dict[str, tuple[int, int]]:
    """(apparent bytes, allocated bytes) per file kind: the top-level folder a file is in."""
    use = {kind: (0, 0) for kind in FILE_KINDS}
    for folder, _, names in os.walk(root):
        rel = Path(folder).relative_to(root).parts
        kind = rel[0] if rel and rel[0] in FILE_KINDS else "other"
        for name in names:
            try:
                st = os.stat(os.path.join(folder, name))
            except FileNotFoundError:  # a live store may delete a file while we walk
                continue
            apparent, allocated = use[kind]
            use[kind] = (apparent + st.st_size, allocated + getattr(st, "st_blocks", 0) * 512)
    return use


def messages_frame(spark: SparkSession, root: Path, config: StoreConfig | None) -> DataFrame:
    reader = spark.read.format("rocketstore")
    if config is not None:
        for ours, theirs in SOURCE_GEOMETRY_OPTIONS.items():
            reader = reader.option(theirs, str(getattr(config, ours)))
    return reader.load(str(root))


def _message_stats(spark: SparkSession, stats: StoreStats, df: DataFrame) -> None:
    from pyspark.sql import functions as F

    totals = df.agg(F.count("*").alias("n"), F.sum("storeSize").alias("bytes"),
                    F.min("storeTimestamp").alias("first"), F.max("storeTimestamp").alias("last")).first()
    stats.messages = int(totals["n"]) if totals is not None else 0
    if totals is None or not stats.messages:
        return
    stats.total_bytes = int(totals["bytes"])
    stats.first_store_timestamp, stats.last_store_timestamp = int(totals["first"]), int(totals["last"])
    stats.bucket_ms = time_bucket_ms(stats.first_store_timestamp, stats.last_store_timestamp)
    bucket = F.floor(F.col("storeTimestamp") / stats.bucket_ms).alias("bucket")
    for row in df.groupBy("topic", bucket).count().collect():
        stats.per_bucket.setdefault(row["topic"], {})[int(row["bucket"])] = int(row["count"])
    sizes = df.select("storeSize").rdd.map(lambda row: row[0])
    buckets, counts = sizes.histogram(SIZE_BUCKETS)
    stats.size_buckets, stats.size_counts = [float(b) for b in buckets], [int(c) for c in counts]


def _queue_stats(stats: StoreStats, root: Path, config: StoreConfig | None) -> StoreConfig:
    """Queue depths and consumer lags from the store (opened read-only); its effective config."""
    from rocketstore import MessageStore

    with MessageStore.open(root, config, read_only=True) as store:
        by_queue: dict[tuple[str, int], QueueStats] = {}
        for topic, queue_ids in sorted(store.queues().items()):
            for queue_id in sorted(queue_ids):
                by_queue[(topic, queue_id)] = QueueStats(topic, queue_id, store.min_offset(topic, queue_id),
                                                         store.max_offset(topic, queue_id))
        for group, offsets in store.consumer_offsets().items():
            for queue, committed in offsets.items():
                if queue in by_queue:
                    by_queue[queue].lags[group] = max(by_queue[queue].max_offset - committed, 0)
        stats.queues = list(by_queue.values())
        return store.config


def gather(spark: SparkSession, root: Path, config: StoreConfig | None,
           progress: Callable[[str], None] | None = None) -> StoreStats:
    """Every figure of the report for the store at `root` (opened read-only throughout); `progress` is
    called with the name of each step as it starts.

    Raises:
        RocketStoreError: the store cannot be opened with this config.
    """
    stage = progress or (lambda name: None)
    stats = StoreStats(store=str(root.absolute()))
    stage("reading queues and consumer offsets")
    effective = _queue_stats(stats, root, config)
    stats.index_max_entries = effective.index_max_entries
    # One scan of the store feeds every message figure.
    stage("reading messages (counts, sizes, store times)")
    frame = messages_frame(spark, root, config).select("topic", "storeSize", "storeTimestamp").cache()
    try:
        _message_stats(spark, stats, frame)
    finally:
        frame.unpersist()
    index_dir = root / INDEX_DIR
    paths = sorted(str(p) for p in index_dir.iterdir() if p.is_file()) if index_dir.is_dir() else []
    if paths:
        stage(f"reading {len(paths)} index file(s)")
        slots, max_entries = effective.index_hash_slots, effective.index_max_entries
        rdd = spark.sparkContext.parallelize(paths, len(paths))
        stats.index_files = rdd.map(lambda p: index_file_stats(p, slots, max_entries)).collect()
    stage("measuring disk use")
    stats.disk_use = disk_use(root)
    return stats


def _binary(count: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def summary_rows(stats: StoreStats) -> list[tuple[str, Any]]:
    """(label, value) lines of the report's summary table."""
    return [
        ("store", stats.store),
        ("messages", stats.messages),
        ("bytes of records", f"{stats.total_bytes} ({_binary(stats.total_bytes)})"),
        ("topics", len({q.topic for q in stats.queues})),
        ("queues", len(stats.queues)),
        ("index files", len(stats.index_files)),
        ("first stored (UTC)", format_time_ms(stats.first_store_timestamp)),
        ("last stored (UTC)", format_time_ms(stats.last_store_timestamp)),
    ]
