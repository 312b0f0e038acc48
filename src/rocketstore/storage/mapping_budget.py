"""How many files the process keeps mapped at once.

A mapping holds one file descriptor (Python's `mmap` keeps a duplicate of the descriptor it was made
from), and a process has few of them (`ulimit -n` is often 1024). A store of 10,000 consume queues has
at least 10,000 files, and one of small index files may have thousands of those, so every store file
(commitlog, consume queue and index files alike) is mapped when first touched and unmapped again when
the budget is spent: the mapping touched least recently, by a clock sweep, is let go. The files being
written are touched by every put, so they stay.

Letting a mapping go drops the file's reference to it; the mapping is unmapped, and its descriptor
closed, when the last reader holding it lets go as well (a reader in another thread never finds a
mapping closed under it). Bytes written through a mapping let go are in the page cache like any
others: the next `msync` of the file's range, through a new mapping, forces them to disk (on Linux,
msync of a shared file mapping syncs the file's range, whichever mapping dirtied it).
"""

from __future__ import annotations

import errno
import mmap
import os
import resource
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, TypeVar

from rocketstore.errors import StoreResourceError

_T = TypeVar("_T")
_OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)

MIN_MAPPINGS = 64
"""The budget never goes below this, whatever the descriptor limit."""

SHARE_OF_DESCRIPTORS = 2
"""At most 1/2 of the process's descriptor limit goes to mappings; the rest stays for sockets, locks
and the files a store opens briefly."""


class Unmappable(Protocol):
    """A file that can let its mapping go."""

    touched: bool

    def unmap(self) -> None: ...


def default_capacity() -> int:
    """Mappings kept at once: a share of the soft descriptor limit (`ulimit -n`), at least MIN_MAPPINGS."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft <= 0:
        soft = 1 << 20
    return max(MIN_MAPPINGS, soft // SHARE_OF_DESCRIPTORS)


class MappingBudget:
    """The files mapped now, oldest first; admitting one past `capacity` unmaps another."""

    def __init__(self, capacity: int | None = None) -> None:
        self._capacity = capacity  # None: follow the descriptor limit, which a process may change
        self._mapped: OrderedDict[int, Unmappable] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def capacity(self) -> int:
        """Mappings kept at once."""
        return self._capacity if self._capacity is not None else default_capacity()

    def __len__(self) -> int:
        return len(self._mapped)

    def admit(self, item: Unmappable) -> None:
        """Count `item`'s new mapping, letting others go while over the budget."""
        with self._lock:
            self._mapped[id(item)] = item
            victims = self._sweep(len(self._mapped) - self.capacity)
        for victim in victims:
            victim.unmap()

    def release(self, item: Unmappable) -> None:
        """`item` let its mapping go by itself."""
        with self._lock:
            self._mapped.pop(id(item), None)

    def shed(self, count: int) -> int:
        """Let `count` mappings go now (the process ran out of descriptors); returns how many went."""
        with self._lock:
            victims = self._sweep(count)
        for victim in victims:
            victim.unmap()
        return len(victims)

    def _sweep(self, count: int) -> list[Unmappable]:
        """Pick `count` mappings to let go: the oldest not touched since the last sweep passed it."""
        victims: list[Unmappable] = []
        passes = 2 * len(self._mapped)
        while len(victims) < count and self._mapped and passes > 0:
            passes -= 1
            key, item = self._mapped.popitem(last=False)
            if item.touched:
                item.touched = False
                self._mapped[key] = item
            else:
                victims.append(item)
        return victims


BUDGET = MappingBudget()
"""The process's budget: descriptors are a process-wide limit, shared by every open store."""


def with_descriptors(what: str, path: Path, call: Callable[[], _T]) -> _T:
    """`call()`, which needs a file descriptor; when the process has none left, mappings are let go
    and the call is tried once more.

    Raises:
        StoreResourceError: still no descriptor (the limit is too low for what the process holds).
        OSError: any other failure of `call`.
    """
    try:
        return call()
    except OSError as exc:
        if exc.errno not in _OUT_OF_DESCRIPTORS:
            raise
    if BUDGET.shed(max(1, len(BUDGET) // 4)):
        try:
            return call()
        except OSError as exc:
            if exc.errno not in _OUT_OF_DESCRIPTORS:
                raise
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    raise StoreResourceError(f"cannot {what} {path}: the process has no file descriptor left (ulimit -n is "
                             f"{soft}, {len(BUDGET)} store files mapped); raise the limit")


def map_file(path: Path, size: int, *, read_only: bool) -> mmap.mmap:
    """Map the first `size` bytes of an existing file (shared); no descriptor stays open but the
    mapping's own.

    Raises:
        StoreResourceError: no file descriptor left.
        OSError: the file cannot be opened or mapped.
    """
    flags = os.O_RDONLY if read_only else os.O_RDWR
    fd = with_descriptors("open", path, lambda: os.open(path, flags))
    try:
        access = mmap.ACCESS_READ if read_only else mmap.ACCESS_WRITE
        return with_descriptors("map", path, lambda: mmap.mmap(fd, size, access=access))
    finally:
        os.close(fd)
