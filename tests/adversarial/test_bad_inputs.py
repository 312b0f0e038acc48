"""Bad arguments to the store API: each is refused with a RocketStoreError naming the argument, and the
store's files are the same bytes afterwards. Each row was once a bare Python error or accepted nonsense."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketstore import (
    InvalidArgumentError,
    InvalidMessageError,
    Message,
    MessageNotFoundError,
    MessageStore,
    StoreConfig,
    StoreLayoutError,
)

from .support import digests

CFG = StoreConfig(commitlog_file_size=1 << 16, index_hash_slots=64, index_max_entries=256,
                  deliver_delayed_messages=False)

CALLS = [
    ("surrogate in a property value", lambda s: s.put(Message("T", b"x", properties={"a": "\ud800"})),
     InvalidMessageError, "lone surrogate"),
    ("surrogate in a property name", lambda s: s.put(Message("T", b"x", properties={"\udfff": "a"})),
     InvalidMessageError, "lone surrogate"),
    ("surrogate in the tags", lambda s: s.put(Message("T", b"x", tags="a\ud800")), InvalidMessageError, "tags"),
    ("surrogate in a key", lambda s: s.put(Message("T", b"x", keys=("\ud800",))), InvalidMessageError, "keys"),
    ("surrogate in a batch", lambda s: s.put_batch([Message("T", b"x"), Message("T", b"y", tags="\ud800")]),
     InvalidMessageError, "lone surrogate"),
    ("surrogate in the topic", lambda s: s.put(Message("T\ud800", b"x")), InvalidMessageError, "topic"),
    ("body None", lambda s: s.put(Message("T", None)), InvalidMessageError, "body must be bytes"),  # type: ignore[arg-type]
    ("body an int", lambda s: s.put(Message("T", 5)), InvalidMessageError, "body must be bytes"),  # type: ignore[arg-type]
    ("body a str with a surrogate", lambda s: s.put(Message("T", "a\ud800")), InvalidMessageError, "body"),
    ("commit offset -1", lambda s: s.commit_offset("G", "T", 0, -1), InvalidArgumentError, "offset"),
    ("commit offset past a Java long", lambda s: s.commit_offset("G", "T", 0, 2**70), InvalidArgumentError, "offset"),
    ("commit queue id past a Java int", lambda s: s.commit_offset("G", "T", 2**40, 1), InvalidArgumentError,
     "queue_id"),
    ("commit queue id -1", lambda s: s.commit_offset("G", "T", -1, 1), InvalidArgumentError, "queue_id"),
    ("commit '@' in the group", lambda s: s.commit_offset("G@x", "T", 0, 1), InvalidArgumentError, "group"),
    ("commit '@' in the topic", lambda s: s.commit_offset("G", "T@x", 0, 1), InvalidArgumentError, "topic"),
    ("commit an empty group", lambda s: s.commit_offset("", "T", 0, 1), InvalidArgumentError, "group"),
    ("commit a str offset", lambda s: s.commit_offset("G", "T", 0, "5"), InvalidArgumentError, "offset"),  # type: ignore[arg-type]
    ("clean_expired in year 10000", lambda s: s.clean_expired(2**70), InvalidArgumentError, "now_ms"),
    ("clean_expired before 1970", lambda s: s.clean_expired(-1), InvalidArgumentError, "now_ms"),
    ("get max_count 0", lambda s: s.get("T", 0, 0, max_count=0), InvalidArgumentError, "max_count"),
    ("get max_count -1", lambda s: s.get("T", 0, 0, max_count=-1), InvalidArgumentError, "max_count"),
    ("query max_count 0", lambda s: s.query("T", "k0", max_count=0), InvalidArgumentError, "max_count"),
    ("query max_count -1", lambda s: s.query("T", "k0", max_count=-1), InvalidArgumentError, "max_count"),
    ("query max_count True", lambda s: s.query("T", "k0", max_count=True), InvalidArgumentError, "max_count"),
    ("query max_count a str", lambda s: s.query("T", "k0", max_count="5"), InvalidArgumentError, "max_count"),  # type: ignore[arg-type]
    ("query max_count 2.5", lambda s: s.query("T", "k0", max_count=2.5), InvalidArgumentError, "max_count"),  # type: ignore[arg-type]
    ("query max_count None", lambda s: s.query("T", "k0", max_count=None), InvalidArgumentError, "max_count"),  # type: ignore[arg-type]
    ("query begin_ms True", lambda s: s.query("T", "k0", begin_ms=True), InvalidArgumentError, "begin_ms"),
    ("query a topic that is an int", lambda s: s.query(5, "k0"), InvalidArgumentError, "topic"),  # type: ignore[arg-type]
    ("query a key that is None", lambda s: s.query("T", None), InvalidArgumentError, "key"),  # type: ignore[arg-type]
    ("scan from inside a record", lambda s: list(s.scan(start=1)), MessageNotFoundError, "physical offset 1"),
    ("scan from -1", lambda s: list(s.scan(start=-1)), InvalidArgumentError, "start"),
    ("scan to a str", lambda s: list(s.scan(end="9")), InvalidArgumentError, "end"),  # type: ignore[arg-type]
    ("keys that are not strs", lambda s: s.put(Message("T", b"x", keys=(1, 2))), InvalidMessageError, "keys"),  # type: ignore[arg-type]
    ("put None", lambda s: s.put(None), InvalidMessageError, "not NoneType"),  # type: ignore[arg-type]
    ("put_nowait None", lambda s: s.put_nowait(None), InvalidMessageError, "not NoneType"),  # type: ignore[arg-type]
    ("put_batch of an int", lambda s: s.put_batch([Message("T", b"x"), 1]), InvalidMessageError, "not int"),  # type: ignore[list-item]
    ("put_batch None", lambda s: s.put_batch(None), InvalidArgumentError, "iterable"),  # type: ignore[arg-type]
    ("a topic that is an int", lambda s: s.put(Message(5, b"x")), InvalidMessageError, "topic"),  # type: ignore[arg-type]
    ("a queue id that is a str", lambda s: s.put(Message("T", b"x", queue_id="1")), InvalidMessageError, "queue id"),  # type: ignore[arg-type]
    ("properties that are a list", lambda s: s.put(Message("T", b"x", properties=[1])), InvalidMessageError,  # type: ignore[arg-type]
     "properties"),
    ("a born host that is an int", lambda s: s.put(Message("T", b"x", born_host=5)), InvalidMessageError,  # type: ignore[arg-type]
     "born_host"),
    ("get offset None", lambda s: s.get("T", 0, None), InvalidArgumentError, "offset"),  # type: ignore[arg-type]
    ("get tags an int", lambda s: s.get("T", 0, 0, tags=5), InvalidArgumentError, "tags"),  # type: ignore[arg-type]
    ("max_offset of a list", lambda s: s.max_offset([], 0), InvalidArgumentError, "topic"),  # type: ignore[arg-type]
    ("message_at a str", lambda s: s.message_at("0"), InvalidArgumentError, "phy_offset"),  # type: ignore[arg-type]
    ("query begin_ms a str", lambda s: s.query("T", "k0", begin_ms="0"), InvalidArgumentError, "begin_ms"),  # type: ignore[arg-type]
    ("iter_queue chunk 0", lambda s: list(s.iter_queue("T", 0, chunk=0)), InvalidArgumentError, "chunk"),
    ("ensure_topic 0 queues", lambda s: s.ensure_topic("T", 0), InvalidArgumentError, "queue_nums"),
    ("a listener that is None", lambda s: s.add_arrival_listener(None), InvalidArgumentError, "callable"),  # type: ignore[arg-type]
]


@pytest.fixture
def store(tmp_path):
    with MessageStore.open(tmp_path, CFG) as opened:
        for i in range(3):
            opened.put(Message("T", f"m{i}".encode(), keys=(f"k{i}",)))
        opened.commit_offset("G", "T", 0, 1)
        opened.flush()
        yield opened


@pytest.mark.parametrize(("call", "error", "words"), [pytest.param(c, e, w, id=name) for name, c, e, w in CALLS])
def test_a_bad_argument_is_refused_by_name_and_changes_nothing(store, call, error, words):
    before = digests(store.path)
    with pytest.raises(error, match=words):
        call(store)
    store.flush()
    assert digests(store.path) == before
    assert [m.body for m in store.get("T", 0, 0).messages] == [b"m0", b"m1", b"m2"]
    assert store.committed_offset("G", "T", 0) == 1


def test_the_good_neighbours_of_the_bad_arguments_still_work(store):
    assert store.get("T", 0, 0, max_count=1).messages[0].body == b"m0"
    assert [m.body for m in store.query("T", "k1", max_count=1)] == [b"m1"]
    assert [m.body for m in store.scan(start=store.get("T", 0, 1).messages[0].phy_offset)] == [b"m1", b"m2"]
    store.commit_offset("G", "T", 2**31 - 1, 2**63 - 1)
    assert store.committed_offset("G", "T", 2**31 - 1) == 2**63 - 1
    assert store.put(Message("T", "é")).status.name == "PUT_OK"


@pytest.mark.parametrize(("geometry", "words"), [
    ({"commitlog_file_size": 65536, "bogus_field": 3}, "unknown geometry field 'bogus_field'"),
    ({"commitlog_file_size": "big"}, "'commitlog_file_size' is 'big', not a positive int"),
    ({"commitlog_file_size": -1}, "not a positive int"),
])
def test_a_recorded_geometry_that_does_not_read_is_named(tmp_path, geometry, words):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "rocketstore.json").write_text(json.dumps({"geometry": geometry}))
    for read_only in (False, True):
        with pytest.raises(StoreLayoutError, match=words):
            MessageStore.open(tmp_path, read_only=read_only)


def test_a_config_path_that_is_a_file_is_named(tmp_path: Path):
    (tmp_path / "config").write_text("not a directory")
    with pytest.raises(StoreLayoutError, match="config is a file, not the store's config directory"):
        MessageStore.open(tmp_path)


def test_an_unknown_setting_in_a_config_file_is_named(tmp_path):
    from tests.cli.cliharness import assert_one_line_error, run_cli

    with MessageStore.open(tmp_path / "store", CFG) as store:
        store.put(Message("T", b"x"))
    config = tmp_path / "store.json"
    config.write_text(json.dumps({"commitlog_file_size": 65536, "comitlog_file_sise": 1}))
    line = assert_one_line_error(run_cli("get", tmp_path / "store", "--topic", "T", "--queue", "0", "--config", config))
    assert "unknown setting(s) 'comitlog_file_sise'" in line
