"""The message properties string: `name\\x01value\\x02name\\x01value...` as UTF-8.

RocketMQ 4.9.8 writes no separator after the last pair; 5.2+ ends every pair with one. The parse rule
is RocketMQ's exactly: split on U+0002; keep a segment only if its first U+0001 is at index >= 1 and
<= len-2; name before it, value after it (the value may hold further U+0001); later names win.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from rocketstore.format.javahash import java_hash
from rocketstore.native import speedups

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
MAX_PROPERTIES_LENGTH = 32767  # int16 length field

# Property names the store reads.
KEYS = "KEYS"
TAGS = "TAGS"
UNIQ_KEY = "UNIQ_KEY"
WAIT = "WAIT"
DELAY = "DELAY"
REAL_TOPIC = "REAL_TOPIC"
REAL_QID = "REAL_QID"
KEY_SEPARATOR = " "


def encode_properties(props: Mapping[str, str] | Iterable[tuple[str, str]], *,
                      trailing_separator: bool = False) -> str:
    """Join properties in the given order, 4.9.8 style (no separator after the last pair)."""
    items = props.items() if isinstance(props, Mapping) else props
    text = PROPERTY_SEPARATOR.join(f"{k}{NAME_VALUE_SEPARATOR}{v}" for k, v in items)
    if trailing_separator and text:
        text += PROPERTY_SEPARATOR
    return text


def decode_properties_py(text: str) -> dict[str, str]:
    """Parse a properties string with RocketMQ's rule (insertion order = stored order); the pure-Python
    twin of `decode_properties`."""
    result: dict[str, str] = {}
    for segment in text.split(PROPERTY_SEPARATOR):
        # partition: name = before the first U+0001 (non-empty iff it is at index >= 1), value = after
        # it (non-empty iff it is at index <= len-2; a segment without one has no value)
        name, _, value = segment.partition(NAME_VALUE_SEPARATOR)
        if name and value:
            if name in result:
                del result[name]  # a later name wins and takes the later position
            result[name] = value
    return result


if speedups is not None:
    decode_properties: Callable[[str], dict[str, str]] = speedups.decode_properties
else:
    decode_properties = decode_properties_py
"""Parse a properties string with RocketMQ's rule (compiled where rocketstore._speedups was built)."""


def _decode_properties_reference(text: str) -> dict[str, str]:
    """RocketMQ's loop as written in Java (kept for the tests that hold `decode_properties` to it)."""
    result: dict[str, str] = {}
    for segment in text.split(PROPERTY_SEPARATOR):
        sep = segment.find(NAME_VALUE_SEPARATOR)
        if 1 <= sep <= len(segment) - 2:
            name = segment[:sep]
            result.pop(name, None)
            result[name] = segment[sep + 1:]
    return result


def split_keys(keys: str | None) -> list[str]:
    """The non-empty space-separated tokens of a KEYS value."""
    if not keys:
        return []
    if KEY_SEPARATOR not in keys:
        return [keys]
    return [k for k in keys.split(KEY_SEPARATOR) if k]


def _spread(name: str) -> int:
    h = java_hash(name) & 0xFFFFFFFF
    return h ^ (h >> 16)


def java_hashmap_order(names: Iterable[str], initial_capacity: int = 16) -> list[str]:
    """Iteration order of a Java HashMap into which `names` were put in this order.

    Java iterates bucket by bucket (bucket = spread(hash) & (capacity - 1)) and keeps insertion
    order inside a bucket, also across resizes; the table doubles when size exceeds 0.75 x capacity.
    """
    unique = list(dict.fromkeys(names))
    capacity = initial_capacity
    while len(unique) > capacity * 3 // 4:
        capacity *= 2
    return sorted(unique, key=lambda n: _spread(n) & (capacity - 1))
