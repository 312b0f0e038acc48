"""The first step of a put: a `Message` checked against RocketMQ's rules and shaped into the parts of its
commitlog record (RocketMQ's checkMessageAndReturnSize and the properties handling of its producer side).

What comes out, a `Prepared` tuple, holds everything the append under the store lock needs: the header
layout for the host IP lengths, the encoded tail (topic and properties), the body's CRC, the dispatch
decisions (queue entry, index entry, tags code, delay level) and the keys to index. Nothing here touches
a file; `MessageStore.put_batch` prepares every message of a batch before it writes any.
"""

from __future__ import annotations

import re
import struct
import types
import zlib
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, NamedTuple, cast

from rocketstore import kernels
from rocketstore.config import StoreConfig
from rocketstore.errors import InvalidArgumentError, InvalidMessageError
from rocketstore.format import properties as props
from rocketstore.format.hosts import parse_host
from rocketstore.format.javahash import tags_code
from rocketstore.format.layout import JAVA_INT_MAX, JAVA_INT_MIN, JAVA_LONG_MAX, JAVA_LONG_MIN
from rocketstore.format.message import (
    CRC_MASK,
    PREFIX_SIZE,
    PROPERTIES_LENGTH,
    header_struct,
    record_sys_flag,
    topic_field,
)
from rocketstore.format.sysflag import gets_index_entry, gets_queue_entry
from rocketstore.format.topics import BROKER_WRITTEN_TOPICS, SCHEDULE_TOPIC, refuses_sends
from rocketstore.message import Message
from rocketstore.results import PutStatus

__all__ = [
    "BLANK_RECORD_SIZE",
    "Prepared",
    "Preparer",
    "checked_message",
    "checked_messages",
    "checked_topic",
    "illegal",
    "topic_part",
    "message_checker",
]

_native_prepare = kernels.prepare_plain
_native_prepare_many = kernels.prepare_many

MESSAGE_FIELDS = ("topic", "body", "queue_id", "tags", "keys", "properties", "born_host", "sys_flag", "flag",
                  "born_timestamp", "reconsume_times", "prepared_transaction_offset")
"""The Message fields the compiled prepare reads, in the order it takes their slots."""


def message_slots() -> tuple[Any, ...] | None:
    """Message's slot descriptors for MESSAGE_FIELDS, in order (the compiled prepare reads the fields of
    a message of exactly that class through the members they define, and declines any other object), or
    None when Message has no such slots (the compiled prepare then declines every message)."""
    slots = tuple(vars(Message).get(name) for name in MESSAGE_FIELDS)
    return slots if all(isinstance(slot, types.MemberDescriptorType) for slot in slots) else None


_MESSAGE_SLOTS = message_slots()

TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
MAX_TOPIC_LENGTH = 127
RECORD_SIZE_SLACK = 64 * 1024  # a record may exceed max_message_size by this much (RocketMQ)
BLANK_RECORD_SIZE = PREFIX_SIZE  # a record must leave room for the blank record that closes a file


def illegal(reason: str) -> InvalidMessageError:
    """The error of a message a put refuses (status MESSAGE_ILLEGAL)."""
    return InvalidMessageError(reason, PutStatus.MESSAGE_ILLEGAL)


class Prepared(NamedTuple):
    """A validated message with its variable parts encoded, ready to append under the lock."""

    topic: str
    queue_id: int
    queue_key: tuple[str, int]
    body: bytes
    body_crc: int
    head: struct.Struct  # the header layout for these born/store IP lengths
    tail: bytes  # TOPICLENGTH through PROPERTIES
    flag: int
    sys_flag: int  # as given: its transaction bits decide the dispatch
    record_sys_flag: int  # as stored: IPv6 bits set from the IP lengths
    born_timestamp: int | None
    born_ip: bytes
    born_port: int
    reconsume_times: int
    prepared_offset: int
    size: int
    wait: bool
    in_queue: bool
    indexed: bool
    delay_level: int
    tags_code: int
    keys: tuple[str, ...]
    uniq_key: str | None


def new_prepared(*fields: Any) -> Prepared:
    return tuple.__new__(Prepared, fields)  # NamedTuple's own __new__ costs a Python-level call


