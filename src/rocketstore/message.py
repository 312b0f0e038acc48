"""Message: what a producer hands to `MessageStore.put()`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, fields
from typing import Any, Self

from rocketstore.errors import InvalidMessageError, InvalidMessageTypeError
from rocketstore.native import speedups
from rocketstore.results import PutStatus


def _illegal(reason: str) -> InvalidMessageError:
    return InvalidMessageError(reason, PutStatus.MESSAGE_ILLEGAL)


def _body_bytes(body: object) -> bytes | bytearray | memoryview:
    """A body as Message keeps it: bytes-like as given, a str as UTF-8.

    Raises:
        InvalidMessageError: not bytes-like or a str, or a str UTF-8 cannot encode.
    """
    if isinstance(body, str):
        try:
            return body.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _illegal(f"body: a str with a character UTF-8 cannot encode at {exc.start} (a lone "
                           "surrogate)") from None
    if not isinstance(body, (bytes, bytearray, memoryview)):
        raise _illegal(f"body must be bytes (or a str), not {type(body).__name__}")
    return body


def _keys_tuple(keys: Any) -> tuple[str, ...]:
    """Keys as Message keeps them: a str as the one key, any other iterable as a tuple.

    Raises:
        InvalidMessageTypeError: `keys` is not iterable.
    """
    if isinstance(keys, str):
        return (keys,)
    try:
        return tuple(keys)
    except TypeError:
        raise InvalidMessageTypeError(f"keys must be a str or an iterable of str, not {type(keys).__name__}",
                                      PutStatus.MESSAGE_ILLEGAL) from None


def _new_with_slots_py(cls: type, descriptors: tuple[Any, ...], *values: object) -> Any:
    """A new `cls` with each value stored through its slot descriptor (the compiled fill_slots' twin)."""
    obj: Any = object.__new__(cls)
    for descriptor, value in zip(descriptors, values, strict=True):
        descriptor.__set__(obj, value)
    return obj


_new_with_slots: Callable[..., Any] = _new_with_slots_py if speedups is None else speedups.fill_slots


@dataclass(frozen=True, slots=True, init=False)
class Message:
    """A message to store (slotted: the compiled prepare reads its fields straight from the slots).

    Args:
        topic: RocketMQ topic (letters, digits, `%`, `-`, `_`, `|`; at most 127 characters).
        body: the payload bytes (a str is encoded as UTF-8).
        queue_id: queue of the topic.
        tags: shorthand for the TAGS property.
        keys: shorthand for the KEYS property (joined with single spaces).
        properties: further properties, kept in the caller's order; may carry KEYS, TAGS, UNIQ_KEY,
            DELAY (a delay level 1..18) and WAIT ("false": do not wait for a sync flush).
        flag: producer-defined int32.
        born_timestamp: producer time in ms (default: the store clock).
        born_host: producer address "ip:port" (default: the store host's IP, port 0).
        sys_flag: RocketMQ sys flag (transaction type bits, compression bits).
        reconsume_times: redelivery count.
        prepared_transaction_offset: physical offset of the half message for COMMIT/ROLLBACK records.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    tags: str | None = None
    keys: Iterable[str] = ()
    properties: Mapping[str, str] | None = None
    flag: int = 0
    born_timestamp: int | None = None
    born_host: str | None = None
    sys_flag: int = 0
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0

    def __new__(cls, topic: str, body: bytes | bytearray | memoryview | str, queue_id: int = 0,
                tags: str | None = None, keys: Iterable[str] | str = (), properties: Mapping[str, str] | None = None,
                flag: int = 0, born_timestamp: int | None = None, born_host: str | None = None, sys_flag: int = 0,
                reconsume_times: int = 0, prepared_transaction_offset: int = 0) -> Self:
        """Every other field is checked when the message is put (or given to `check_message`).

        Raises:
            InvalidMessageError: a body that is not bytes-like or a str, or a str UTF-8 cannot encode.
            InvalidMessageTypeError: keys that are not iterable (an InvalidMessageError and a TypeError).
        """
        if type(body) is not bytes:
            body = _body_bytes(body)
        if type(keys) is not tuple:
            keys = _keys_tuple(keys)
        # one call fills the frozen slots (a generated __init__ sets each through object.__setattr__)
        return _new_with_slots(cls, _SLOTS, topic, body, queue_id, tags, keys, properties, flag,
                               born_timestamp, born_host, sys_flag, reconsume_times, prepared_transaction_offset)

    def __reduce__(self) -> tuple[type[Message], tuple[object, ...]]:
        return type(self), tuple(getattr(self, f.name) for f in fields(self))


_SLOTS = tuple(getattr(Message, f.name) for f in fields(Message))
"""Message's slot descriptors in field order (the order of __new__'s arguments)."""

if speedups is not None:
    # A call of Message itself builds the common message (a bytes body, keys as a tuple) in one compiled
    # step, the type's vectorcall, and hands every other call to `__new__` above, the reference (the
    # figures are in docs/benchmarks.md).
    speedups.install_message_call(Message, _SLOTS, tuple(f.default for f in fields(Message)), MISSING,
                                  Message.__new__)
