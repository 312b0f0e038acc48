"""A store's geometry read off its files, for a store that did not record it (RocketMQ writes no
`config/rocketstore.json`): where the sizes answer it without doubt.

* commitlog file size: the size every commitlog file has;
* consume-queue file entries: the size every consume-queue file has, over 20;
* index slots and entries: an index file's size is 40 + 4 x slots + 20 x entries, which many pairs
  give; the pair is taken only where RocketMQ's own ratio (4 entries per slot, as 5,000,000 slots and
  20,000,000 entries) gives a whole number of slots. Otherwise nothing is inferred for the index.

Files of different sizes (damage, or a mixed directory) infer nothing.
"""

from __future__ import annotations

from pathlib import Path

from rocketstore.format.consume_queue import UNIT_SIZE
from rocketstore.format.index import index_file_size
from rocketstore.format.store_dirs import COMMITLOG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR

ENTRIES_PER_SLOT = 4  # RocketMQ's defaults: maxHashSlotNum 5,000,000, maxIndexNum 20,000,000


def _one_size(paths: list[Path]) -> int | None:
    sizes = {p.stat().st_size for p in paths if p.is_file() and p.name.isdigit()} - {0}
    return sizes.pop() if len(sizes) == 1 else None


def infer_geometry(root: Path) -> dict[str, int]:
    """The geometry fields the store's files answer unambiguously (StoreConfig field names)."""
    found: dict[str, int] = {}
    commitlog = root / COMMITLOG_DIR
    if commitlog.is_dir() and (size := _one_size(list(commitlog.iterdir()))) is not None:
        found["commitlog_file_size"] = size
    queues = root / CONSUME_QUEUE_DIR
    if queues.is_dir():
        size = _one_size([f for topic in queues.iterdir() if topic.is_dir()
                          for queue in topic.iterdir() if queue.is_dir() for f in queue.iterdir()])
        if size is not None and size % UNIT_SIZE == 0:
            found["consume_queue_file_entries"] = size // UNIT_SIZE
    index = root / INDEX_DIR
    if index.is_dir() and (size := _one_size(list(index.iterdir()))) is not None:
        per_slot = 4 + 20 * ENTRIES_PER_SLOT
        slots, rest = divmod(size - index_file_size(0, 0), per_slot)
        if rest == 0 and slots > 0:
            found["index_hash_slots"] = slots
            found["index_max_entries"] = slots * ENTRIES_PER_SLOT
    return found
