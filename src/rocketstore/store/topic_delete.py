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
from typing import TYPE_CHECKING

from rocketstore.errors import InvalidArgumentError
from rocketstore.format.store_dirs import CONSUME_QUEUE_DIR
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.log.derived_ends import snapshot

if TYPE_CHECKING:
    from rocketstore.store.message_store import MessageStore

log = logging.getLogger("rocketstore.store")


def delete_topic(store: MessageStore, topic: str) -> bool:
    """Delete `topic`'s consume queues and its entry in config/topics.json (see the module docstring).

    Returns:
        True when the store knew the topic (queues or a topics.json entry), False when it did not.

    Raises:
        StoreClosedError: the store was closed.
        StoreReadOnlyError: the store is read-only (or turned read-only after a disk error).
        InvalidArgumentError: `topic` is not a non-empty str, or is SCHEDULE_TOPIC_XXXX (the store's own).
        OSError: a file could not be deleted or topics.json or the record not written (what was deleted
            stays deleted; the next `flush()` writes both files again).
    """
    store._check_writable()
    if not isinstance(topic, str) or not topic:
        raise InvalidArgumentError(f"delete_topic: topic must be a non-empty str, not {topic!r}")
    if topic == SCHEDULE_TOPIC:
        raise InvalidArgumentError(f"delete_topic: {topic} holds the store's delayed messages")
    with store._lock:
        store._dispatch_behind_locked()  # a record not dispatched yet would bring a queue back
        keys = [key for key in store._queues if key[0] == topic]
        for key in keys:
            cq = store._queues.pop(key)
            store._queue_table.pop(key, None)
            store._misplaced.pop(key, None)
            cq.queue.destroy()  # a flush thread holding the queue meanwhile finds nothing to flush
        known = store.topics.remove(topic) or bool(keys)
        store._derived_ends.generation += 1  # a queue flush's earlier snapshot still holds the topic
        generation = store._derived_ends.generation
        ends = snapshot(store._queues.values(), store.index, store.commitlog.min_offset,
                        store.commitlog.queue.flushed_offset)
    folder = store.path / CONSUME_QUEUE_DIR / topic
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()
    store.topics.persist()
    store._derived_ends.persist(ends, generation)
    if known:
        log.info("%s: topic %s deleted (%d consume queues)", store.path, topic, len(keys))
    return known
