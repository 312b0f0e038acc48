"""StoreConfig: every setting of a store, with units in the names, as one frozen dataclass."""

from __future__ import annotations

import enum
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from rocketstore.errors import InvalidArgumentError
from rocketstore.format.consume_queue import UNIT_SIZE as CQ_UNIT_SIZE
from rocketstore.format.index import index_file_size

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_MIN_COMMITLOG_FILE_SIZE = 4096


class FlushMode(str, enum.Enum):
    """When a put's bytes are forced to disk."""

    ASYNC = "ASYNC_FLUSH"
    """A background service flushes every `flush_interval_ms`; put returns before the flush."""
    SYNC = "SYNC_FLUSH"
    """put() returns after its bytes are on disk (group commit)."""


# Geometry fields: fixed when a store is created, recorded in config/rocketstore.json.
GEOMETRY_FIELDS = (
    "commitlog_file_size",
    "consume_queue_file_entries",
    "index_hash_slots",
    "index_max_entries",
)

# rocketstore name -> RocketMQ MessageStoreConfig name, for from_rocketmq().
_ROCKETMQ_NAMES = {
    "commitlog_file_size": "mappedFileSizeCommitLog",
    "index_hash_slots": "maxHashSlotNum",
    "index_max_entries": "maxIndexNum",
    "max_message_size": "maxMessageSize",
    "max_query_results": "maxMsgsNumBatch",
    "max_get_count": "maxTransferCountOnMessageInMemory",
    "flush_interval_ms": "flushIntervalCommitLog",
    "flush_least_pages": "flushCommitLogLeastPages",
    "flush_thorough_interval_ms": "flushCommitLogThoroughInterval",
    "sync_flush_timeout_ms": "syncFlushTimeout",
    "check_crc_on_recover": "checkCRCOnRecover",
    "file_reserved_hours": "fileReservedTime",
    "delete_when": "deleteWhen",
    "delay_levels": "messageDelayLevel",
    "flush_consume_queue_interval_ms": "flushIntervalConsumeQueue",
    "flush_consume_queue_least_pages": "flushConsumeQueueLeastPages",
    "flush_consume_queue_thorough_interval_ms": "flushConsumeQueueThoroughInterval",
    "clean_interval_ms": "cleanResourceInterval",
    "disk_clean_forcibly_ratio": "diskSpaceCleanForciblyRatio",
    "disk_full_ratio": "diskSpaceWarningLevelRatio",
}

# RocketMQ reads its two disk levels from Java system properties (-Drocketmq.broker.
# diskSpaceCleanForciblyRatio, -Drocketmq.broker.diskSpaceWarningLevelRatio), for every store of the
# process. These environment variables play that part: they give the defaults of `disk_clean_forcibly_ratio`
# and `disk_full_ratio` to every store a process and its children open (a broker, Spark workers).
DISK_CLEAN_FORCIBLY_ENV = "ROCKETSTORE_DISK_SPACE_CLEAN_FORCIBLY_RATIO"
DISK_FULL_ENV = "ROCKETSTORE_DISK_SPACE_WARNING_LEVEL_RATIO"


