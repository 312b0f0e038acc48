"""Consumer progress: `config/consumerOffset.json` (key `<topic>@<group>`, inner key queue id)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from rocketstore.errors import StoreClosedError
from rocketstore.format.store_dirs import CONFIG_DIR
from rocketstore.log.json_config import JAVA_INT_MAX, StateFileProblem, java_int, load_state, write_json

CONSUMER_OFFSET_FILE = "consumerOffset.json"
TOPIC_GROUP_SEPARATOR = "@"


class ConsumerOffsets:
    """Committed offsets per group, topic and queue, persisted as RocketMQ's consumerOffset.json."""

    def __init__(self, root: Path) -> None:
        self.path = root / CONFIG_DIR / CONSUMER_OFFSET_FILE
        self._table: dict[str, dict[int, int]] = {}
        self._dirty = False
        self._sealed = False
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()  # one write of the file at a time, in the order of their snapshots

    def load(self, *, quarantine: Path | None = None) -> StateFileProblem | None:
        """Read the file (`json_config.load_state`: a damaged one is replaced by its .bak, or nothing).

        Returns:
            what was wrong with the file, None when nothing was.

        Raises:
            OSError: a damaged file could not be quarantined.
        """
        root = self.path.parent.parent
        self._table, problem = load_state(root, self.path, _parse_offsets, dict, quarantine=quarantine)
        return problem

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record the next offset `group` will consume from (topic, queue_id).

        Raises:
            StoreClosedError: `seal` was called: the table takes no more commits.
        """
        with self._lock:
            if self._sealed:
                raise StoreClosedError(f"{self.path}: the store was closed; the offset was not committed")
            self._table.setdefault(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {})[queue_id] = offset
            self._dirty = True

    def get(self, group: str, topic: str, queue_id: int) -> int | None:
        """The committed offset, None when the group never committed one for that queue."""
        return self._table.get(f"{topic}{TOPIC_GROUP_SEPARATOR}{group}", {}).get(queue_id)

    def all(self) -> dict[str, dict[tuple[str, int], int]]:
        """group -> (topic, queue id) -> offset."""
        result: dict[str, dict[tuple[str, int], int]] = {}
        with self._lock:
            for key, queues in self._table.items():
                topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
                for queue_id, offset in queues.items():
                    result.setdefault(group, {})[(topic, queue_id)] = offset
        return result

    def seal(self) -> bool:
        """Take no more commits (`commit` raises StoreClosedError from now on).

        Returns:
            whether commits arrived since the last `persist` (a commit that raced the closing store's
            final flush): the caller persists them.
        """
        with self._lock:
            self._sealed = True
            return self._dirty

    def persist(self, *, force: bool = False) -> None:
        """Write the file when something changed.

        Raises:
            OSError: the file could not be written (what it would have held stays to write).
        """
        with self._write_lock:  # a slower writer of an older snapshot never overwrites a newer one
            with self._lock:
                if not (self._dirty or force):
                    return
                table = {k: dict(sorted(v.items())) for k, v in self._table.items()}
                self._dirty = False
            try:
                write_json(self.path, {"offsetTable": table})
            except BaseException:
                with self._lock:
                    self._dirty = True
                raise


def _parse_offsets(data: dict[str, Any]) -> dict[str, dict[int, int]]:
    """The offset table of consumerOffset.json's content.

    Raises:
        ValueError: a key without `@`, or a queue id or offset that is not an integer Java reads.
    """
    table = data.get("offsetTable") or {}
    if not isinstance(table, dict):
        raise ValueError(f"offsetTable is a {type(table).__name__}, not an object")
    parsed: dict[str, dict[int, int]] = {}
    for key, queues in table.items():
        if TOPIC_GROUP_SEPARATOR not in key or not isinstance(queues, dict):
            raise ValueError(f"offsetTable entry {key!r} is not topic@group -> {{queue: offset}}")
        parsed[key] = {java_int(q, f"queue id {q!r} of {key}", JAVA_INT_MAX): java_int(o, f"offset of {key} queue {q}")
                       for q, o in queues.items()}
    return parsed
