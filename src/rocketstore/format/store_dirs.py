"""The layout of a store directory (RocketMQ's storePathRootDir), declared once:

    <root>/commitlog/<20-digit start offset>            the log
    <root>/consumequeue/<topic>/<queue id>/<20 digits>  one consume queue per topic and queue id
    <root>/index/<yyyyMMddHHmmssSSS>                    hash index files
    <root>/config/*.json                                consumer offsets, topics, delay progress...
    <root>/config/rocketstore.json                      the geometry rocketstore recorded (not RocketMQ's)
    <root>/config/derivedEnds.json                      queue and index ends at the last flush (not RocketMQ's)
    <root>/checkpoint, <root>/lock, <root>/abort         flush times, the writer's lock, the crash marker
    <root>/quarantine/                                   bytes recovery set aside (not RocketMQ's)
    <root>/.creating-*                                   a store file being sized, before it is linked in

`queue_dirs` is the one walk over the consume-queue directories.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

COMMITLOG_DIR = "commitlog"
CONSUME_QUEUE_DIR = "consumequeue"
INDEX_DIR = "index"
CONFIG_DIR = "config"
CHECKPOINT_FILE = "checkpoint"
LOCK_FILE = "lock"
ABORT_FILE = "abort"
QUARANTINE_DIR = "quarantine"
STORE_CONFIG_FILE = "rocketstore.json"
DERIVED_ENDS_FILE = "derivedEnds.json"
STAGING_PREFIX = ".creating-"
"""A new commitlog, consume-queue or index file is made and sized in the root under this prefix, then
linked in under its name (RocketMQ lists the file directories, never the root's unknown files)."""


def staging_dir(path: Path) -> Path:
    """Where the store file `path` is made before it is linked in: the store's root, by the layout above
    (the file's own directory for a file outside that layout)."""
    parents = path.parents
    if len(parents) > 1 and parents[0].name in (COMMITLOG_DIR, INDEX_DIR):
        return parents[1]
    if len(parents) > 3 and parents[2].name == CONSUME_QUEUE_DIR:
        return parents[3]
    return path.parent


def queue_id_of(name: str) -> int | None:
    """The queue id a consume-queue directory name gives (RocketMQ names it by the int, -1 included),
    None for any other name."""
    digits = name[1:] if name.startswith("-") else name
    return int(name) if digits.isdigit() else None


def queue_dirs(root: Path) -> Iterator[tuple[str, int, Path]]:
    """(topic, queue id, directory) of every consume queue under `root`, sorted by topic then name."""
    base = root / CONSUME_QUEUE_DIR
    if not base.is_dir():
        return
    for topic_dir in sorted(p for p in base.iterdir() if p.is_dir()):
        for queue_dir in sorted(p for p in topic_dir.iterdir() if p.is_dir()):
            queue_id = queue_id_of(queue_dir.name)
            if queue_id is not None:
                yield topic_dir.name, queue_id, queue_dir
