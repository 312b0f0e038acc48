"""Spark string options -> frozen option dataclasses.

Every option Spark hands a data source is a string; this module is the one place that parses them.
Bad values raise `ValueError` naming the option (house rule), so the message reaches the user through
Spark's error unchanged. Option names are matched case-insensitively, as Spark does.

Nothing here opens a store: options are parsed on the driver, the dataclasses are pickled to the
executors, and readers resolve them against a store only inside `read()`.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "DEFAULT_BYTES_PER_PARTITION",
    "DEFAULT_MESSAGES_PER_PARTITION",
    "EARLIEST",
    "LATEST",
    "OffsetSpec",
    "ReadOptions",
    "StreamOptions",
    "WriteOptions",
    "geometry_config",
    "resolve_paths",
]

EARLIEST = -2
"""Kafka's sentinel in offset JSON: the first offset of the queue."""
LATEST = -1
"""Kafka's sentinel in offset JSON: one past the last offset of the queue."""

SCAN_MODES = ("queues", "commitlog")

# Spark option name -> StoreConfig field, for stores written with non-default sizes.
_GEOMETRY_OPTIONS = {
    "commitlogfilesize": "commitlog_file_size",
    "consumequeuefileentries": "consume_queue_file_entries",
    "indexhashslots": "index_hash_slots",
    "indexmaxentries": "index_max_entries",
}
_GEOMETRY_SPELLING = {
    "commitlogfilesize": "commitlogFileSize",
    "consumequeuefileentries": "consumeQueueFileEntries",
    "indexhashslots": "indexHashSlots",
    "indexmaxentries": "indexMaxEntries",
}

DEFAULT_MESSAGES_PER_PARTITION = 1_000_000
DEFAULT_BYTES_PER_PARTITION = 512 * 1024 * 1024


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items() if v is not None}


def _int(opts: Mapping[str, str], name: str, default: int | None, *, minimum: int | None = None) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ValueError(f"Option '{name}' must be an integer, got {raw!r}.") from None
    if minimum is not None and value < minimum:
        raise ValueError(f"Option '{name}' must be >= {minimum}, got {value}.")
    return value


def _bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    text = raw.strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise ValueError(f"Option '{name}' must be true or false, got {raw!r}.")


def _topics(opts: Mapping[str, str]) -> tuple[str, ...]:
    raw = opts.get("topics") or opts.get("topic") or ""
    return tuple(t.strip() for t in raw.split(",") if t.strip())


@dataclass(frozen=True)
class OffsetSpec:
    """`earliest`, `latest`, or explicit queue offsets per topic and queue id.

    `queues` maps (topic, queue_id) to a queue offset or to `EARLIEST` / `LATEST`; a queue not listed
    takes `default`.
    """

    default: int
    queues: tuple[tuple[str, int, int], ...] = ()

    def for_queue(self, topic: str, queue_id: int) -> int:
        """The offset (or sentinel) this spec gives one queue."""
        for t, q, offset in self.queues:
            if t == topic and q == queue_id:
                return offset
        return self.default

    @classmethod
    def parse(cls, name: str, raw: str | None, default: int) -> OffsetSpec:
        """Parse `earliest`, `latest` or `{"TopicA": {"0": 5}}` (-2 earliest, -1 latest).

        Raises:
            ValueError: malformed value, naming option `name`.
        """
        if raw is None or raw.strip() == "":
            return cls(default)
        text = raw.strip()
        if text.lower() == "earliest":
            return cls(EARLIEST)
        if text.lower() == "latest":
            return cls(LATEST)
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            raise ValueError(
                f"Option '{name}' must be 'earliest', 'latest' or JSON like {{\"TopicA\":{{\"0\":5}}}}, "
                f"got {raw!r}."
            ) from None
        return cls(default, _offset_entries(name, data))


