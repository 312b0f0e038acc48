"""The store's marker files: `lock` (POSIX record lock on byte 0, as RocketMQ) and `abort`."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from rocketstore.errors import StoreLockedError
from rocketstore.storage import fs

LOCK_FILE = "lock"
ABORT_FILE = "abort"
LOCK_CONTENT = b"lock"


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
            StoreLockedError: another process holds it.
            OSError: the file cannot be opened.
        """
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
        except OSError:
            os.close(fd)
            raise StoreLockedError(self.path.parent) from None
        os.pwrite(fd, LOCK_CONTENT, 0)
        fs.fsync_fd(fd)
        self._fd = fd

    def release(self) -> None:
        """Release the lock (the file stays, as RocketMQ leaves it)."""
        if self._fd >= 0:
            try:
                fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, 0)
            finally:
                os.close(self._fd)
                self._fd = -1


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
