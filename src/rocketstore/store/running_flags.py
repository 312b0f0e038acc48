"""Whether the store is open and writable, and why not (RocketMQ's RunningFlags): the one state every part
of `MessageStore` checks before it reads or writes."""

from __future__ import annotations

from pathlib import Path

from rocketstore.errors import StoreClosedError, StoreReadOnlyError

DISK_FULL_REASON = "disk full"


class RunningFlags:
    """Open or closed, writable or read-only with the reason (opened so, a write or sync that failed, a
    full disk). Only `MessageStore` and its write path change them."""

    __slots__ = ("closed", "path", "read_only", "read_only_reason")

    def __init__(self, path: Path, *, read_only: bool) -> None:
        self.path = path
        self.read_only = read_only
        """Opened read-only: no lock taken, nothing written, ever."""
        self.closed = False
        self.read_only_reason: str | None = "opened read-only" if read_only else None
        """Why puts are refused now (None: writable)."""

    def check_open(self) -> None:
        """Raises StoreClosedError once the store was closed."""
        if self.closed:
            raise StoreClosedError(f"store {self.path} is closed")

    def check_writable(self) -> None:
        """Raises StoreClosedError or StoreReadOnlyError (with its reason) unless a put may write now."""
        if self.closed:
            raise StoreClosedError(f"store {self.path} is closed")
        if self.read_only_reason is not None:
            raise StoreReadOnlyError(self.read_only_reason)

    def check_not_opened_read_only(self) -> None:
        """Raises StoreClosedError, or StoreReadOnlyError for a store opened read-only (what the state
        files' setters refuse; a store turned read-only by a disk error still records them)."""
        self.check_open()
        if self.read_only:
            raise StoreReadOnlyError(self.read_only_reason or "opened read-only")

    def close(self) -> None:
        """Every call raises StoreClosedError from now on."""
        self.closed = True

    def turn_read_only(self, reason: str) -> None:
        """Refuse puts from now on, for `reason` (the first reason given stays)."""
        if self.read_only_reason is None:
            self.read_only_reason = reason

    def disk_failed(self) -> bool:
        """True after a write or sync failed (a merely full disk still flushes and closes cleanly)."""
        reason = self.read_only_reason
        return reason is not None and not reason.startswith(DISK_FULL_REASON)

    def disk_has_room(self) -> bool:
        """Writable again after a full disk has room: True when the store was read-only for that alone."""
        reason = self.read_only_reason
        if reason is not None and reason.startswith(DISK_FULL_REASON):
            self.read_only_reason = None
            return True
        return False