def _offset_entries(name: str, data: Any) -> tuple[tuple[str, int, int], ...]:
    if not isinstance(data, dict):
        raise ValueError(f"Option '{name}' JSON must be an object of topics, got {data!r}.")
    entries: list[tuple[str, int, int]] = []
    for topic, per_queue in data.items():
        if not isinstance(per_queue, dict):
            raise ValueError(f"Option '{name}': topic {topic!r} must map queue ids to offsets.")
        for queue_id, offset in per_queue.items():
            try:
                qid, off = int(queue_id), int(offset)
            except (TypeError, ValueError):
                raise ValueError(f"Option '{name}': bad queue {queue_id!r} or offset {offset!r}.") from None
            if off < EARLIEST:
                raise ValueError(f"Option '{name}': offset {off} of {topic}/{qid} is negative.")
            entries.append((str(topic), qid, off))
    return tuple(entries)


def resolve_paths(raw: str | None) -> tuple[str, ...]:
    """Store roots from a load path: one path, a comma-separated list, or glob patterns.

    Raises:
        ValueError: no path given, or a pattern matches no directory (option 'path').
    """
    if raw is None or raw.strip() == "":
        raise ValueError("Option 'path' is required: the store root directory (or several, comma-separated).")
    parts = raw.split(",")
    if raw.lstrip().startswith("["):  # DataFrameReader.load([...]) hands Spark a JSON list
        try:
            parts = [str(p) for p in json.loads(raw)]
        except json.JSONDecodeError:
            raise ValueError(f"Option 'paths' is not a JSON list of paths: {raw!r}.") from None
    roots: list[str] = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        matches = sorted(glob.glob(part)) if glob.has_magic(part) else [part]
        matches = [m for m in matches if os.path.isdir(m)]
        if not matches:
            raise ValueError(f"Option 'path': no store directory at {part!r}.")
        roots.extend(os.path.abspath(m) for m in matches)
    return tuple(dict.fromkeys(roots))


def geometry_config(opts: Mapping[str, str]) -> dict[str, int]:
    """StoreConfig geometry fields given by the `commitlogFileSize`, ... overrides.

    Raises:
        ValueError: a non-integer or non-positive value, naming the option.
    """
    lowered = _lower(opts)
    geometry: dict[str, int] = {}
    for key, field_name in _GEOMETRY_OPTIONS.items():
        value = _int(lowered, _GEOMETRY_SPELLING[key], None, minimum=1)
        if value is not None:
            geometry[field_name] = value
    return geometry


