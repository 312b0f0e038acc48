"""The demo pipeline: write a store with a realistic mix of messages, then run Spark over it.

    1. write   an order-processing workload: four topics with 1-4 queues each, tags per event type,
               order and customer ids as KEYS, a client UNIQ_KEY, a region property and JSON bodies
               of varied sizes, stored over the last 90 minutes with bursts; three consumer groups
               commit their progress; the store rolls commitlog and index files on the way
    2. rebuild consumequeue/ and index/ from the commitlog (`rocketstore.spark.jobs.rebuild`)
    3. export  every message to Parquet, partitioned by topic (`rocketstore.spark.jobs.export`)
    4. query   a Spark SQL summary per topic and queue
    5. report  (optional) the HTML report of `rocketstore.report.html`

Every step reports progress through a callback so that the command line can draw progress bars.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore.format.store_dirs import COMMITLOG_DIR

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from rocketstore import Message, MessageStore, StoreConfig

# A small store geometry so that the demo rolls files: 4 MiB commitlog files, 10,000-entry consume-queue
# files, index files of 4,096 slots x 16,384 entries.
DEMO_GEOMETRY = {
    "commitlog_file_size": 4 * 1024 * 1024,
    "consume_queue_file_entries": 10_000,
    "index_hash_slots": 4_096,
    "index_max_entries": 16_384,
}

# topic -> (queues, share of the traffic, {tag: weight})
WORKLOAD: dict[str, tuple[int, float, dict[str, int]]] = {
    "Orders": (4, 0.45, {"Created": 6, "Paid": 5, "Cancelled": 1}),
    "Payments": (4, 0.30, {"Authorized": 5, "Captured": 4, "Refunded": 1}),
    "Shipping": (2, 0.20, {"Packed": 3, "Shipped": 3, "Delivered": 2}),
    "Audit": (1, 0.05, {"": 1}),
}
REGIONS = ("eu-west", "eu-central", "us-east", "ap-south")
# consumer group -> (topics it reads, share of each queue it has consumed)
CONSUMERS: dict[str, tuple[tuple[str, ...], float]] = {
    "billing-service": (("Orders", "Payments"), 0.93),
    "fulfilment": (("Shipping",), 0.75),
    "audit-archiver": (("Audit",), 1.0),
}
BATCH = 500  # messages between progress reports
DEMO_SPAN_MS = 90 * 60 * 1000  # the demo traffic spans the last 90 minutes

SQL_SUMMARY = """
SELECT topic, queueId,
       COUNT(*)              AS messages,
       MIN(queueOffset)      AS min_offset,
       MAX(queueOffset) + 1  AS max_offset,
       SUM(storeSize)        AS bytes,
       COUNT(DISTINCT tags)  AS tags,
       MIN(storeTimestamp)   AS first_store_timestamp,
       MAX(storeTimestamp)   AS last_store_timestamp