def checked_message(message: object) -> Message:
    """`message`, when it is a Message.

    Raises:
        InvalidMessageError: anything else (status MESSAGE_ILLEGAL).
    """
    if not isinstance(message, Message):
        raise illegal(f"a message must be a rocketstore Message, not {type(message).__name__}")
    return message


def checked_messages(what: str, messages: object) -> list[Message] | tuple[Message, ...]:
    """The messages of a batch as a list (or the tuple given), each not yet checked.

    Raises:
        InvalidArgumentError: `messages` is not an iterable (a str or bytes is not a batch either).
    """
    if isinstance(messages, (list, tuple)):
        return messages
    if isinstance(messages, (str, bytes, bytearray, memoryview, Message)):
        raise InvalidArgumentError(f"{what}: messages must be an iterable of Message, not {type(messages).__name__}")
    try:
        return list(messages)  # type: ignore[call-overload]
    except TypeError:
        raise InvalidArgumentError(f"{what}: messages must be an iterable of Message, not "
                                   f"{type(messages).__name__}") from None


def topic_part(topic: object) -> bytes:
    """`checked_topic(topic)` of a str.

    Raises:
        InvalidMessageError: a topic a put refuses, or not a str.
    """
    if type(topic) is not str and not isinstance(topic, str):  # (an unhashable one would fail the cache)
        raise illegal(f"topic must be a str, not {type(topic).__name__}")
    return checked_topic(topic)


@lru_cache(maxsize=1024)
def checked_topic(topic: str) -> bytes:
    """TOPICLENGTH + TOPIC of a topic (a str: `topic_part` checks it is) that passes RocketMQ's topic
    rules (cached: topics repeat)."""
    if not topic:
        raise illegal("topic is empty")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise illegal(f"topic of {len(topic)} characters exceeds {MAX_TOPIC_LENGTH}")
    if not TOPIC_PATTERN.match(topic):
        raise illegal(f"topic {topic!r} has characters outside [%|a-zA-Z0-9_-]")
    if refuses_sends(topic):
        raise illegal(f"topic {topic!r} is a system topic only the broker writes; sending to it is forbidden")
    part = topic_field(topic.encode("utf-8"))
    if type(topic) is str and len(_CHECKED_TOPICS) < MAX_CHECKED_TOPICS:
        _CHECKED_TOPICS[topic] = part
    return part


def broker_topic(topic: str) -> bytes:
    """TOPICLENGTH + TOPIC of a topic only the broker writes (`BROKER_WRITTEN_TOPICS`).

    Raises:
        InvalidMessageError: any other topic.
    """
    if not isinstance(topic, str) or topic not in BROKER_WRITTEN_TOPICS:
        raise illegal(f"topic {topic!r} is not one the broker writes ({', '.join(sorted(BROKER_WRITTEN_TOPICS))})")
    return topic_field(topic.encode("ascii"))


_SCHEDULE_TOPIC_PART = topic_field(SCHEDULE_TOPIC.encode("ascii"))
"""TOPICLENGTH + TOPIC of the topic a delayed message is parked in (the store writes it; users may not)."""

_CHECKED_TOPICS: dict[str, bytes] = {}
"""Topics that passed `checked_topic`, with their TOPICLENGTH + TOPIC (what the compiled prepare trusts)."""
MAX_CHECKED_TOPICS = 4096

_PARSED_HOSTS: dict[str, tuple[bytes, int]] = {}
"""Born hosts `parse_host` parsed, with their (IP, port): what the compiled prepare trusts (at most
MAX_PARSED_HOSTS; a message of any other born host goes through `prepare_py`)."""
MAX_PARSED_HOSTS = 4096


def parsed_host(host: str) -> tuple[bytes, int]:
    """`parse_host(host)`, remembered for the compiled prepare.

    Raises:
        InvalidMessageError: not an address with a port (or not a str).
    """
    if not isinstance(host, str):
        raise illegal(f"born_host must be a str 'ip:port', not {type(host).__name__}")
    try:
        parsed = parse_host(host)
    except (ValueError, OSError) as exc:  # inet_pton refuses some bracketed texts with OSError
        raise illegal(f"born_host: {exc}") from None
    if type(host) is str and len(_PARSED_HOSTS) < MAX_PARSED_HOSTS:
        _PARSED_HOSTS.setdefault(host, parsed)
    return parsed


