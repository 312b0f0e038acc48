"""Durable consumer state of gRPC (RocketMQ 5 "pop") consumers: per group, topic and queue, what is
acknowledged and what is in flight.

For each (group, topic, queue):

* ``offset``: every message below it is done (acknowledged, skipped by the filter, or sent to the DLQ).
  It is also committed as the group's consumer offset (config/consumerOffset.json), where RocketMQ 4.9.8
  and rocketstore's tools see it.
* ``cursor``: the next queue offset never looked at.
* ``inflight``: queue offset -> `Inflight` for messages between the two that are not done: delivered and
  invisible until ``visible_at_ms``, or waiting (not yet delivered: a delivery time in the future, or a
  FIFO message group whose earlier message is in flight).
* ``done``: offsets between the two already finished out of order.

The whole table is kept in ``config/grpcConsumerState.json``, replaced atomically (write to a temporary
file, fsync, rename) after every change, so an acknowledged message never comes back and an unacknowledged
one comes back after its invisible time, across restarts. The file is rocketstore's own: RocketMQ ignores
unknown files under config/, and no message is moved or rewritten for it.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketstore.errors import RocketStoreError
from rocketstore.format.store_dirs import CONFIG_DIR

STATE_FILE = Path(CONFIG_DIR) / "grpcConsumerState.json"
FORMAT_VERSION = 1


class ConsumerStateError(RocketStoreError):
    """config/grpcConsumerState.json cannot be read."""


@dataclass(slots=True)
class Inflight:
    """A message of a queue that is not done yet.

    Attributes:
        visible_at_ms: when it may be delivered (again).
        attempt: deliveries so far (0: waiting for its first).
        handle: token of the current receipt handle (None before the first delivery).
        message_group: FIFO message group, if any.
    """

    visible_at_ms: int
    attempt: int = 0
    handle: str | None = None
    message_group: str | None = None

    def to_json(self) -> list[Any]:
        return [self.visible_at_ms, self.attempt, self.handle, self.message_group]


@dataclass(slots=True)
class QueueState:
    """One group's progress in one queue."""

    offset: int
    cursor: int
    inflight: dict[int, Inflight] = field(default_factory=dict)
    done: set[int] = field(default_factory=set)

    def finish(self, queue_offset: int) -> None:
        """Mark `queue_offset` done and move `offset` over every finished offset at its front."""
        self.inflight.pop(queue_offset, None)
        if queue_offset >= self.offset:
            self.done.add(queue_offset)
        while self.offset in self.done:
            self.done.discard(self.offset)
            self.offset += 1
        self.done = {o for o in self.done if o >= self.offset}

    def to_json(self) -> dict[str, Any]:
        return {"offset": self.offset, "cursor": self.cursor,
                "inflight": {str(k): v.to_json() for k, v in sorted(self.inflight.items())},
                "done": sorted(self.done)}

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> QueueState:
        inflight = {int(k): Inflight(int(v[0]), int(v[1]), v[2], v[3]) for k, v in item.get("inflight", {}).items()}
        return cls(int(item["offset"]), int(item["cursor"]), inflight, {int(o) for o in item.get("done", [])})


Key = tuple[str, str, int]  # group, topic, queue id


class ConsumerStateTable:
    """Every gRPC consumer group's `QueueState`, persisted in the store's config folder.

    Args:
        store_root: the store directory.
    """

    def __init__(self, store_root: Path) -> None:
        self.path = Path(store_root) / STATE_FILE
        self.queues: dict[Key, QueueState] = {}
        self.version = 0  # changes counted by mark_changed

    def load(self) -> None:
        """Read the state file, if there is one.

        Raises:
            ConsumerStateError: the file is not the JSON this module writes.
        """
        if not self.path.exists():
            return
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            self.queues = {(q["group"], q["topic"], int(q["queueId"])): QueueState.from_json(q)
                           for q in data["queues"]}
        except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
            raise ConsumerStateError(f"{self.path} cannot be read: {exc}") from exc

    def get(self, key: Key) -> QueueState | None:
        """State of (group, topic, queue id), None when the group never received from the queue."""
        return self.queues.get(key)

    def put(self, key: Key, state: QueueState) -> None:
        self.queues[key] = state

    def save(self) -> None:
        """Replace the state file atomically with the current table."""
        self.write(self.snapshot())

    def mark_changed(self) -> None:
        """Count a change for `StateSaver` (which saves it before the change is answered)."""
        self.version += 1

    def snapshot(self) -> bytes:
        """The file's bytes for the current table."""
        items = [{"group": g, "topic": t, "queueId": q, **state.to_json()}
                 for (g, t, q), state in sorted(self.queues.items())]
        return json.dumps({"version": FORMAT_VERSION, "queues": items}, separators=(",", ":")).encode()

    def write(self, data: bytes, *, sync: bool = True) -> None:
        """Replace the state file with `data`: temporary file, fsync (unless `sync` is False: the bytes
        are then in the page cache, which outlives the process but not the machine), rename."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            if sync:
                os.fsync(out.fileno())
        os.replace(tmp, self.path)


class StateSaver:
    """Group commit of the state file for the event loop: `persisted()` returns once a save that began
    after the caller's change is on disk. One save (the snapshot taken on the loop, the write and fsync
    in a thread) covers every change made before it began, so acknowledgements arriving together share
    one fsync instead of each paying its own, and none is answered before its change is durable.

    Args:
        table: the state.
        sync: fsync each save (the store's SYNC flush mode); False, as RocketMQ's ASYNC flush mode
            treats its acknowledgement records: a save is in the file (the page cache) before the change
            is answered, so it outlives a crash of the process, not of the machine.
        in_memory: never write (a broker over a read-only store): the state lives until the process ends.
    """

    def __init__(self, table: ConsumerStateTable, *, sync: bool = True, in_memory: bool = False) -> None:
        self.table = table
        self.sync = sync
        self.in_memory = in_memory
        self._saved = table.version
        self._saving: asyncio.Task[None] | None = None

    async def persisted(self) -> None:
        """Wait until every change made so far is in the file.

        Raises:
            OSError: the file could not be written.
        """
        if self.in_memory:
            return
        wanted = self.table.version
        while self._saved < wanted:
            if self._saving is None or self._saving.done():
                self._saving = asyncio.create_task(self._save())
            await asyncio.shield(self._saving)

    async def _save(self) -> None:
        version, data = self.table.version, self.table.snapshot()
        await asyncio.to_thread(self.table.write, data, sync=self.sync)
        self._saved = max(self._saved, version)