FROM messages
GROUP BY topic, queueId
ORDER BY topic, queueId
"""

Progress = Callable[[str, int, int | None], None]
"""progress(step, done, total): `done` units of `total` (None when unknown) of one step."""


class DemoRefused(ValueError):
    """The demo will not write where it was asked to (a folder that holds something else)."""


@dataclass
class DemoResult:
    """What the demo did and found."""

    store: str
    export: str
    messages_written: int = 0
    rebuild: dict[str, Any] = field(default_factory=dict)
    exported_rows: int = 0
    summary: list[dict[str, Any]] = field(default_factory=list)
    report: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"store": self.store, "export": self.export, "messages_written": self.messages_written,
                "rebuild": self.rebuild, "exported_rows": self.exported_rows, "summary": self.summary,
                "report": self.report}


def check_target(store: Path, export: Path) -> bool:
    """True when `store` is an existing store to add to, False when it is to be created.

    Raises:
        DemoRefused: `store` or `export` is a folder that holds something other than a store or a
            previous Parquet export.
    """
    if store.exists() and (not store.is_dir() or any(store.iterdir()) and not (store / COMMITLOG_DIR).is_dir()):
        raise DemoRefused(f"{store} exists and is not a store: choose another folder")
    if export.exists() and (not export.is_dir() or any(export.iterdir()) and not (export / "_SUCCESS").exists()):
        raise DemoRefused(f"{export} exists and is not a previous export: choose another --export folder")
    return (store / COMMITLOG_DIR).is_dir()


def demo_config(store: Path, config: StoreConfig | None) -> StoreConfig | None:
    """The config to create the demo store with: the caller's, else the demo geometry for a new store
    (an existing store keeps the geometry it recorded)."""
    from rocketstore import StoreConfig

    if config is not None or (store / COMMITLOG_DIR).is_dir():
        return config
    return StoreConfig().with_geometry(DEMO_GEOMETRY)


def demo_messages(count: int, seed: int) -> Iterator[Message]:
    """`count` messages of the demo workload, the same for the same seed."""
    from rocketstore import Message

    rng = random.Random(seed)
    topics = list(WORKLOAD)
    shares = [WORKLOAD[t][1] for t in topics]
    for n in range(count):
        topic = rng.choices(topics, shares)[0]
        queues, _, tags = WORKLOAD[topic]
        tag = rng.choices(list(tags), list(tags.values()))[0]
        order = rng.randrange(1, max(count // 3, 2))
        customer = rng.randrange(1, 500)
        body = {"order": f"O{order:07d}", "customer": f"C{customer:05d}", "event": tag or "audit",
                "amount": round(rng.lognormvariate(3.5, 0.8), 2), "seq": n,
                "note": "x" * int(rng.expovariate(1 / 120))}
        yield Message(
            topic, json.dumps(body).encode("utf-8"), queue_id=order % queues, tags=tag or None,
            keys=(f"O{order:07d}", f"C{customer:05d}"),
            properties={"UNIQ_KEY": f"{rng.getrandbits(128):032X}", "region": rng.choice(REGIONS)},
        )


def traffic_times(count: int, seed: int, end_ms: int, span_ms: int = DEMO_SPAN_MS) -> list[int]:
    """Store times for `count` messages over the `span_ms` before `end_ms`: a wave-shaped rate with
    a few bursts, ascending."""
    rng = random.Random(seed + 1)
    bursts = [rng.uniform(0.1, 0.9) for _ in range(3)]

    def weight(x: float) -> float:  # x in [0, 1): relative traffic at that point of the span
        wave = 1.0 + 0.6 * math.sin(2 * math.pi * (x * 1.5 + 0.2))
        return wave + sum(4.0 * math.exp(-((x - b) / 0.015) ** 2) for b in bursts)

    points = sorted(rng.random() for _ in range(count * 4))
    kept = [x for x in points if rng.random() * 6.0 < weight(x)]
    while len(kept) < count:  # rejection sampling rarely falls short; top up evenly
        kept.append(rng.random())
    chosen = sorted(rng.sample(kept, count))
    start = end_ms - span_ms
    return [start + int(x * span_ms) for x in chosen]


def write_store(store: Path, config: StoreConfig | None, count: int, seed: int, progress: Progress) -> int:
    """Put the demo messages into the store at `store` (created if missing) with store times spread
    over the last `DEMO_SPAN_MS`; the number written.

    Raises:
        RocketStoreError: the store cannot be opened or refused a message.
    """
    from rocketstore import MessageStore

    now = {"ms": 0}
    written = 0
    progress("write", 0, count)
    with MessageStore.open(store, config, clock=lambda: now["ms"]) as opened:
        end_ms = int(time.time() * 1000)
        # store times only grow: a second run into the same store starts after its last message
        span_ms = min(DEMO_SPAN_MS, max(end_ms - _last_store_time(opened) - 1, count))
        times = traffic_times(count, seed, end_ms, span_ms)
        now["ms"] = times[0] if times else end_ms
        for n, (message, stored_at) in enumerate(zip(demo_messages(count, seed), times, strict=True), 1):
            now["ms"] = max(stored_at, now["ms"])
            written += opened.put(dataclasses.replace(message, born_timestamp=stored_at - 3)).ok
            if n % BATCH == 0:
                progress("write", written, count)
        commit_consumer_offsets(opened, seed)
    progress("write", written, count)
    return written


def _last_store_time(store: MessageStore) -> int:
    """The newest store time of the last message of any queue (0 for an empty store)."""
    last = 0
    for topic, queue_ids in store.queues().items():
        for queue_id in queue_ids:
            high = store.max_offset(topic, queue_id)
            for message in store.iter_queue(topic, queue_id, high - 1, high):
                last = max(last, message.store_timestamp)
    return last


def commit_consumer_offsets(store: MessageStore, seed: int) -> None:
    """Commit the demo consumers' progress: each group a little behind on each of its queues."""
    rng = random.Random(seed + 2)
    queues = store.queues()
    for group, (topics, share) in CONSUMERS.items():
        for topic in topics:
            for queue_id in queues.get(topic, ()):
                high = store.max_offset(topic, queue_id)
                behind = 0 if share >= 1.0 else int(high * (1 - share) * rng.uniform(0.3, 1.7))
                store.commit_offset(group, topic, queue_id, max(high - behind, 0))