@lru_cache(maxsize=4096)
def message_shape(sys_flag: int, tags: str | None, born_ip: bytes, store_ip: bytes
                  ) -> tuple[struct.Struct, int, bool, bool, int, int]:
    """What a record's layout and dispatch take from these inputs (cached: producers repeat them):
    header layout, stored sys flag, queue entry?, index entry?, tags code, and the header's size (what
    the compiled prepare reads of the layout)."""
    head = header_struct(len(born_ip), len(store_ip))
    return (head, record_sys_flag(sys_flag, born_ip, store_ip), gets_queue_entry(sys_flag),
            gets_index_entry(sys_flag), tags_code(tags), head.size)


def shorthand_properties(tags: str | None, keys: tuple[str, ...]
                         ) -> tuple[str, tuple[str, ...], str | None, str | None, bool]:
    """(properties text, keys, tags, uniq key, wait) of a message that only uses the tags/keys
    shorthands: the text `encode_properties({TAGS: tags, KEYS: " ".join(keys)})` gives, checked as
    `check_property` checks it."""
    text = ""
    if tags is not None:
        if type(tags) is not str:
            check_property(props.TAGS, tags)  # raises unless a str subclass
        text = _tags_text(tags)
    if not keys:
        return text, (), tags, None, True
    joined = _joined_keys(keys)
    if not joined or props.NAME_VALUE_SEPARATOR in joined or props.PROPERTY_SEPARATOR in joined:
        check_property(props.KEYS, joined)  # raises
    text = f"{text}{props.PROPERTY_SEPARATOR}{_KEYS_PREFIX}{joined}" if text else _KEYS_PREFIX + joined
    split = (joined,) if props.KEY_SEPARATOR not in joined else tuple(props.split_keys(joined))
    return text, split, tags, None, True


@lru_cache(maxsize=1024)
def _tags_text(tags: str) -> str:
    check_property(props.TAGS, tags)
    return _TAGS_PREFIX + tags


def _joined_keys(keys: Iterable[str]) -> str:
    """The KEYS property of the `keys` shorthand.

    Raises:
        InvalidMessageError: a key that is not a str.
    """
    try:
        return props.KEY_SEPARATOR.join(keys)
    except TypeError:
        raise illegal(f"keys must be strs, not {[type(k).__name__ for k in keys]}") from None


_TAGS_PREFIX = props.TAGS + props.NAME_VALUE_SEPARATOR
_KEYS_PREFIX = props.KEYS + props.NAME_VALUE_SEPARATOR


INT32 = (JAVA_INT_MIN, JAVA_INT_MAX)
INT64 = (JAVA_LONG_MIN, JAVA_LONG_MAX)


def check_header_fields(message: Message) -> None:
    """The int fields copied into the record header must fit their fields (a bad one would otherwise
    fail the encoding under the store lock, after the queue offset was taken)."""
    for name, bounds in (("flag", INT32), ("sys_flag", INT32), ("reconsume_times", INT32),
                         ("prepared_transaction_offset", INT64), ("born_timestamp", INT64)):
        value = getattr(message, name)
        if value is None and name == "born_timestamp":
            continue
        if not isinstance(value, int) or not bounds[0] <= value <= bounds[1]:
            kind = "int32" if bounds is INT32 else "int64"
            raise illegal(f"{name} {value!r} is not an {kind}")


def check_property(name: str, value: Any) -> None:
    if not isinstance(name, str) or not isinstance(value, str):
        raise illegal(f"property {name!r}: names and values must be strings")
    if not name or not value:
        raise illegal(f"property {name!r}: names and values must not be empty")
    for text in (name, value):
        if props.NAME_VALUE_SEPARATOR in text or props.PROPERTY_SEPARATOR in text:
            raise illegal(f"property {name!r} contains a separator character (U+0001 or U+0002)")


def message_checker(config: StoreConfig) -> Callable[[Message], None]:
    """The put-time rules of a store with `config`, without opening one (`MessageStore.check_message`
    of a store on this geometry, its host taken as an IPv4 address): the returned function raises
    InvalidMessageError for a message a put would refuse."""
    preparer = Preparer(config, parse_host(config.store_host)[0], config.delay_level_millis())

    def check(message: Message) -> None:
        preparer.prepare(message)
    return check


