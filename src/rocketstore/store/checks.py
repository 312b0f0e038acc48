"""The argument checks every part of the store makes: ints that Java's int and long can hold, queue names,
and the store clock's default."""

from __future__ import annotations

import time

from rocketstore.errors import InvalidArgumentError
from rocketstore.format.layout import JAVA_LONG_MAX, JAVA_LONG_MIN

LONG_MAX = JAVA_LONG_MAX
LONG_MIN = JAVA_LONG_MIN


def system_clock() -> int:
    """Epoch milliseconds: the store clock unless `MessageStore.open` is given another."""
    return time.time_ns() // 1_000_000


def is_int(value: object) -> bool:
    """An int argument: an int or a subclass of int other than bool."""
    return type(value) is int or (isinstance(value, int) and not isinstance(value, bool))


def check_int(what: str, value: object, maximum: int, minimum: int = 0) -> None:
    """Raises InvalidArgumentError unless `value` is an int (not a bool) in [minimum, maximum]."""
    if not is_int(value) or not minimum <= value <= maximum:  # type: ignore[operator]
        raise InvalidArgumentError(f"{what} must be an int in [{minimum}, {maximum}], not {value!r}")


def check_optional_int(what: str, value: object, minimum: int = LONG_MIN, maximum: int = LONG_MAX) -> None:
    """Raises InvalidArgumentError unless `value` is None or an int (not a bool) in [minimum, maximum]."""
    if value is not None:
        check_int(what, value, maximum, minimum)


def check_queue(what: str, topic: object, queue_id: object) -> None:
    """Raises InvalidArgumentError unless `topic` is a str and `queue_id` an int (not a bool): a queue's
    name (an unknown queue is no error: it is empty)."""
    if not isinstance(topic, str):
        raise InvalidArgumentError(f"{what}: topic must be a str, not {type(topic).__name__}")
    if not is_int(queue_id):
        raise InvalidArgumentError(f"{what}: queue_id must be an int, not {queue_id!r}")
