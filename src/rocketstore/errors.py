"""The whole exception tree of rocketstore, and nothing else.

    RocketStoreError                      base; never raised itself
    ├── FormatError                       raised only by rocketstore.format
    │   ├── CorruptRecordError            bad magic, CRC mismatch, impossible length
    │   └── UnsupportedVersionError       a magic code this version cannot read
    ├── StoreError
    │   ├── StoreClosedError              the store was closed
    │   ├── StoreLockedError              another process owns the store
    │   ├── StoreReadOnlyError            opened read-only, or turned read-only after a disk error
    │   ├── StoreLayoutError              files on disk do not match the configured geometry
    │   ├── MessageNotFoundError          no record at that offset or id
    │   ├── StoreResourceError            the process ran out of file descriptors
    │   ├── IndexDamagedError             a query met an index file that is damaged
    │   └── RecoveryError                 recovery found damage it will not repair on its own
    ├── InvalidMessageError (ValueError)  caller input: too large, bad topic, properties too long
    │   └── InvalidMessageTypeError (TypeError too)  a Message argument of a type it cannot take
    ├── InvalidArgumentError (ValueError) any other argument out of its range (offsets, counts, names)
    └── ProtocolError                     the remoting protocol
        ├── LocalProtocolError
        └── RemoteProtocolError
"""

from __future__ import annotations

from typing import Any


class RocketStoreError(Exception):
    """Base class of every error rocketstore raises on purpose."""


class FormatError(RocketStoreError):
    """Bytes that do not follow a RocketMQ layout."""


class CorruptRecordError(FormatError):
    """A record that cannot be decoded: bad magic, CRC mismatch or impossible lengths.

    Attributes:
        pos: byte position of the record start inside the buffer given to the decoder.
        reason: short human-readable cause.
    """

    def __init__(self, pos: int, reason: str) -> None:
        super().__init__(f"corrupt record at position {pos}: {reason}")
        self.pos = pos
        self.reason = reason


class UnsupportedVersionError(FormatError):
    """A record magic code this version of rocketstore does not read."""

    def __init__(self, magic: int) -> None:
        super().__init__(f"unsupported record magic 0x{magic & 0xFFFFFFFF:08X}")
        self.magic = magic


class StoreError(RocketStoreError):
    """The store cannot do what was asked in its current state."""


class StoreClosedError(StoreError):
    """The store was closed."""


class StoreLockedError(StoreError):
    """Another writer holds the store's lock file: another process, or an open store in this one."""

    def __init__(self, path: Any, *, in_this_process: bool = False) -> None:
        if in_this_process:
            message = (f"store {path} is already open for writing in this process (that open store holds its "
                       "lock); close it first, use the open store, or open this one read-only")
        else:
            message = f"store {path} is locked by another process (a broker or another writer)"
        super().__init__(message)
        self.path = path
        self.in_this_process = in_this_process


class StoreReadOnlyError(StoreError):
    """The store accepts no writes: opened read-only, or turned read-only after a disk error."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"store is read-only: {reason}")
        self.reason = reason


class StoreLayoutError(StoreError):
    """The files on disk do not match the configured geometry or naming."""


class StoreResourceError(StoreError):
    """The process has no file descriptor left to open or map a store file (`ulimit -n`)."""


class IndexDamagedError(StoreError):
    """A query met an index file whose slots or entries break the index's invariants; its answer would be
    incomplete, so none is given. `rocketstore recover` (a writable open) rebuilds the file.

    Attributes:
        path: the index file.
        reason: what is wrong in it.
    """

    def __init__(self, path: Any, reason: str) -> None:
        super().__init__(f"index file {path} is damaged ({reason}); `rocketstore recover` rebuilds it")
        self.path = path
        self.reason = reason


class MessageNotFoundError(StoreError, LookupError):
    """No message at the given physical offset or message id."""


class RecoveryError(StoreError):
    """Recovery found damage it will not repair on its own."""

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class InvalidMessageError(RocketStoreError, ValueError):
    """A message the store refuses to write; nothing was written.

    Attributes:
        status: the `PutStatus` RocketMQ reports for this case (MESSAGE_ILLEGAL or
            PROPERTIES_SIZE_EXCEEDED).
    """

    def __init__(self, message: str, status: Any) -> None:
        super().__init__(message)
        self.status = status


class InvalidMessageTypeError(InvalidMessageError, TypeError):
    """A `Message(...)` argument of a type it cannot take (keys that are not an iterable); a TypeError
    too, as Python's own error for it was."""


class InvalidArgumentError(RocketStoreError, ValueError):
    """An argument outside what the call accepts (the message names it); nothing was changed."""


class ProtocolError(RocketStoreError):
    """A remoting protocol violation."""


class LocalProtocolError(ProtocolError):
    """We were asked to send something the protocol does not allow."""


class RemoteProtocolError(ProtocolError):
    """The peer sent something the protocol does not allow."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code