class Preparer:
    """Prepares messages for one store: its size limits, store host and delay levels."""

    def __init__(self, config: StoreConfig, store_ip: bytes, delay_millis: list[int]) -> None:
        self.config = config
        self._store_ip = store_ip
        self._delay_millis = delay_millis
        self._max_message_size = config.max_message_size  # the config is frozen
        self._max_record_size = min(config.max_message_size + RECORD_SIZE_SLACK,
                                    config.commitlog_file_size - BLANK_RECORD_SIZE)
        self.plain_arguments: tuple[object, ...] = (
            _CHECKED_TOPICS, _PARSED_HOSTS, self._max_message_size, self._max_record_size, self._store_ip,
            message_shape, Prepared, _MESSAGE_SLOTS)
        """What the compiled prepare_plain takes after the message (put_behind takes them too)."""

    def prepare(self, message: Message) -> Prepared:
        """Check `message` and shape its record.

        Raises:
            InvalidMessageError: a rule is broken (status MESSAGE_ILLEGAL or PROPERTIES_SIZE_EXCEEDED).
        """
        if _native_prepare is not None:  # the common message in one compiled call; None: any other
            try:
                prepared = _native_prepare(message, *self.plain_arguments)
            except (UnicodeEncodeError, TypeError, AttributeError, OverflowError):
                prepared = None  # a lone surrogate, or not a Message of the usual types: the twin names it
            if prepared is not None:
                return prepared
            kernels.declined("prepare")
        return self.prepare_py(message)

    def prepare_many(self, messages: Iterable[Message]) -> list[Prepared]:
        """`prepare` for each message, in order (the first refused message raises).

        Raises:
            InvalidMessageError: a rule is broken (status MESSAGE_ILLEGAL or PROPERTIES_SIZE_EXCEEDED).
        """
        messages = checked_messages("put_batch", messages)
        if _native_prepare_many is None:
            return [self.prepare(m) for m in messages]
        try:
            prepared, declined = _native_prepare_many(messages, _CHECKED_TOPICS, _PARSED_HOSTS,
                                                      self._max_message_size, self._max_record_size, self._store_ip,
                                                      message_shape, Prepared, _MESSAGE_SLOTS)
        except (UnicodeEncodeError, TypeError, AttributeError, OverflowError):
            # a lone surrogate, or one that is not a Message of the usual types: the twin names it
            kernels.declined("prepare", len(messages))
            return [self.prepare_py(m) for m in messages]
        if declined:
            kernels.declined("prepare", declined)
            for i, p in enumerate(prepared):
                if p is None:
                    prepared[i] = self.prepare_py(messages[i])
        return prepared

    def prepare_py(self, message: Message, *, broker_written: bool = False, delivered: bool = False) -> Prepared:
        """`prepare` in pure Python (the twin of rocketstore._speedups.prepare_plain, and the only path
        for what it declines: a delayed message, a properties mapping that is not a plain dict of
        str to str, a born host that is neither IPv4 nor parsed before, anything refused).

        Args:
            broker_written: the message goes to a topic only the broker writes (`broker_topic`), and
                only there.
            delivered: the message is the due copy of a delayed record: it goes to its own topic and
                queue, the DELAY it carries kept in its record and not acted on (RocketMQ's messageTimeup).

        Raises:
            InvalidMessageError: a rule is broken (status MESSAGE_ILLEGAL or PROPERTIES_SIZE_EXCEEDED), or
                `message` is not a Message.
        """
        topic = checked_message(message).topic
        topic_bytes = broker_topic(topic) if broker_written else topic_part(topic)
        body = message.body
        if type(body) is not bytes:
            body = bytes(body)
        if len(body) > self._max_message_size:
            raise illegal(f"body of {len(body)} bytes exceeds max_message_size {self._max_message_size}")
        queue_id = message.queue_id
        if not isinstance(queue_id, int) or not 0 <= queue_id <= JAVA_INT_MAX:
            raise illegal(f"queue id {queue_id!r} is not an int in [0, 2**31 - 1]")
        check_header_fields(message)
        delay_level = 0
        if message.properties is not None and not isinstance(message.properties, Mapping):
            raise illegal(f"properties must be a mapping of str to str, not {type(message.properties).__name__}")
        if message.properties:
            properties, wait, delay_level = self._properties_of(message, delivered)
            if delay_level:
                topic, topic_bytes, queue_id = SCHEDULE_TOPIC, _SCHEDULE_TOPIC_PART, delay_level - 1
            props_text = props.encode_properties(properties)
            keys = tuple(props.split_keys(properties.get(props.KEYS)))
            uniq_key = properties.get(props.UNIQ_KEY)
            tags = properties.get(props.TAGS)
        else:  # the common case: only the tags/keys shorthands
            props_text, keys, tags, uniq_key, wait = shorthand_properties(
                message.tags, cast(tuple[str, ...], message.keys))  # Message makes its keys a tuple
        if len(props_text) > props.MAX_PROPERTIES_LENGTH:
            raise illegal(f"properties of {len(props_text)} characters exceed {props.MAX_PROPERTIES_LENGTH}")
        try:
            props_bytes = props_text.encode("utf-8")
        except UnicodeEncodeError as exc:
            field = "tags, keys or properties" if message.properties else "tags or keys"
            raise illegal(f"the {field} hold a character UTF-8 cannot encode ({exc.object[exc.start]!r}, a lone "
                          "surrogate)") from None
        if len(props_bytes) > props.MAX_PROPERTIES_LENGTH:
            raise InvalidMessageError(f"properties of {len(props_bytes)} bytes exceed "
                                      f"{props.MAX_PROPERTIES_LENGTH}", PutStatus.PROPERTIES_SIZE_EXCEEDED)
        born_ip, born_port = parsed_host(message.born_host) if message.born_host else (self._store_ip, 0)
        sys_flag = message.sys_flag
        head, record_sys_flag, in_queue, indexed, code, _ = message_shape(sys_flag, tags, born_ip, self._store_ip)
        tail = topic_bytes + PROPERTIES_LENGTH.pack(len(props_bytes)) + props_bytes
        size = head.size + len(body) + len(tail)
        if size > self._max_record_size:
            raise illegal(f"record of {size} bytes does not fit a commitlog file of "
                           f"{self.config.commitlog_file_size} bytes")
        queue_key = (topic, queue_id)
        body_crc = zlib.crc32(body) & CRC_MASK if body else 0  # format.message.body_crc(body)
        flag, born_timestamp, reconsume_times = message.flag, message.born_timestamp, message.reconsume_times
        prepared_offset = message.prepared_transaction_offset
        tags_code = 0 if delay_level else code
        return new_prepared(  # Prepared's fields in order (tests/unit/store/test_prepared_order.py)
            topic, queue_id, queue_key, body, body_crc, head, tail, flag, sys_flag, record_sys_flag, born_timestamp,
            born_ip, born_port, reconsume_times, prepared_offset, size, wait, in_queue, indexed, delay_level,
            tags_code, keys, uniq_key)

    def _properties_of(self, message: Message, delivered: bool = False) -> tuple[dict[str, str], bool, int]:
        """The properties to store, WAIT, delay level.

        A record keeps every property it was put with, as RocketMQ writes the properties string it
        was given: WAIT and DELAY are read, never removed. A delayed message (DELAY > 0, unless
        `delivered`) is parked as RocketMQ parks it: REAL_TOPIC and REAL_QID added, DELAY cut to the
        highest level, in the order a Java HashMap gives them. A delivered copy never waits for the disk.
        """
        properties = dict(message.properties or {})
        if message.tags is not None and props.TAGS not in properties:
            properties[props.TAGS] = message.tags
        if message.keys and props.KEYS not in properties:
            properties[props.KEYS] = _joined_keys(message.keys)
        wait = not delivered and properties.get(props.WAIT, "true").lower() != "false"
        for name, value in properties.items():
            check_property(name, value)
        level = 0
        if props.DELAY in properties and gets_queue_entry(message.sys_flag) and not delivered:
            try:
                level = int(properties[props.DELAY])
            except ValueError:
                raise illegal(f"DELAY {properties[props.DELAY]!r} is not a delay level") from None
            if level > 0:
                level = min(level, len(self._delay_millis))
                properties[props.DELAY] = str(level)
                properties[props.REAL_TOPIC] = message.topic
                properties[props.REAL_QID] = str(message.queue_id)
                properties = {k: properties[k] for k in props.java_hashmap_order(properties)}
            else:
                level = 0
        return properties, wait, level