def _env_ratio(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise InvalidArgumentError(f"environment variable {name}={value!r} is not a ratio such as 0.85") from None


def _clean_forcibly_default() -> float:
    return _env_ratio(DISK_CLEAN_FORCIBLY_ENV, 0.85)


def _disk_full_default() -> float:
    return _env_ratio(DISK_FULL_ENV, 0.90)


@dataclass(frozen=True)
class StoreConfig:
    """Settings of one store. Geometry fields must match the files of an existing store.

    Raises:
        InvalidArgumentError: (at construction) a setting out of its range, or a disk level in the
            environment that is not a number (a ValueError too).
    """

    commitlog_file_size: int = 1024 * 1024 * 1024
    consume_queue_file_entries: int = 300_000
    index_hash_slots: int = 5_000_000
    index_max_entries: int = 20_000_000
    max_message_size: int = 4 * 1024 * 1024
    store_host: str = "127.0.0.1:10911"
    flush_mode: FlushMode = FlushMode.ASYNC
    max_query_results: int = 64
    max_get_count: int = 32
    flush_interval_ms: int = 500
    flush_least_pages: int = 4
    flush_thorough_interval_ms: int = 10_000
    sync_flush_timeout_ms: int = 5_000
    flush_consume_queue_interval_ms: int = 1_000
    check_crc_on_recover: bool = True
    file_reserved_hours: int = 72
    delete_when: str = "04"
    disk_max_used_ratio: float = 0.75
    disk_clean_forcibly_ratio: float = field(default_factory=_clean_forcibly_default)
    disk_full_ratio: float = field(default_factory=_disk_full_default)
    delay_levels: str = DEFAULT_DELAY_LEVELS
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60_000
    clean_interval_ms: int = 10_000
    deliver_delayed_messages: bool = True
    schedule_interval_ms: int = 100

    def __post_init__(self) -> None:
        if isinstance(self.flush_mode, str) and not isinstance(self.flush_mode, FlushMode):
            object.__setattr__(self, "flush_mode", FlushMode(self.flush_mode))
        checks = {
            "commitlog_file_size": self.commitlog_file_size >= _MIN_COMMITLOG_FILE_SIZE,
            "consume_queue_file_entries": self.consume_queue_file_entries >= 1,
            "index_hash_slots": self.index_hash_slots >= 1,
            "index_max_entries": self.index_max_entries >= 2,
            "max_message_size": self.max_message_size >= 10,
            "max_query_results": self.max_query_results >= 1,
            "max_get_count": self.max_get_count >= 1,
            "disk_max_used_ratio": 0.0 < self.disk_max_used_ratio <= 1.0,
            "disk_clean_forcibly_ratio": 0.0 < self.disk_clean_forcibly_ratio <= 1.0,
            "disk_full_ratio": 0.0 < self.disk_full_ratio <= 1.0,
        }
        for name, ok in checks.items():
            if not ok:
                raise InvalidArgumentError(f"StoreConfig.{name} out of range: {getattr(self, name)!r}")

    @property
    def consume_queue_file_size(self) -> int:
        """Bytes of one consume-queue file."""
        return self.consume_queue_file_entries * CQ_UNIT_SIZE

    @property
    def index_file_size(self) -> int:
        """Bytes of one index file."""
        return index_file_size(self.index_hash_slots, self.index_max_entries)

    def geometry(self) -> dict[str, int]:
        """The fields fixed when the store was created."""
        return {name: getattr(self, name) for name in GEOMETRY_FIELDS}

    def with_geometry(self, geometry: Mapping[str, Any]) -> StoreConfig:
        """This config with the geometry fields taken from `geometry` (unknown keys ignored)."""
        values: dict[str, Any] = {k: int(v) for k, v in geometry.items() if k in GEOMETRY_FIELDS}
        return replace(self, **values)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready dict of every field."""
        data = asdict(self)
        data["flush_mode"] = self.flush_mode.value
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StoreConfig:
        """Build from `to_dict()` output; unknown keys are ignored.

        Raises:
            InvalidArgumentError: a value out of range.
        """
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_rocketmq(cls, props: Mapping[str, Any], **overrides: Any) -> StoreConfig:
        """Build from RocketMQ `MessageStoreConfig` names (e.g. a broker.conf or expected.json).

        `mappedFileSizeConsumeQueue` is in bytes, rounded up to whole 20-byte entries as RocketMQ does.

        Raises:
            InvalidArgumentError: a value out of range.
        """
        values: dict[str, Any] = {}
        for ours, theirs in _ROCKETMQ_NAMES.items():
            if theirs in props:
                values[ours] = props[theirs]
        if "mappedFileSizeConsumeQueue" in props:
            cq_bytes = int(props["mappedFileSizeConsumeQueue"])
            values["consume_queue_file_entries"] = -(-cq_bytes // CQ_UNIT_SIZE)
        if "diskMaxUsedSpaceRatio" in props:  # a percentage in RocketMQ, clamped to [10, 95]
            values["disk_max_used_ratio"] = min(max(float(props["diskMaxUsedSpaceRatio"]), 10.0), 95.0) / 100
        if "flushDiskType" in props:
            values["flush_mode"] = FlushMode(props["flushDiskType"])
        defaults = cls()
        for key, value in list(values.items()):
            default = getattr(defaults, key)
            if isinstance(default, bool):
                values[key] = str(value).lower() == "true"
            elif isinstance(default, int):
                values[key] = int(value)
            elif isinstance(default, float):
                values[key] = float(value)
        values.update(overrides)
        return cls.from_dict(values)

    def delay_level_millis(self) -> list[int]:
        """Delay of each level (index 0 = level 1) in milliseconds, from `delay_levels`."""
        units = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
        return [int(tok[:-1]) * units[tok[-1]] for tok in self.delay_levels.split()]
