"""The store's marker files: `lock` (POSIX record lock on byte 0, as RocketMQ) and `abort`."""

from __future__ import annotations

import fcntl
import os
import threading
from pathlib import Path

from rocketstore.errors import StoreLockedError
from rocketstore.format.store_dirs import ABORT_FILE, LOCK_FILE
from rocketstore.storage import fs

LOCK_CONTENT = b"lock"

# POSIX record locks belong to the process, so a second writer inside this process would get the lock
# again; this registry keeps one writer per store per process too.
_HELD: set[Path] = set()
_HELD_GUARD = threading.Lock()


class StoreLock:
    """An exclusive POSIX (fcntl) lock on byte 0 of `<root>/lock`.

    RocketMQ's broker takes the same lock (`FileChannel.tryLock(0, 1, false)`), so a rocketstore
    writer and a live broker exclude each other.
    """

    def __init__(self, root: Path) -> None:
        self.path = root / LOCK_FILE
        self._fd = -1

    def acquire(self) -> None:
        """Take the lock and write `lock` into the file.

        Raises:
            StoreLockedError: another process holds it, or a store open in this process.
            OSError: the file cannot be opened.
        """
        key = self.path.resolve()
        with _HELD_GUARD:
            if key in _HELD:
                raise StoreLockedError(self.path.parent, in_this_process=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                os.close(fd)
                raise StoreLockedError(self.path.parent) from None
            try:
                os.pwrite(fd, LOCK_CONTENT, 0)
                fs.fsync_fd(fd)
            except OSError:
                os.close(fd)
                raise
            _HELD.add(key)
            self._fd = fd

    def release(self) -> None:
        """Release the lock (the file stays, as RocketMQ leaves it)."""
        if self._fd >= 0:
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self._fd)
                self._fd = -1
                with _HELD_GUARD:
                    _HELD.discard(self.path.resolve())


def abort_file_exists(root: Path) -> bool:
    """True when the previous run did not close cleanly."""
    return (root / ABORT_FILE).exists()


def create_abort_file(root: Path) -> None:
    """Mark the store as running (removed again at a clean close).

    Raises:
        OSError: the file cannot be created.
    """
    (root / ABORT_FILE).touch()
    fs.fsync_dir(root)


def remove_abort_file(root: Path) -> None:
    """Mark a clean close."""
    (root / ABORT_FILE).unlink(missing_ok=True)
    fs.fsync_dir(root)
