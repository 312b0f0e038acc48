"""Deleting a topic's consume queues (RocketMQ's DELETE_TOPIC_IN_BROKER: `cleanUnusedTopic` of one topic).

The topic's queue files and folder go, its queues leave the queue table and the topic leaves
config/topics.json; config/derivedEnds.json is rewritten without its queues, so the next open does not
take the missing files for damage and rebuild them from the log. The topic's records stay in the
commitlog (and its keys in the index) until retention deletes their files, as in RocketMQ. A send to the
topic afterwards starts its queues again at offset 0.

A thorough queue flush that sampled the record before the delete does not write that sample after it
(`DerivedEnds.generation`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from threading import Lock

from rocketstore.errors import InvalidArgumentError
from rocketstore.format.store_dirs import CONSUME_QUEUE_DIR
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.log.commitlog import CommitLog
from rocketstore.log.derived_ends import DerivedEnds, snapshot
from rocketstore.log.index_service import IndexService
from rocketstore.log.topic_config import TopicConfigs
from rocketstore.store.queues import ConsumeQueues
from rocketstore.store.write_path import WritePath

log = logging.getLogger("rocketstore.store")


@dataclass(frozen=True, slots=True)
class TopicParts:
    """The parts of a store a topic's deletion changes or reads."""

    root: Path
    lock: Lock
    writes: WritePath
    queues: ConsumeQueues
    topics: TopicConfigs
    derived_ends: DerivedEnds
    index: IndexService
    commitlog: CommitLog


def delete_topic(topic: str, store: TopicParts) -> bool:
    """Delete `topic`'s consume queues and its entry in config/topics.json (see the module docstring); the
    caller checked the store is writable.

    Returns:
        True when the store knew the topic (queues or a topics.json entry), False when it did not.

    Raises:
        InvalidArgumentError: `topic` is not a non-empty str, or is SCHEDULE_TOPIC_XXXX (the store's own).
        OSError: a file could not be deleted or topics.json or the record not written (what was deleted
            stays deleted; the next `flush()` writes both files again).
    """
    if not isinstance(topic, str) or not topic:
        raise InvalidArgumentError(f"delete_topic: topic must be a non-empty str, not {topic!r}")
    if topic == SCHEDULE_TOPIC:
        raise InvalidArgumentError(f"delete_topic: {topic} holds the store's delayed messages")
    with store.lock:
        store.writes.dispatch_behind_locked()  # a record not dispatched yet would bring a queue back
        keys = store.queues.remove_topic(topic)
        known = store.topics.remove(topic) or bool(keys)
        generation = store.derived_ends.next_generation()  # a queue flush's earlier snapshot still holds the topic
        ends = snapshot(store.queues.all(), store.index, store.commitlog.min_offset,
                        store.commitlog.queue.flushed_offset)
    folder = store.root / CONSUME_QUEUE_DIR / topic
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    store.topics.persist()
    store.derived_ends.persist(ends, generation)
    if known:
        log.info("%s: topic %s deleted (%d consume queues)", store.root, topic, len(keys))
    return known
