"""The store's consume queues: each `ConsumeQueue` by (topic, queue id), the next queue offset of each
(RocketMQ's topicQueueTable, which puts take offsets from), and the entries reads passed over because
they point at another queue's record."""

from __future__ import annotations

import logging
from pathlib import Path

from rocketstore.format.store_dirs import queue_dirs
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.derived_ends import QueueKey

log = logging.getLogger("rocketstore.store")


class ConsumeQueues:
    """The consume queues of one store directory."""

    def __init__(self, root: Path, entries_per_file: int, *, read_only: bool) -> None:
        self._root = root
        self._entries_per_file = entries_per_file
        self._read_only = read_only
        self.by_key: dict[QueueKey, ConsumeQueue] = {}
        """Every queue the store holds; readers look queues up here (only this part adds or removes)."""
        self.next_offsets: dict[QueueKey, int] = {}
        """The queue offset the next put to each queue takes: handed to the appenders, which advance it."""
        self._misplaced: dict[QueueKey, int] = {}

    def load(self) -> None:
        """Load the queues of the store's consumequeue directory."""
        for topic, queue_id, _ in queue_dirs(self._root):
            cq = self._new(topic, queue_id)
            cq.load()
            self.by_key[(cq.topic, cq.queue_id)] = cq

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        return ConsumeQueue(self._root, topic, queue_id, self._entries_per_file, read_only=self._read_only)

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        """The queue (topic, queue_id), None when the store holds none."""
        return self.by_key.get((topic, queue_id))

    def queue_for(self, topic: str, queue_id: int) -> ConsumeQueue:
        """The queue (topic, queue_id), made (without files yet) when the store holds none."""
        cq = self.by_key.get((topic, queue_id))
        if cq is None:
            cq = self.by_key[(topic, queue_id)] = self._new(topic, queue_id)
        return cq

    def all(self) -> list[ConsumeQueue]:
        """Every queue, as a list (a snapshot another thread may iterate)."""
        return list(self.by_key.values())

    def reset_offsets(self, min_phy: int) -> None:
        """Take each queue's next offset from its files, and its min offset from the log's oldest byte
        `min_phy` (after recovery, or a read-only open)."""
        for key, cq in self.by_key.items():
            self.next_offsets[key] = cq.max_offset
            cq.correct_min_offset(min_phy)

    def remove_topic(self, topic: str) -> list[QueueKey]:
        """Forget `topic`'s queues and destroy their files; the keys removed."""
        keys = [key for key in self.by_key if key[0] == topic]
        for key in keys:
            cq = self.by_key.pop(key)
            self.next_offsets.pop(key, None)
            self._misplaced.pop(key, None)
            cq.queue.destroy()  # a flush thread holding the queue meanwhile finds nothing to flush
        return keys

    def passed_over(self, topic: str, queue_id: int, offsets: list[int]) -> None:
        """Reads passed over the misplaced entries `offsets` of a queue: counted, and a warning once a
        queue."""
        key = (topic, queue_id)
        seen = self._misplaced.get(key, 0)
        self._misplaced[key] = seen + len(offsets)
        if not seen:
            log.warning("%s: the consume queue %s-%d has an entry at queue offset %d that points at a record "
                        "of another queue or queue offset; reads pass over such entries (this is logged once "
                        "a queue); run `rocketstore recover` to rebuild the queue", self._root, topic, queue_id,
                        offsets[0])

    def misplaced(self) -> dict[QueueKey, int]:
        """(topic, queue id) -> how many misplaced entries reads have passed over (a copy)."""
        return dict(self._misplaced)

    def close(self) -> None:
        """Unmap and close every queue's files."""
        for cq in self.by_key.values():
            cq.close()
