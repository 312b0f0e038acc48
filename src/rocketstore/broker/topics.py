"""TopicTable: which topics the broker serves, with how many queues and which permissions.

Topics are
created on first send (from the producer's defaultTopic), by UPDATE_AND_CREATE_TOPIC, for consumer
groups (retry topics, one queue) and from the queues already in the store at start.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rocketstore.format.topics import AUTO_CREATE_TOPIC, DLQ_PREFIX, RETRY_PREFIX, SCHEDULE_TOPIC

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")
MAX_TOPIC_LENGTH = 127


@dataclass(slots=True)
class TopicConfig:
    """One topic's queue counts and permissions."""

    name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ | PERM_WRITE

    def to_json(self) -> dict[str, object]:
        return {"order": False, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                "topicFilterType": "SINGLE_TAG", "topicName": self.name, "topicSysFlag": 0,
                "writeQueueNums": self.write_queue_nums}


def valid_topic(name: str) -> bool:
    """True for a topic name RocketMQ's broker accepts."""
    return 0 < len(name) <= MAX_TOPIC_LENGTH and bool(TOPIC_NAME.match(name))


class TopicTable:
    """Topic configs of a running broker, kept in memory.

    The store owns `config/topics.json` (it records every topic it dispatches to); the table is
    seeded from it and from the store's queues at start, so topics with messages survive a restart.
    Topics created here without messages yet are re-created on demand (first send, heartbeat).

    Args:
        default_queue_nums: queue count of TBW102 and of topics created on first send.
    """

    def __init__(self, default_queue_nums: int) -> None:
        self.default_queue_nums = default_queue_nums
        self.topics: dict[str, TopicConfig] = {}
        self.ensure(AUTO_CREATE_TOPIC, default_queue_nums, PERM_READ | PERM_WRITE | PERM_INHERIT)

    def get(self, name: str) -> TopicConfig | None:
        """Config of `name`, or None."""
        return self.topics.get(name)

    def ensure(self, name: str, queue_nums: int, perm: int = PERM_READ | PERM_WRITE) -> TopicConfig:
        """Config of `name`, creating it when missing."""
        config = self.topics.get(name)
        if config is None:
            config = TopicConfig(name, queue_nums, queue_nums, perm)
            self.topics[name] = config
        return config

    def put(self, config: TopicConfig) -> None:
        """Create or replace a topic config."""
        self.topics[config.name] = config

    def adopt(self, recorded: Mapping[str, Mapping[str, Any]], queues: Mapping[str, list[int]]) -> None:
        """Know the topics of the store's topics.json (`recorded`) and of its queues.

        A recorded topic gets its recorded queue count, one known only from its queues at least
        `default_queue_nums` (retry and dead-letter topics: as many as they use); each always enough to
        reach its highest queue id.
        """
        names = (set(recorded) | set(queues)) - {SCHEDULE_TOPIC}
        for name in names:
            ids = queues.get(name) or [0]
            item = recorded.get(name) or {}
            recorded_nums = int(item.get("writeQueueNums", 0) or 0)
            need = max(max(ids) + 1, recorded_nums)
            if not recorded_nums and not name.startswith((RETRY_PREFIX, DLQ_PREFIX)):
                need = max(need, self.default_queue_nums)
            current = self.topics.get(name)
            if current is None:
                perm = int(item.get("perm", PERM_READ | PERM_WRITE) or PERM_READ | PERM_WRITE)
                self.topics[name] = TopicConfig(name, need, need, perm)
            elif current.write_queue_nums < need:
                current.read_queue_nums = current.write_queue_nums = need
