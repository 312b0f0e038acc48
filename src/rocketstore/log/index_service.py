"""IndexService: the list of index files, building keys into them and querying them."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from rocketstore.format.filenames import index_file_name
from rocketstore.format.index import index_key
from rocketstore.format.javahash import index_hash_of_signed, index_key_hashes, java_hash_concat
from rocketstore.log.index_file import IndexFile
from rocketstore.native import speedups

_native_collect = None if speedups is None else speedups.collect_index_keys

INDEX_DIR = "index"
INDEX_BATCH_MIN = 16  # without the compiled hash: from this many keys on, build_many hashes them with numpy


def collect_index_keys_py(records: list[tuple[str, int, int, Sequence[str], str | None]], indexed_end: int
                          ) -> tuple[list[int], list[int], list[int], int]:
    """(hashes, phys, stamps, last_keyed): the keys of the records not yet indexed (phy_offset >=
    `indexed_end`), UNIQ_KEY first, empty keys skipped, each with its index hash and its record's
    physical offset and store timestamp; `last_keyed` is the index of the last record with a key (-1:
    none). The twin of rocketstore._speedups.collect_index_keys."""
    prefixes: list[str] = []
    texts: list[str] = []
    phys: list[int] = []
    stamps: list[int] = []
    last_keyed = -1
    for i, (topic, phy_offset, store_timestamp, keys, uniq_key) in enumerate(records):
        if phy_offset < indexed_end:
            continue  # already indexed
        prefix = index_key(topic, "")
        for key in (uniq_key, *keys) if uniq_key else keys:
            if key:
                prefixes.append(prefix)
                texts.append(key)
                phys.append(phy_offset)
                stamps.append(store_timestamp)
                last_keyed = i
    if speedups is not None or len(texts) < INDEX_BATCH_MIN:
        # compiled, or a few keys: hash each with its topic prefix (compiled: 3x numpy's batch here)
        hashes = list(map(index_hash_of_signed, map(java_hash_concat, prefixes, texts)))
    else:
        hashes = index_key_hashes([p + k for p, k in zip(prefixes, texts, strict=True)])
    return hashes, phys, stamps, last_keyed


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
        # Called with a full file's endTimestamp once that file is on disk (checkpoint.indexMsgTimestamp).
        self.on_file_flushed: Callable[[int], None] | None = None

    def load(self) -> None:
        """Map every index file, in name order."""
        if not self.directory.is_dir():
            return
        for path in sorted(p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit()):
            if path.stat().st_size == 0:
                # A crash between creating a file and sizing it leaves it empty: it holds nothing.
                if not self.read_only:
                    path.unlink()
                continue
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
                full = self.files[-1]
                full.flush()
                if self.on_file_flushed is not None:
                    self.on_file_flushed(full.header.end_timestamp)
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
        prefix = index_key(topic, "")
        if not uniq_key and type(keys) is tuple and len(keys) == 1 and keys[0]:  # the usual message: one key
            hashes = [index_hash_of_signed(java_hash_concat(prefix, keys[0]))]
        else:
            hashes = [index_hash_of_signed(java_hash_concat(prefix, key))  # the hash of prefix + key
                      for key in ((uniq_key, *keys) if uniq_key else keys) if key]
            if not hashes:
                return
        phys, stamps = (phy_offset,) * len(hashes), (store_timestamp,) * len(hashes)
        done = current.put_keys(hashes, phys, stamps)
        if done < len(hashes):  # the file filled up
            self._put_keys(self.current(), hashes, phys, stamps, done)

    def build_many(self, records: Iterable[tuple[str, int, int, Sequence[str], str | None]]) -> None:
        """`build` for many messages in log order: (topic, phy_offset, store_timestamp, keys, uniq_key)
        each. Every key is hashed in one pass and each index header is written once.

        Raises:
            OSError: a new file cannot be created.
        """
        records = list(records)
        if not records:
            return
        current = self.current()
        collected = None if _native_collect is None else _native_collect(records, current.header.end_phy_offset)
        if collected is None:
            collected = collect_index_keys_py(records, current.header.end_phy_offset)
        hashes, phys, stamps, last_keyed = collected
        if not hashes:
            return
        current = self._put_keys(current, hashes, phys, stamps)
        if current.full and last_keyed < len(records) - 1:
            self.current()  # `build` of a later (keyless) record would roll to a new file now

    def _put_keys(self, current: IndexFile, hashes: Sequence[int], phys: Sequence[int], stamps: Sequence[int],
                  done: int = 0) -> IndexFile:
        """Put the keys from `done` on, rolling to a new file when one fills up; the file that took the
        last key."""
        done += current.put_keys(hashes, phys, stamps, done)
        while done < len(hashes):
            current = self.current()
            done += current.put_keys(hashes, phys, stamps, done)
        return current

    def query(self, topic: str, key: str, max_count: int, begin: int, end: int) -> list[int]:
        """Physical offsets whose index entries match the key's hash (newest files first)."""
        key_hash = index_hash_of_signed(java_hash_concat(index_key(topic, ""), key))  # topic# hash is cached
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
