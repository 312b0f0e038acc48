"""A consume-queue entry that points at a whole, valid record of another topic, queue or queue offset (or
at a record whose topic or queue id bytes were rewritten: no CRC covers them) is a damaged entry: `get`
and `iter_queue` pass over it, never serving its record as a message of the queue, count it and warn
once a queue. The compiled decode loop and its Python twin take the same decisions."""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore import GetStatus, Message, MessageStore, StoreConfig
from rocketstore.format import message as fm
from rocketstore.format.consume_queue import UNIT, UNIT_SIZE
from rocketstore.log import entry_run
from rocketstore.native import speedups

CONFIG = StoreConfig(commitlog_file_size=1 << 16, consume_queue_file_entries=64, index_hash_slots=64,
                     index_max_entries=256, deliver_delayed_messages=False)
A, B = "TopicA", "TopicB"


@pytest.fixture(params=["compiled", "python"])
def decode(request, monkeypatch) -> str:
    """Which decode loop a get runs: the compiled `decode_run` or its Python twin."""
    if request.param == "compiled":
        if speedups is None:
            pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
        monkeypatch.setattr(entry_run, "decode_run", speedups.decode_run)
    else:
        monkeypatch.setattr(entry_run, "decode_run", entry_run.decode_run_py)
    return str(request.param)


