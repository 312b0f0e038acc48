"""Topic configuration: `config/topics.json` in RocketMQ's TopicConfigManager shape."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rocketstore.format.store_dirs import CONFIG_DIR
from rocketstore.log.json_config import JAVA_INT_MAX, StateFileProblem, java_int, load_state, write_json

TOPICS_FILE = "topics.json"
PERM_READ_WRITE = 6
DEFAULT_QUEUE_NUMS = 4


class TopicConfigs:
    """Topics this store knows, with their queue counts."""

    def __init__(self, root: Path, clock: Callable[[], int]) -> None:
        self.path = root / CONFIG_DIR / TOPICS_FILE
        self._clock = clock
        self._table: dict[str, dict[str, Any]] = {}
        self._counter = 0
        self._dirty = False
        self._lock = threading.Lock()
        self._write_queue_nums: dict[str, int] = {}  # topics only grow: a put's check needs no lock

    def load(self, *, quarantine: Path | None = None) -> StateFileProblem | None:
        """Read the file (`json_config.load_state`: a damaged one is replaced by its .bak, or nothing).

        Returns:
            what was wrong with the file, None when nothing was.

        Raises:
            OSError: a damaged file could not be quarantined.
        """
        root = self.path.parent.parent
        (self._table, self._counter), problem = load_state(root, self.path, _parse_topics, lambda: ({}, 0),
                                                           quarantine=quarantine)
        self._write_queue_nums = {}
        return problem

    def get(self, topic: str) -> dict[str, Any] | None:
        """The topic's config dict (RocketMQ field names), None when unknown."""
        return self._table.get(topic)

    def topics(self) -> dict[str, dict[str, Any]]:
        """Every topic's config."""
        return dict(self._table)

    def ensure(self, topic: str, queue_nums: int = DEFAULT_QUEUE_NUMS) -> None:
        """Know `topic` with at least `queue_nums` read and write queues."""
        if self._write_queue_nums.get(topic, 0) >= queue_nums:
            return
        with self._lock:
            current = self._table.get(topic)
            if current and int(current.get("writeQueueNums", 0)) >= queue_nums:
                self._write_queue_nums[topic] = int(current.get("writeQueueNums", 0))
                return
            nums = max(queue_nums, int(current.get("writeQueueNums", 0)) if current else 0)
            self._table[topic] = {
                "order": False, "perm": PERM_READ_WRITE, "readQueueNums": nums,
                "topicFilterType": "SINGLE_TAG", "topicName": topic, "topicSysFlag": 0,
                "writeQueueNums": nums, **({k: v for k, v in (current or {}).items()
                                           if k not in ("readQueueNums", "writeQueueNums")}),
            }
            self._write_queue_nums[topic] = nums
            self._counter += 1
            self._dirty = True

    def put(self, topic: str, read_queue_nums: int, write_queue_nums: int, perm: int,
            attributes: Mapping[str, str] | None = None) -> None:
        """Know `topic` with exactly these queue counts and permission (an admin's create or update);
        `attributes` are set over the recorded ones (RocketMQ 5's, e.g. ``{"message.type": "FIFO"}``)."""
        with self._lock:
            current = self._table.get(topic) or {"order": False, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0}
            self._table[topic] = {**current, "perm": perm, "readQueueNums": read_queue_nums,
                                  "topicName": topic, "writeQueueNums": write_queue_nums}
            if attributes:
                recorded = current.get("attributes")
                self._table[topic]["attributes"] = {**(recorded if isinstance(recorded, dict) else {}),
                                                    **attributes}
            self._write_queue_nums.pop(topic, None)
            self._counter += 1
            self._dirty = True

    def remove(self, topic: str) -> bool:
        """Forget `topic` (an admin's delete); True when it was known."""
        with self._lock:
            self._write_queue_nums.pop(topic, None)
            if self._table.pop(topic, None) is None:
                return False
            self._counter += 1
            self._dirty = True
            return True

    def persist(self, *, force: bool = False) -> None:
        """Write the file when something changed.

        Raises:
            OSError: the file could not be written.
        """
        with self._lock:
            if not (self._dirty or force):
                return
            table = {name: dict(sorted(cfg.items())) for name, cfg in self._table.items()}
            data = {"dataVersion": {"counter": self._counter, "timestamp": self._clock()},
                    "topicConfigTable": table}
            self._dirty = False
        write_json(self.path, data)


_QUEUE_COUNTS = ("readQueueNums", "writeQueueNums")


def _parse_topics(data: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], int]:
    """The topic table and data-version counter of topics.json's content.

    Raises:
        ValueError: a topic entry that is not an object, or a queue count that is not an int Java reads.
    """
    table = data.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise ValueError(f"topicConfigTable is a {type(table).__name__}, not an object")
    parsed: dict[str, dict[str, Any]] = {}
    for name, entry in table.items():
        if not isinstance(entry, dict):
            raise ValueError(f"topic {name!r} is a {type(entry).__name__}, not an object")
        parsed[str(name)] = {**entry, **{k: java_int(entry[k], f"{k} of topic {name!r}", JAVA_INT_MAX)
                                         for k in _QUEUE_COUNTS if k in entry}}
    version = data.get("dataVersion") or {}
    counter = java_int(version.get("counter", 0), "dataVersion.counter") if isinstance(version, dict) else 0
    return parsed, counter
