"""TopicTable: which topics the broker serves, with how many queues and which permissions.

Topics are
created on first send (from the producer's defaultTopic), by UPDATE_AND_CREATE_TOPIC, for consumer
groups (retry topics, one queue) and from the queues already in the store at start.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rocketstore.format.topics import AUTO_CREATE_TOPIC, DLQ_PREFIX, RETRY_PREFIX, SCHEDULE_TOPIC

if TYPE_CHECKING:
    from rocketstore.store import MessageStore

log = logging.getLogger(__name__)

PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
TOPIC_NAME = re.compile(r"^[%|a-zA-Z0-9_-]+$")
MAX_TOPIC_LENGTH = 127
MAX_QUEUE_NUMS = 65535
# RocketMQ 5's topic attribute naming the kind of messages a topic takes (TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE)
MESSAGE_TYPE_ATTRIBUTE = "message.type"
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")


@dataclass(slots=True)
class TopicConfig:
    """One topic's queue counts and permissions."""

    name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int = PERM_READ | PERM_WRITE
    attributes: dict[str, str] = field(default_factory=dict)  # RocketMQ 5's, e.g. {"message.type": "FIFO"}

    @property
    def message_type(self) -> str | None:
        """The topic's `message.type` attribute (NORMAL, FIFO, DELAY, TRANSACTION), None when not set."""
        return self.attributes.get(MESSAGE_TYPE_ATTRIBUTE)

    def to_json(self) -> dict[str, object]:
        answer: dict[str, object] = {"order": False, "perm": self.perm, "readQueueNums": self.read_queue_nums,
                                     "topicFilterType": "SINGLE_TAG", "topicName": self.name, "topicSysFlag": 0,
                                     "writeQueueNums": self.write_queue_nums}
        if self.attributes:
            answer["attributes"] = dict(self.attributes)
        return answer


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """A topic to declare when the broker starts (`serve --topic NAME[:QUEUES[:TYPE]]`)."""

    name: str
    queue_nums: int
    message_type: str | None = None

    @classmethod
    def parse(cls, text: str, default_queue_nums: int) -> TopicSpec:
        """`NAME`, `NAME:QUEUES`, `NAME:QUEUES:TYPE` or `NAME::TYPE` (QUEUES left out: `default_queue_nums`).

        Raises:
            ValueError: a name RocketMQ refuses, QUEUES not in 1..65535, a TYPE not in MESSAGE_TYPES, or
                more than three parts; the message names the spec.
        """
        parts = text.split(":")
        if len(parts) > 3:
            raise ValueError(f"topic spec {text!r} is not NAME[:QUEUES[:TYPE]]")
        name, queues, kind = (parts + ["", ""])[:3]
        if not valid_topic(name):
            raise ValueError(f"topic spec {text!r}: {name!r} is not a topic name (up to {MAX_TOPIC_LENGTH} "
                             "of letters, digits, %, |, _ and -)")
        queue_nums = default_queue_nums
        if queues:
            if not queues.isdigit() or not 1 <= int(queues) <= MAX_QUEUE_NUMS:
                raise ValueError(f"topic spec {text!r}: queues {queues!r} is not a number in 1..{MAX_QUEUE_NUMS}")
            queue_nums = int(queues)
        message_type = kind.upper() or None
        if message_type is not None and message_type not in MESSAGE_TYPES:
            raise ValueError(f"topic spec {text!r}: type {kind!r} is not one of {', '.join(MESSAGE_TYPES)}")
        return cls(name, queue_nums, message_type)

    def __str__(self) -> str:
        return f"{self.name}:{self.queue_nums}" + (f":{self.message_type}" if self.message_type else "")


def declare_topics(store: MessageStore, table: TopicTable, specs: Iterable[TopicSpec]) -> None:
    """Create or update each topic of `specs`, read-write, in the store's topics.json and in `table`.

    Raises:
        RocketStoreError: the store refused a topic (read-only store, a name a put refuses).
    """
    for spec in specs:
        attributes = {MESSAGE_TYPE_ATTRIBUTE: spec.message_type} if spec.message_type else {}
        store.record_topic(spec.name, spec.queue_nums, spec.queue_nums, PERM_READ | PERM_WRITE, attributes)
        table.put(TopicConfig(spec.name, spec.queue_nums, spec.queue_nums, PERM_READ | PERM_WRITE, attributes))
        log.info("topic %s declared: %d queues%s", spec.name, spec.queue_nums,
                 f", message type {spec.message_type}" if spec.message_type else "")


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
        """Create or replace a topic config; a config without attributes keeps the current ones (as
        RocketMQ's updateAndCreateTopic keeps the attributes a request does not name)."""
        current = self.topics.get(config.name)
        if current is not None and not config.attributes:
            config.attributes = dict(current.attributes)
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
                attributes = item.get("attributes")
                self.topics[name] = TopicConfig(name, need, need, perm, {
                    str(k): str(v) for k, v in attributes.items()} if isinstance(attributes, dict) else {})
            elif current.write_queue_nums < need:
                current.read_queue_nums = current.write_queue_nums = need