def _pwrite(path: Path, at: int, data: bytes) -> None:
    """Write into a file the open store has mapped (the mapping shares the page cache: it sees the bytes)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, at)
    finally:
        os.close(fd)


def _queue_file(root: Path, topic: str) -> Path:
    return root / "consumequeue" / topic / "0" / f"{0:020d}"


def _commitlog_file(root: Path) -> Path:
    return root / "commitlog" / f"{0:020d}"


def _entry(store: MessageStore, topic: str, offset: int) -> tuple[int, int, int]:
    unit = next(iter(store.queue_entries(topic, 0, offset, offset + 1)))
    return unit.phy_offset, unit.size, unit.tags_code


def _point_at_topic_b(store: MessageStore) -> None:
    _pwrite(_queue_file(store.path, A), 2 * UNIT_SIZE, UNIT.pack(*_entry(store, B, 1)))


def _point_at_a_later_offset(store: MessageStore) -> None:
    _pwrite(_queue_file(store.path, A), 2 * UNIT_SIZE, UNIT.pack(*_entry(store, A, 4)))


def _rewrite_the_topic(store: MessageStore) -> None:
    phy, _, _ = _entry(store, A, 2)
    raw = store.message_at(phy).raw
    _pwrite(_commitlog_file(store.path), phy + raw.rindex(A.encode()), b"TopicC")  # the CRC covers the body only


def _rewrite_the_queue_id(store: MessageStore) -> None:
    phy, _, _ = _entry(store, A, 2)
    _pwrite(_commitlog_file(store.path), phy + fm.QUEUE_ID_POS, struct.pack(">i", 1))


DAMAGES: dict[str, Callable[[MessageStore], None]] = {
    "an entry pointing at a record of another topic": _point_at_topic_b,
    "an entry pointing at a record of a later queue offset": _point_at_a_later_offset,
    "a record whose topic bytes were rewritten": _rewrite_the_topic,
    "a record whose queue id bytes were rewritten": _rewrite_the_queue_id,
}


@pytest.fixture
def store(tmp_path):
    with MessageStore.open(tmp_path, CONFIG) as opened:
        for i in range(6):
            opened.put(Message(A, b"a%d" % i, tags="t"))
            if i < 3:
                opened.put(Message(B, b"b%d" % i, tags="t"))
        opened.flush()  # the queue entries are in their files
        yield opened


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_get_never_serves_a_record_of_another_queue_or_offset(store, decode, damage, caplog):
    DAMAGES[damage](store)
    caplog.set_level(logging.WARNING, logger="rocketstore.store")
    for tags in (None, "t"):
        got = store.get(A, 0, 0, tags=tags)
        assert [m.body for m in got.messages] == [b"a0", b"a1", b"a3", b"a4", b"a5"]
        assert all((m.topic, m.queue_id, m.queue_offset) == (A, 0, i)
                   for m, i in zip(got.messages, [0, 1, 3, 4, 5], strict=True))
        assert (got.status, got.next_offset) == (GetStatus.FOUND, 6)
    one = store.get(A, 0, 2, max_count=1)  # passes over the damaged entry to the next message
    assert ([m.body for m in one.messages], one.next_offset) == ([b"a3"], 4)
    assert [m.body for m in store.iter_queue(A, 0)] == [b"a0", b"a1", b"a3", b"a4", b"a5"]
    assert store.misplaced_entries() == {(A, 0): 4}  # two gets, the get of one, the iteration
    warnings = [r for r in caplog.records if "rocketstore recover" in r.getMessage()]
    assert len(warnings) == 1 and "TopicA-0" in warnings[0].getMessage() and "offset 2" in warnings[0].getMessage()
    assert [m.body for m in store.get(B, 0, 0).messages] == [b"b0", b"b1", b"b2"]


def test_a_get_of_only_a_damaged_entry_says_its_message_is_gone(store, decode):
    _pwrite(_queue_file(store.path, A), 5 * UNIT_SIZE, UNIT.pack(*_entry(store, B, 0)))
    last = store.get(A, 0, 5)
    assert (last.status, last.messages, last.next_offset) == (GetStatus.MESSAGE_WAS_REMOVING, [], 6)
    assert store.misplaced_entries() == {(A, 0): 1}


# The twins: the compiled decode loop against decode_run_py on runs of records of several queues and
# queue offsets, with and without the queue to check.

def _record(phy_offset: int, topic: bytes, queue_id: int, queue_offset: int, version: int) -> bytes:
    return fm.encode_message(topic=topic, body=b"body", properties=b"TAGS\x01A", queue_id=queue_id, flag=0,
                             queue_offset=queue_offset, phy_offset=phy_offset, sys_flag=0, born_timestamp=1,
                             born_ip=b"\0" * 4, born_port=2, store_timestamp=3, store_ip=b"\1" * 4, store_port=4,
                             version=version)


@st.composite
def checked_runs(draw):
    log_start = draw(st.sampled_from([0, 1 << 20]))
    log = bytearray()
    entries = []
    for _ in range(draw(st.integers(0, 8))):
        topic = draw(st.sampled_from([b"T", b"U", b"U" * 300, b"Topic\xff"]))
        record = _record(log_start + len(log), topic, draw(st.sampled_from([0, 0, 1, -1])),
                         draw(st.integers(-1, 9)), 2 if len(topic) > 127 else draw(st.sampled_from([1, 2])))
        entries.append(UNIT.pack(log_start + len(log), len(record), 0))
        log += record
    entries = draw(st.permutations(entries))
    return dict(entries=b"".join(entries), log=bytes(log), log_start=log_start,
                topic=draw(st.sampled_from([None, "T", "U", "U" * 300, "Topic\ufffd", "V"])),
                queue_id=draw(st.sampled_from([0, 1, -1])), first_offset=draw(st.integers(-2, 4)),
                i=draw(st.integers(0, 2)), max_count=draw(st.integers(1, 9)))


def _decode(function, cls, case):
    messages: list = []
    answer = function(cls, case["entries"], case["i"], case["log"], case["log_start"], len(case["log"]), None,
                      messages, case["max_count"], 0, 1 << 30, case["topic"], case["queue_id"], case["first_offset"])
    return answer, [(m.topic, m.queue_id, m.queue_offset, m.phy_offset) for m in messages]


@pytest.mark.skipif(speedups is None, reason="the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
@settings(deadline=None, max_examples=400)
@given(checked_runs())
def test_the_compiled_decode_loop_checks_the_queue_as_its_twin_does(case):
    assert speedups is not None
    compiled = _decode(speedups.decode_run, fm.StoredMessage, case)
    assert compiled == _decode(entry_run.decode_run_py, fm.StoredMessage, case)
    answer, taken = compiled
    if case["topic"] is not None:
        assert all((t, q) == (case["topic"], case["queue_id"]) for t, q, _, _ in taken)
        assert [o for _, _, o, _ in taken] == list(range(case["first_offset"] + case["i"],
                                                         case["first_offset"] + case["i"] + len(taken)))
