"""IndexService: the list of index files, building keys into them and querying them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from rocketstore.format.filenames import index_file_name
from rocketstore.format.index import index_key
from rocketstore.format.javahash import index_key_hash
from rocketstore.log.index_file import IndexFile

INDEX_DIR = "index"


class IndexService:
    """Index files in `index/`, oldest first; the last one takes new keys."""

    def __init__(self, root: Path, slots: int, max_entries: int, *, read_only: bool = False,
                 clock: Callable[[], int]) -> None:
        self.directory = root / INDEX_DIR
        self.slots = slots
        self.max_entries = max_entries
        self.read_only = read_only
        self.clock = clock
        self.files: list[IndexFile] = []

    def load(self) -> None:
        """Map every index file, in name order."""
        if not self.directory.is_dir():
            return
        for path in sorted(p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit()):
            self.files.append(IndexFile(path, self.slots, self.max_entries, read_only=self.read_only))

    def drop_newer_than(self, timestamp: int) -> list[Path]:
        """Delete the files whose endTimestamp is after `timestamp` (abnormal-exit pruning)."""
        doomed = [f for f in self.files if f.header.end_timestamp > timestamp]
        self.files = [f for f in self.files if f.header.end_timestamp <= timestamp]
        for f in doomed:
            f.destroy()
        return [f.path for f in doomed]

    def _new_file(self) -> IndexFile:
        self.directory.mkdir(parents=True, exist_ok=True)
        now = self.clock()
        path = self.directory / index_file_name(now)
        while path.exists() or (self.files and path.name <= self.files[-1].path.name):
            now += 1
            path = self.directory / index_file_name(now)
        new = IndexFile(path, self.slots, self.max_entries, create=True)
        if self.files:
            prev = self.files[-1].header
            if prev.end_phy_offset > 0:
                new.header.begin_phy_offset = new.header.end_phy_offset = prev.end_phy_offset
            if prev.end_timestamp > 0:
                new.header.begin_timestamp = new.header.end_timestamp = prev.end_timestamp
            new.write_header()
        self.files.append(new)
        return new

    def current(self) -> IndexFile:
        """The file taking keys, created when there is none or the last is full.

        Raises:
            OSError: a new file cannot be created.
        """
        if not self.files or self.files[-1].full:
            if self.files:
                self.files[-1].flush()
            return self._new_file()
        return self.files[-1]

    def build(self, topic: str, phy_offset: int, store_timestamp: int, keys: Iterable[str],
              uniq_key: str | None) -> None:
        """Index one message under its UNIQ_KEY and each non-empty key (RocketMQ's buildIndex).

        Raises:
            OSError: a new file cannot be created.
        """
        current = self.current()
        if phy_offset < current.header.end_phy_offset:
            return  # already indexed
        if uniq_key:
            current = self._put(current, index_key(topic, uniq_key), phy_offset, store_timestamp)
        for key in keys:
            if key:
                current = self._put(current, index_key(topic, key), phy_offset, store_timestamp)

    def _put(self, current: IndexFile, key: str, phy_offset: int, store_timestamp: int) -> IndexFile:
        key_hash = index_key_hash(key)
        while not current.put_key(key_hash, phy_offset, store_timestamp):
            current = self.current()
        return current

    def query(self, topic: str, key: str, max_count: int, begin: int, end: int) -> list[int]:
        """Physical offsets whose index entries match the key's hash (newest files first)."""
        key_hash = index_key_hash(index_key(topic, key))
        found: list[int] = []
        for f in reversed(self.files):
            if f.time_matches(begin, end):
                f.lookup(key_hash, max_count, begin, end, found)
            if f.header.begin_timestamp < begin or len(found) >= max_count:
                break
        return found

    def flush(self) -> None:
        """Force every file to disk.

        Raises:
            OSError: the disk did not accept it.
        """
        for f in self.files:
            f.flush()

    def close(self) -> None:
        """Unmap every file."""
        for f in self.files:
            f.close()
