"""The compiled prepare and its pure-Python twin agree on messages with a properties mapping and a born
host: for every message the compiled one takes it answers the twin's `Prepared` exactly, and it takes
every message the twin accepts that carries no DELAY and at most an IPv4 born host; what it declines the
twin answers or refuses."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocketstore import kernels
from rocketstore.config import StoreConfig
from rocketstore.errors import RocketStoreError
from rocketstore.format import properties as props
from rocketstore.format.hosts import parse_host
from rocketstore.message import Message
from rocketstore.store import prepare
from rocketstore.store.prepare import Prepared, Preparer

pytestmark = pytest.mark.skipif(kernels.prepare_plain is None, reason="the compiled backend is not built")

CONFIG = StoreConfig(commitlog_file_size=1024 * 1024, max_message_size=64 * 1024)
TOPIC = "TwinTopic"
PREPARER = Preparer(CONFIG, parse_host(CONFIG.store_host)[0], CONFIG.delay_level_millis())

letters = st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",))
anything = st.characters()  # separators and lone surrogates too
known = st.sampled_from([props.TAGS, props.KEYS, props.UNIQ_KEY, props.WAIT, "a", "é名", "K"])
names = st.one_of(*[known, st.text(letters, min_size=1, max_size=8)] * 6, st.text(anything, max_size=4))
values = st.one_of(*[st.text(letters, min_size=1, max_size=12)] * 12,
                   st.text(st.sampled_from("ab \u00e9"), min_size=1, max_size=6),
                   st.sampled_from(["false", "FALSE", "False", "fAlSe", "true", " false", "falsE ", "K"]),
                   st.text(anything, max_size=4))
maps = st.dictionaries(names, values, max_size=5)
valid_ipv4 = st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255), st.integers(0, 255),
                       st.integers(0, 65535)).map(lambda t: "{}.{}.{}.{}:{}".format(*t))
odd_hosts = st.one_of(st.sampled_from(["", "1.2.3.4", "1.2.3.4:", "01.2.3.4:5", "1.2.3.4:65536", "1.2.3:4",
                                       "1.2.3.4.5:6", "[::1]:80", "::1:80", "256.1.1.1:1", "1.2.3.4:+5",
                                       "1.2.3.4:\u0665", " 1.2.3.4:5", "1.2.3.4:00080"]),
                      st.text(st.sampled_from("0123456789.:[]a"), max_size=18))
tags = st.one_of(st.none(), *[st.text(letters, min_size=1, max_size=6)] * 2, st.text(anything, max_size=3))
key = st.one_of(*[st.text(st.sampled_from("ab \u00e9"), max_size=4)] * 4, st.text(anything, max_size=3))
keys = st.lists(key, max_size=3).map(tuple)


@st.composite
def messages(draw: st.DrawFn) -> tuple[Message, bool]:
    """A message, and whether its born host is a valid IPv4 'ip:port' (or none)."""
    mapping = draw(st.one_of(st.none(), maps))
    if mapping is not None and draw(st.integers(0, 3)) == 0:
        mapping[props.DELAY] = draw(st.sampled_from(["1", "0", "-1", "x", "3"]))
    valid_host = draw(st.integers(0, 2)) > 0
    host = draw(st.one_of(st.none(), valid_ipv4)) if valid_host else draw(odd_hosts)
    message = Message(TOPIC, draw(st.binary(max_size=40)), queue_id=draw(st.integers(0, 7)),
                      tags=draw(tags), keys=draw(keys), properties=mapping, born_host=host,
                      sys_flag=draw(st.sampled_from([0, 0x4, 0x8, 0xC])), born_timestamp=1_700_000_000_000)
    return message, valid_host


def twin(message: Message) -> Prepared | type[BaseException]:
    try:
        return PREPARER.prepare_py(message)
    except RocketStoreError as exc:
        return type(exc)


def compiled(message: Message) -> Any:
    prepare.checked_topic(TOPIC)  # the compiled prepare takes topics that passed the check
    prepare._PARSED_HOSTS.clear()  # so that it parses the born host itself
    try:
        return kernels.prepare_plain(message, *PREPARER.plain_arguments)  # type: ignore[misc]
    except UnicodeEncodeError:
        return None


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages())
def test_the_compiled_prepare_answers_the_twins_prepared(case: tuple[Message, bool]) -> None:
    message, valid_host = case
    native = compiled(message)
    expected = twin(message)
    if native is not None:
        assert isinstance(expected, tuple), f"the twin refuses with {expected}"
        assert tuple(native) == tuple(expected)
        assert type(native) is Prepared
    elif isinstance(expected, tuple):
        delay = bool(message.properties) and props.DELAY in message.properties
        assert delay or not valid_host, "the compiled prepare declined a message the twin accepts"
    assert PREPARER.prepare(message) == expected if isinstance(expected, tuple) else True
    if not isinstance(expected, tuple):
        with pytest.raises(expected):
            PREPARER.prepare(message)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(messages(), min_size=1, max_size=6))
def test_prepare_many_answers_the_twins_prepared_per_message(cases: list[tuple[Message, bool]]) -> None:
    batch = [m for m, _ in cases]
    expected = [twin(m) for m in batch]
    prepare._PARSED_HOSTS.clear()
    if all(isinstance(e, tuple) for e in expected):
        assert PREPARER.prepare_many(batch) == expected
    else:
        first_refused = next(e for e in expected if not isinstance(e, tuple))
        with pytest.raises(first_refused):  # type: ignore[call-overload]
            PREPARER.prepare_many(batch)


def test_the_broker_shaped_message_is_byte_identical_to_the_twins() -> None:
    properties = {props.KEYS: "key-1 key-2", props.UNIQ_KEY: "FD000000000000000000000000000001",
                  props.WAIT: "false", props.TAGS: "TagA", "é": "名"}
    message = Message(TOPIC, b"body", queue_id=2, properties=properties, born_host="127.0.0.1:50000")
    native = compiled(message)
    assert native is not None
    assert native == PREPARER.prepare_py(message)
    assert native.tail.endswith("KEYS\x01key-1 key-2\x02UNIQ_KEY\x01FD000000000000000000000000000001\x02WAIT\x01false"
                                "\x02TAGS\x01TagA\x02\u00e9\x01\u540d".encode())
    assert (native.wait, native.keys, native.uniq_key, native.born_ip, native.born_port) == \
        (False, ("key-1", "key-2"), "FD000000000000000000000000000001", b"\x7f\x00\x00\x01", 50000)


@pytest.mark.parametrize("delay", ["3", "0", "-1", "x"])
def test_a_delay_property_of_any_value_declines_to_the_twin(delay: str) -> None:
    message = Message(TOPIC, b"body", queue_id=1, properties={"a": "b", props.DELAY: delay})
    assert compiled(message) is None
    taken = compiled(Message(TOPIC, b"body", queue_id=1, properties={"a": "b"}))
    assert taken == PREPARER.prepare_py(Message(TOPIC, b"body", queue_id=1, properties={"a": "b"}))
