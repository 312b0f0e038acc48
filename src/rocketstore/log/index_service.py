"""IndexService: the list of index files, building keys into them and querying them."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable
from pathlib import Path

from rocketstore.errors import StoreLayoutError
from rocketstore.format.filenames import index_file_name
from rocketstore.format.index import FIRST_ENTRY, index_key
from rocketstore.format.javahash import index_hash_of_signed, index_key_hashes, java_hash_concat
from rocketstore.format.store_dirs import INDEX_DIR
from rocketstore.log.index_file import KEY, IndexFile
from rocketstore.native import speedups

INDEX_BATCH_MIN = 16  # without the compiled hash: from this many keys on, index_keys_of hashes them with numpy


def index_keys_of(records: Iterable[tuple[str, int, Iterable[str], str | None]]) -> bytes:
    """The index keys of records (topic, phy_offset, keys, uniq_key) as `IndexFile.put_keys` takes them
    (`KEY` each): each record's UNIQ_KEY first, then each of its keys, the empty left out, each with its
    index hash (the hash of "topic#key"). The twin of the keys that rocketstore._speedups.pack_run packs
    for a batch."""
    prefixes: list[str] = []
    texts: list[str] = []
    phys: list[int] = []
    for topic, phy_offset, keys, uniq_key in records:
        prefix = index_key(topic, "")
        for key in (uniq_key, *keys) if uniq_key else keys:
            if key:
                prefixes.append(prefix)
                texts.append(key)
                phys.append(phy_offset)
    if speedups is not None or len(texts) < INDEX_BATCH_MIN:
        # compiled, or a few keys: hash each with its topic prefix (compiled: 3x numpy's batch here)
        hashes = list(map(index_hash_of_signed, map(java_hash_concat, prefixes, texts)))
    else:
        hashes = index_key_hashes([p + k for p, k in zip(prefixes, texts, strict=True)])
    return b"".join(map(KEY.pack, hashes, phys))


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
        """Open every index file, in name order (its header read; the file is mapped when touched)."""
        if not self.directory.is_dir():
            return
        for path in sorted(p for p in self.directory.iterdir() if p.is_file() and p.name.isdigit()):
            if path.stat().st_size == 0:
                # A crash between creating a file and sizing it leaves it empty: it holds nothing.
                if not self.read_only:
                    path.unlink()
                continue
            try:
                self.files.append(IndexFile(path, self.slots, self.max_entries, read_only=self.read_only))
            except StoreLayoutError as exc:  # a writable open sets such files aside before loading
                raise StoreLayoutError(f"{exc} (`rocketstore recover` sets it aside and re-indexes)") from None

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
              uniq_key: str | None) -> bool:
        """Index one message under its UNIQ_KEY and each non-empty key (RocketMQ's buildIndex).

        Returns:
            whether keys were added (False: no key, or the message was indexed already).

        Raises:
            OSError: a new file cannot be created.
        """
        current = self.current()
        end = current.header.end_phy_offset
        if phy_offset < end:
            return False  # already indexed
        if not uniq_key and type(keys) is tuple and len(keys) == 1 and keys[0] and phy_offset > end:
            packed = KEY.pack(index_hash_of_signed(java_hash_concat(index_key(topic, ""), keys[0])), phy_offset)
        else:
            packed = index_keys_of(((topic, phy_offset, keys, uniq_key),))
            done = self._indexed_at_end(current, end) * KEY.size if phy_offset == end else 0
            if len(packed) <= done:
                return False
            packed = packed[done:]
        self._put_keys(current, packed, store_timestamp)
        return True

    def _indexed_at_end(self, current: IndexFile, end: int) -> int:
        """How many keys of the record at `end` (the newest entry's phy offset, inherited by an empty
        newest file) are indexed already: a re-dispatch from that record, whose keys a crash may have
        left half written, adds only the others. A record's keys are indexed in one order (UNIQ_KEY,
        then each key: `index_keys_of`), so those present are the first of them."""
        count = current.newest_entries_of(end)
        if current.header.index_count <= FIRST_ENTRY and len(self.files) > 1:
            count = self.files[-2].newest_entries_of(end)
        return count

    def build_keys(self, keys: bytes | bytearray, store_timestamp: int, ends_keyless: bool) -> int:
        """`build` for the messages of a batch, all stored at `store_timestamp`, in log order: their
        index keys packed as `KEY` (`index_keys_of`, as pack_run packs them), each index header
        written once. `ends_keyless`: the batch's last indexed message has no key (when the keys filled
        the file, `build` of that message would have rolled to a new one).

        Returns:
            how many keys were added (those of records indexed already are not added again).

        Raises:
            OSError: a new file cannot be created.
        """
        current = self.current()
        if not keys:
            return 0
        end = current.header.end_phy_offset
        start = 0
        if KEY.unpack_from(keys)[1] <= end:  # keys of messages already indexed (a re-dispatch)
            phys = memoryview(keys).cast("q")[1::2]
            start = bisect_left(phys, end)
            if start < len(phys) and phys[start] == end:
                start = min(bisect_right(phys, end), start + self._indexed_at_end(current, end))
            if start == len(phys):
                return 0
        current = self._put_keys(current, keys, store_timestamp, start)
        if current.full and ends_keyless:
            self.current()
        return len(keys) // KEY.size - start

    def _put_keys(self, current: IndexFile, keys: bytes | bytearray, store_timestamp: int, done: int = 0
                  ) -> IndexFile:
        """Put the keys from `done` on, rolling to a new file when one fills up; the file that took the
        last key."""
        held = len(keys) // KEY.size
        done += current.put_keys(keys, store_timestamp, done)
        while done < held:
            current = self.current()
            done += current.put_keys(keys, store_timestamp, done)
        return current

    def query(self, topic: str, key: str, max_count: int, begin: int, end: int) -> list[int]:
        """Physical offsets whose index entries match the key's hash (newest files first)."""
        key_hash = index_hash_of_signed(java_hash_concat(topic + "#", key))  # index_key's hash, topic# cached
        found: list[int] = []
        for f in reversed(self.files):
            if f.time_matches(begin, end):
                f.lookup(key_hash, max_count, begin, end, found)
            if len(found) >= max_count or f.header.begin_timestamp < begin:
                break
        return found

    def flush(self) -> None:
        """Force every file to disk (the queue flush runs this without the store lock, beside the
        dispatch and retention: see IndexFile.flush).

        Raises:
            OSError: the disk did not accept it.
        """
        for f in list(self.files):
            f.flush()

    def close(self) -> None:
        """Unmap every file."""
        for f in self.files:
            f.close()