def run_spark_steps(spark: SparkSession, store: Path, export: Path, config: StoreConfig | None,
                    progress: Progress, result: DemoResult) -> None:
    """Rebuild, export and summarise the store with Spark, filling `result`."""
    from rocketstore.report.stats import messages_frame
    from rocketstore.spark.jobs import export as export_job
    from rocketstore.spark.jobs import rebuild

    progress("rebuild", 0, 1)
    result.rebuild = rebuild(spark, store, config).to_dict()
    progress("rebuild", 1, 1)
    progress("export", 0, 1)
    if export.exists():
        shutil.rmtree(export)
    result.exported_rows = export_job(spark, store, export, "parquet", ("topic",),
                                      options=_geometry_options(config)).rows
    progress("export", 1, 1)
    progress("query", 0, 1)
    messages_frame(spark, store, config).createOrReplaceTempView("messages")
    result.summary = [row.asDict() for row in spark.sql(SQL_SUMMARY).collect()]
    progress("query", 1, 1)
    if result.report is not None:
        from rocketstore.report.html import build_report

        progress("report", 0, 1)
        build_report(spark, store, result.report, config)
        progress("report", 1, 1)


def _geometry_options(config: StoreConfig | None) -> dict[str, str]:
    from rocketstore.report.stats import SOURCE_GEOMETRY_OPTIONS

    if config is None:
        return {}
    return {theirs: str(getattr(config, ours)) for ours, theirs in SOURCE_GEOMETRY_OPTIONS.items()}


def run_demo(spark_factory: Callable[[], Any], store: Path, export: Path, *, messages: int = 20_000,
             seed: int = 7, config: StoreConfig | None = None, progress: Progress | None = None,
             report: Path | None = None) -> DemoResult:
    """The whole demo: write `messages` messages into `store`, then rebuild, export to `export` and
    summarise with Spark (the Spark session comes from `spark_factory`, a context-manager factory), and
    write the HTML report to `report` when given.

    Raises:
        DemoRefused: `store` or `export` holds something else.
        RocketStoreError: the store cannot be opened or written.
    """
    tell: Progress = progress or (lambda step, done, total: None)
    check_target(store, export)
    config = demo_config(store, config)
    result = DemoResult(str(store), str(export), report=None if report is None else str(report))
    result.messages_written = write_store(store, config, messages, seed, tell)
    with spark_factory() as spark:
        run_spark_steps(spark, store, export, config, tell, result)
    return result
