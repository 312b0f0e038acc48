"""How far the consume queues and the index reached when they were last forced to disk:
`config/derivedEnds.json` (rocketstore's own file; RocketMQ has no such record and ignores it).

Queues and index files are derived from the log, and one that lost entries (a deleted, emptied,
truncated or zero-filled file) reads as a shorter one: nothing in its own files says entries are
missing, and the next put would take a lost queue offset again, or a query would miss the lost keys.
This record is their lower bound:

* a queue that ends below its recorded max offset, while the recorded last entry still points inside
  the recovered log, or whose first file starts above the recorded one while the log kept its start
  (so no retention deleted queue files since), lost entries and is rebuilt from the log;
* an index file that is gone, or holds fewer entries than recorded, while its records are still in the
  log, lost keys: it and every newer index file are dropped and their records indexed again.

And the log never ends below where it was on disk then: a log that does (a commitlog file deleted or cut)
lost records, which the recovery report names (`lost`).

Queue offsets and index entries only grow (retention keeps the newest file of every queue and deletes
index files only below the log's start), so an older record, its `.bak` included, is still a true
lower bound.

    {"indexFiles": [[<name>, <begin phy offset>, <end phy offset>, <index count>], ...],
     "logFlushed": <how far the commitlog was on disk>, "logMin": <the commitlog's min offset>,
     "queues": {"<topic>": {<queue id>: [<max offset>, <end of the last entry's record in the log>,
                                         <queue offset its first file starts at>]}}}
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketstore.format.consume_queue import UNIT_SIZE
from rocketstore.format.store_dirs import CONFIG_DIR, DERIVED_ENDS_FILE
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.index_service import IndexService
from rocketstore.log.json_config import JAVA_INT_MAX, StateFileProblem, java_int, load_state, write_json

QueueKey = tuple[str, int]
QueueEnd = tuple[int, int, int]
"""(max offset: one past the last entry's queue offset, the end of that entry's record in the log, the
queue offset its first file starts at)"""
IndexEnd = tuple[str, int, int, int]
"""(file name, header's begin phy offset, end phy offset, index count)"""


@dataclass
class Ends:
    """What the derived files held, as `snapshot` read it."""

    queues: dict[QueueKey, QueueEnd] = field(default_factory=dict)
    index_files: list[IndexEnd] = field(default_factory=list)
    log_min: int = 0
    log_flushed: int = 0


def snapshot(queues: Iterable[ConsumeQueue], index: IndexService, log_min: int, log_flushed: int) -> Ends:
    """The ends of the queues that hold entries and of every index file, the log's min offset and how
    far the log is on disk (read under the store lock, before the flush that puts them on disk)."""
    return Ends({(cq.topic, cq.queue_id): (cq.max_offset, cq.max_physic_offset, cq.queue.min_offset // UNIT_SIZE)
                 for cq in queues if cq.max_physic_offset > 0 and cq.max_offset > 0},
                [(f.path.name, f.header.begin_phy_offset, f.header.end_phy_offset, f.header.index_count)
                 for f in index.files], log_min, log_flushed)


class DerivedEnds:
    """The recorded ends of a store's queues and index files."""

    def __init__(self, root: Path) -> None:
        self.path = root / CONFIG_DIR / DERIVED_ENDS_FILE
        self._written: Ends | None = None
        self._lock = threading.Lock()  # the queue flush and `flush()` both write it
        self.generation = 0
        """Raised (under the store lock) when queues leave the store (a topic deleted): a snapshot
        taken before may no longer be written."""

    def next_generation(self) -> int:
        """Queues left the store: raise `generation` (under the store lock) and answer it."""
        self.generation += 1
        return self.generation

    def load(self, *, quarantine: Path | None) -> tuple[Ends | None, StateFileProblem | None]:
        """The recorded ends (None: no record, as in a store RocketMQ wrote) and what was wrong with the
        file (`json_config.load_state`: a damaged file is replaced by its .bak, or set aside).

        Raises:
            OSError: a damaged file could not be quarantined.
        """
        root = self.path.parent.parent
        ends, problem = load_state(root, self.path, _parse, lambda: None, quarantine=quarantine)
        self._written = ends if problem is None else None
        return ends, problem

    def persist(self, ends: Ends, generation: int | None = None) -> None:
        """Replace the record with `ends` (atomically, the previous one kept as `.bak`) unless it holds
        them already, or unless they were taken at a `generation` that queues leaving the store have
        since passed. `ends` must be what the files hold on disk now.

        Raises:
            OSError: the file could not be written; the previous record is still in place.
        """
        with self._lock:
            if ends == self._written or (generation is not None and generation < self.generation):
                return
            table: dict[str, dict[int, list[int]]] = {}
            for (topic, queue_id), end in sorted(ends.queues.items()):
                table.setdefault(topic, {})[queue_id] = list(end)
            write_json(self.path, {"indexFiles": [list(f) for f in ends.index_files], "logFlushed": ends.log_flushed,
                                   "logMin": ends.log_min, "queues": table})
            self._written = ends


def _parse(data: dict[str, Any]) -> Ends:
    """The ends of derivedEnds.json's content.

    Raises:
        ValueError: a value that is not what `persist` writes.
    """
    table = data["queues"]
    if not isinstance(table, dict) or not isinstance(data["indexFiles"], list):
        raise ValueError("queues is not an object or indexFiles not a list")
    ends = Ends(log_min=java_int(data["logMin"], "logMin"), log_flushed=java_int(data["logFlushed"], "logFlushed"))
    for topic, queues in table.items():
        if not isinstance(queues, dict):
            raise ValueError(f"queues of {topic!r} is not an object")
        for queue_id, end in queues.items():
            where = f"{topic}/{queue_id}"
            if not isinstance(end, list) or len(end) != 3:
                raise ValueError(f"{where}: {end!r} is not [max offset, log end, first file]")
            ends.queues[(topic, _queue_id(queue_id, where))] = (java_int(end[0], f"max offset of {where}"),
                                                                java_int(end[1], f"log end of {where}"),
                                                                java_int(end[2], f"first file of {where}"))
    for entry in data["indexFiles"]:
        if not isinstance(entry, list) or len(entry) != 4 or not isinstance(entry[0], str) or not entry[0].isdigit():
            raise ValueError(f"index file {entry!r} is not [name, begin, end, count]")
        name, begin, end, count = entry
        ends.index_files.append((name, java_int(begin, f"begin of index {name}"), java_int(end, f"end of index {name}"),
                                 java_int(count, f"count of index {name}", JAVA_INT_MAX)))
    return ends


def _queue_id(value: Any, where: str) -> int:
    """A queue id as RocketMQ names queue directories (a Java int, -1 included).

    Raises:
        ValueError: anything else.
    """
    text = str(value)
    if not (text[1:] if text.startswith("-") else text).isdigit() or not -1 <= int(text) <= JAVA_INT_MAX:
        raise ValueError(f"queue id of {where} is not a queue id")
    return int(text)