@dataclass(frozen=True)
class ReadOptions:
    """Options of `spark.read.format("rocketstore")`.

    Attributes:
        paths: absolute store roots.
        topics: topics to read; empty = every topic.
        starting / ending: queue offset bounds, `[starting, ending)` per queue.
        starting_timestamp_ms / ending_timestamp_ms: store-time bounds, `[start, end)`.
        key: an index key (KEYS token or UNIQ_KEY); rows are the messages `query()` finds.
        scan: `queues` (through the consume queues), `commitlog` (every record of the log), or None
            (not given: the plan reads the queues' records in log order when nothing narrows the read
            to queues, else through the queues; `plan.plan_partitions`).
        geometry: StoreConfig geometry overrides.
        messages_per_partition / bytes_per_partition: split sizes for the two scan modes.
        filter_pushdown: Spark's reader takes the filters Spark pushes (`filterPushdown`).
        read_ahead: record batches a partition decodes ahead in a thread (`readAhead`; 0: none).
        read_threads: partitions `rocketstore.arrow.read` reads at once, each in a thread of its own
            (`readThreads`; default 1: one after the other, in the consumer's thread). Spark reads one
            partition per task and does not use it.
    """

    paths: tuple[str, ...]
    topics: tuple[str, ...] = ()
    starting: OffsetSpec = field(default_factory=lambda: OffsetSpec(EARLIEST))
    ending: OffsetSpec = field(default_factory=lambda: OffsetSpec(LATEST))
    starting_timestamp_ms: int | None = None
    ending_timestamp_ms: int | None = None
    key: str | None = None
    scan: str | None = None
    geometry: tuple[tuple[str, int], ...] = ()
    messages_per_partition: int = DEFAULT_MESSAGES_PER_PARTITION
    bytes_per_partition: int = DEFAULT_BYTES_PER_PARTITION
    filter_pushdown: bool = False
    read_ahead: int = 0
    read_threads: int = 1

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Parse Spark's options of a batch read.

        Raises:
            ValueError: a missing or malformed option, naming it.
        """
        opts = _lower(options)
        raw_scan = opts.get("scan")
        scan = None if raw_scan is None or raw_scan.strip() == "" else raw_scan.strip().lower()
        if scan is not None and scan not in SCAN_MODES:
            raise ValueError(f"Option 'scan' must be one of {', '.join(SCAN_MODES)}, got {scan!r}.")
        start_ts = _int(opts, "startingTimestamp", None, minimum=0)
        end_ts = _int(opts, "endingTimestamp", None, minimum=0)
        if start_ts is not None and end_ts is not None and end_ts < start_ts:
            raise ValueError(f"Option 'endingTimestamp' ({end_ts}) is before 'startingTimestamp' ({start_ts}).")
        ending = OffsetSpec.parse("endingOffsets", opts.get("endingoffsets"), LATEST)
        if ending.default == EARLIEST:
            raise ValueError("Option 'endingOffsets' cannot be 'earliest'.")
        key = opts.get("key")
        return cls(
            paths=resolve_paths(opts.get("path") or opts.get("paths")),
            topics=_topics(opts),
            starting=OffsetSpec.parse("startingOffsets", opts.get("startingoffsets"), EARLIEST),
            ending=ending,
            starting_timestamp_ms=start_ts,
            ending_timestamp_ms=end_ts,
            key=key if key else None,
            scan=scan,
            geometry=tuple(sorted(geometry_config(opts).items())),
            messages_per_partition=_int(
                opts, "messagesPerPartition", DEFAULT_MESSAGES_PER_PARTITION, minimum=1
            ),  # type: ignore[arg-type]
            bytes_per_partition=_int(
                opts, "bytesPerPartition", DEFAULT_BYTES_PER_PARTITION, minimum=4096
            ),  # type: ignore[arg-type]
            filter_pushdown=_bool(opts, "filterPushdown", False),
            read_ahead=_int(opts, "readAhead", 0, minimum=0),  # type: ignore[arg-type]
            read_threads=_int(opts, "readThreads", 1, minimum=1),  # type: ignore[arg-type]
        )

    def keeps_time(self, store_timestamp_ms: int) -> bool:
        """True when a store time falls inside `[startingTimestamp, endingTimestamp)`."""
        if self.starting_timestamp_ms is not None and store_timestamp_ms < self.starting_timestamp_ms:
            return False
        return self.ending_timestamp_ms is None or store_timestamp_ms < self.ending_timestamp_ms

    @property
    def narrows_beyond_topics(self) -> bool:
        """True when an option bounds the read by queue offset, store time or key."""
        return bool(self.starting != OffsetSpec(EARLIEST) or self.ending != OffsetSpec(LATEST)
                    or self.starting_timestamp_ms is not None or self.ending_timestamp_ms is not None
                    or self.key is not None)


@dataclass(frozen=True)
class StreamOptions:
    """Options of `spark.readStream.format("rocketstore")`.

    Attributes:
        paths: absolute store roots.
        topics: topics to read; empty = every topic.
        starting: where a new query starts (`latest` unless given).
        max_messages_per_trigger: cap on rows per micro-batch, or None.
        fail_on_data_loss: raise when a queue's retained minimum moved past the next offset to read.
        geometry: StoreConfig geometry overrides.
    """

    paths: tuple[str, ...]
    topics: tuple[str, ...] = ()
    starting: OffsetSpec = field(default_factory=lambda: OffsetSpec(LATEST))
    max_messages_per_trigger: int | None = None
    fail_on_data_loss: bool = True
    geometry: tuple[tuple[str, int], ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> StreamOptions:
        """Parse Spark's options of a streaming read.

        Raises:
            ValueError: a missing or malformed option, naming it.
        """
        opts = _lower(options)
        for unsupported in ("endingoffsets", "key", "endingtimestamp"):
            if unsupported in opts:
                raise ValueError(f"Option '{unsupported}' is not supported by the streaming source.")
        if opts.get("scan", "queues").strip().lower() != "queues":
            raise ValueError("Option 'scan': the streaming source reads through consume queues only.")
        return cls(
            paths=resolve_paths(opts.get("path") or opts.get("paths")),
            topics=_topics(opts),
            starting=OffsetSpec.parse("startingOffsets", opts.get("startingoffsets"), LATEST),
            max_messages_per_trigger=_int(opts, "maxMessagesPerTrigger", None, minimum=1),
            fail_on_data_loss=_bool(opts, "failOnDataLoss", True),
            geometry=tuple(sorted(geometry_config(opts).items())),
        )


def _broker_address(raw: str | None) -> str | None:
    """`host:port` of option 'broker', or None when it is not given.

    Raises:
        ValueError: not `host:port` with a port in 1..65535, naming the option.
    """
    if raw is None or raw.strip() == "":
        return None
    text = raw.strip()
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or any(c.isspace() for c in host) or not port.isdigit() or not 0 < int(port) <= 65535:
        raise ValueError(f"Option 'broker' must be the broker's remoting address host:port (e.g. "
                         f"127.0.0.1:10911), got {raw!r}.")
    return text


@dataclass(frozen=True)
class WriteOptions:
    """Options of `df.write.format("rocketstore")` and `writeStream.format("rocketstore")`.

    Attributes:
        path: the store root (exactly one).
        topic: topic for rows without a `topic` column (or with a null topic).
        staging_dir: where tasks stage encoded rows; default `<store>/spark-staging`.
        sink_id: name under which a streaming sink records its last committed batch.
        geometry: StoreConfig geometry overrides.
        broker: `host:port` of the broker serving the store: the commit sends the rows through it
            instead of opening the store (then `staging_dir` is required and lies outside the store).
    """

    path: str
    topic: str | None = None
    staging_dir: str = ""
    sink_id: str = "default"
    geometry: tuple[tuple[str, int], ...] = ()
    broker: str | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> WriteOptions:
        """Parse Spark's options of a write.

        Raises:
            ValueError: a missing or malformed option, naming it.
        """
        opts = _lower(options)
        raw = opts.get("path")
        if raw is None or raw.strip() == "":
            raise ValueError("Option 'path' is required: the root directory of the store to append to.")
        if "," in raw or glob.has_magic(raw):
            raise ValueError(f"Option 'path' must name exactly one store to write, got {raw!r}.")
        path = os.path.abspath(raw.strip())
        topic = opts.get("topic")
        sink_id = opts.get("sinkid") or "default"
        if not sink_id.replace("-", "").replace("_", "").replace(".", "").isalnum():
            raise ValueError(f"Option 'sinkId' may hold letters, digits, '-', '_' and '.', got {sink_id!r}.")
        staging_dir = os.path.abspath(opts["stagingdir"].strip()) if opts.get("stagingdir", "").strip() else ""
        broker = _broker_address(opts.get("broker"))
        if broker is not None:
            if not staging_dir:
                raise ValueError(
                    "Option 'stagingDir' is required with option 'broker': a directory outside the served "
                    "store, shared by the driver and the executors, where tasks stage rows and the streaming "
                    "sink keeps its progress."
                )
            if os.path.commonpath([staging_dir, path]) == path:
                raise ValueError(
                    f"Option 'stagingDir' ({staging_dir}) must lie outside the store served by the broker "
                    f"({path}): nothing but the broker writes into a served store."
                )
        return cls(
            path=path,
            topic=topic.strip() if topic and topic.strip() else None,
            staging_dir=staging_dir,
            sink_id=sink_id,
            geometry=tuple(sorted(geometry_config(opts).items())),
            broker=broker,
        )

    @property
    def staging_root(self) -> str:
        """The directory under which each job stages its files."""
        return self.staging_dir or os.path.join(self.path, "spark-staging")
