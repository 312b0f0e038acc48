"""A single put writes the same bytes through the compiled `put_one` (the append pipeline's fast branch) as through the
pipeline's general steps for a run of one: records, consume queues, index files and results, over several topics and
queues, keys and UNIQ_KEY beyond ASCII, delayed and transactional messages, IPv6 hosts, bodies past the size the
compiled call takes, and files of all three kinds rolled over (where the compiled call declines and the twin
writes). A put that leaves its dispatch behind (the compiled `put_behind` and its twin `_put_behind_py`, the catch-
up writing the queue entries and index keys later) writes the same bytes again."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.store_dirs import COMMITLOG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR
from rocketstore.format.sysflag import SysFlag
from rocketstore.results import PutResult
from rocketstore.storage import fs
from rocketstore.store import write_path

CONFIG = StoreConfig(commitlog_file_size=64 * 1024, consume_queue_file_entries=64, index_hash_slots=13,
                     index_max_entries=300, deliver_delayed_messages=False)
START_MS = 1_700_000_000_000

pytestmark = pytest.mark.skipif(write_path.put_one_for(b"\0" * 4, 0, "") is None,
                                reason="the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")


def _files(root: Path) -> dict[str, bytes]:
    """Every file of the commitlog, the consume queues and the index, by path."""
    return {str(p.relative_to(root)): p.read_bytes() for name in (COMMITLOG_DIR, CONSUME_QUEUE_DIR, INDEX_DIR)
            for p in sorted((root / name).rglob("*")) if p.is_file()}


def _put_each(root: Path, messages: list[Message], compiled: bool,
              behind: str | None = None) -> tuple[list[PutResult], dict[str, bytes], int, int]:
    """Each message by `put`, the clock moving 7 ms a put, with the dispatch at once (`behind` None) or
    left behind by "compiled" put_behind or its "twin"; the results, the files, how many puts the twin
    of put_one wrote, and how many puts left their dispatch behind."""
    now = [START_MS]
    twin_puts = [0]
    behind_puts = [0]
    with MessageStore.open(root, CONFIG, clock=lambda: now[0]) as store:
        general, twin = store._writes._dispatch_appended, store._writes._put_one_py

        def counted_general(*args: object) -> None:
            twin_puts[0] += 1
            general(*args)  # type: ignore[arg-type]

        def counted_twin(*args: object) -> PutResult:
            twin_puts[0] += 1
            return twin(*args)  # type: ignore[arg-type]

        store._writes._dispatch_appended = counted_general  # type: ignore[method-assign]
        store._writes._put_one_py = counted_twin  # type: ignore[method-assign]
        if not compiled:
            store._writes._put_one = None
        writes = store._writes
        twin_behind = writes._put_behind_py
        appender = writes._appender
        written = 0 if appender is None else appender.written

        def left_behind(message: Message) -> PutResult | None:
            result = twin_behind(message)
            behind_puts[0] += result is not None
            return result

        writes._put_behind = None if behind is None else left_behind  # what the appender declines
        if behind != "compiled":
            writes._behind_appender = None
        results = []
        for message in messages:
            now[0] += 7
            results.append(store.put(message))
        if behind == "compiled" and appender is not None:
            behind_puts[0] += appender.written - written
    return results, _files(root), twin_puts[0], behind_puts[0]


def _same(one: tuple[list[PutResult], dict[str, bytes], int, int],
          other: tuple[list[PutResult], dict[str, bytes], int, int]) -> None:
    """The same results and files; index files are named by the clock when they were made, which for a
    dispatch left behind is the time of its catch-up, so they compare in order, by content."""
    assert one[0] == other[0]

    def by_name(files: dict[str, bytes]) -> tuple[dict[str, bytes], list[bytes]]:
        index = [data for name, data in sorted(files.items()) if name.startswith(INDEX_DIR + "/")]
        return {name: data for name, data in files.items() if not name.startswith(INDEX_DIR + "/")}, index

    (named, index), (other_named, other_index) = by_name(one[1]), by_name(other[1])
    assert named.keys() == other_named.keys()
    for name, data in named.items():
        assert data == other_named[name], name
    assert len(index) == len(other_index)
    for n, (data, other_data) in enumerate(zip(index, other_index, strict=True)):
        assert data == other_data, f"index file {n}"


def _both(messages: list[Message], base: Path) -> tuple[int, int]:
    compiled = _put_each(base / "compiled", messages, compiled=True)
    twin = _put_each(base / "twin", messages, compiled=False)
    _same(compiled, twin)
    assert twin[2] == len(messages)
    return compiled[2], len(compiled[1])


def _behind(messages: list[Message], base: Path) -> tuple[int, int]:
    """The files of puts at once, of puts left behind by put_behind, and by its twin: all the same; how
    many puts each of the two left behind."""
    at_once = _put_each(base / "at-once", messages, compiled=True)
    compiled = _put_each(base / "behind", messages, compiled=True, behind="compiled")
    twin = _put_each(base / "behind-twin", messages, compiled=True, behind="twin")
    _same(at_once, compiled)
    _same(at_once, twin)
    return compiled[3], twin[3]


def _message(i: int) -> Message:
    kind = i % 7
    if kind == 0:
        return Message("SCHEDULE_SOURCE", b"later %d" % i, properties={"DELAY": str(1 + i % 18)}, keys=(f"d{i}",))
    if kind == 1:
        return Message("Orders", b"o" * (i % 50), queue_id=i % 4, tags="TagA", keys=(f"order-{i}", "", f"c{i % 7}"),
                       properties={"UNIQ_KEY": f"U{i:08X}"})
    if kind == 2:
        return Message("Pay_ments", b"p", queue_id=i % 2, tags="é€😀", keys=("ü key",), born_host="[::1]:2")
    if kind == 3:
        return Message("Orders", b"half", queue_id=1, keys=(f"t{i}",), sys_flag=int(SysFlag.TRANSACTION_PREPARED))
    if kind == 4:
        return Message("Orders", b"", queue_id=2, properties={"KEYS": " ".join(f"k{j}" for j in range(1 + i % 12))})
    if kind == 5 and i % 5 == 0:
        return Message("Big", b"B" * (fs.PWRITE_MIN + i % 3))  # through pwrite: the twin's
    return Message("Plain", b"x" * 200, born_host="10.0.0.9:1")


def test_a_store_written_by_single_puts_is_the_same_through_either_path(tmp_path):
    messages = [_message(i) for i in range(2500)]
    twin_puts, files = _both(messages, tmp_path)
    assert twin_puts < len(messages) // 5, "the compiled call took too few of the puts to be tested"
    assert twin_puts > 0, "no put went the twin's way: no file rolled, no large record"
    names = list(_files(tmp_path / "compiled"))
    for kind in (COMMITLOG_DIR, CONSUME_QUEUE_DIR + "/Orders/1", INDEX_DIR):
        assert sum(name.startswith(kind + "/") for name in names) >= 2, f"{kind}: no file rolled over"
    assert files == len(names)


def test_puts_leaving_their_dispatch_behind_write_the_same_store(tmp_path):
    messages = [_message(i) for i in range(2500)]
    compiled, twin = _behind(messages, tmp_path)
    assert compiled > len(messages) // 2, "put_behind took too few of the puts to be tested"
    assert twin > len(messages) // 2, "_put_behind_py took too few of the puts to be tested"


keys = st.lists(st.sampled_from(["", "k", "键", "😀", "a b", "order-1"]), max_size=10).map(tuple).filter(
    lambda k: not k or any(k))  # KEYS of empty keys only is refused
messages = st.builds(
    Message, topic=st.sampled_from(["T", "U_1"]),
    body=st.one_of(st.binary(max_size=300), st.just(b"L" * (fs.PWRITE_MIN - 200))), queue_id=st.integers(0, 3),
    tags=st.sampled_from([None, "TagA", "ü"]), keys=keys,
    properties=st.sampled_from([None, {"DELAY": "2"}, {"UNIQ_KEY": "u1"}]),
    born_host=st.sampled_from([None, "10.0.0.9:1", "[::1]:2"]), sys_flag=st.sampled_from([0, 4, 8, 12]),
    born_timestamp=st.sampled_from([None, 5]))


@settings(deadline=None, max_examples=60)
@given(st.lists(messages, min_size=1, max_size=80))
def test_any_single_puts_write_the_same_through_either_path(batch):
    with tempfile.TemporaryDirectory() as base:
        _both(batch, Path(base))


@settings(deadline=None, max_examples=40)
@given(st.lists(messages, min_size=1, max_size=80))
def test_any_puts_leaving_their_dispatch_behind_write_the_same_store(batch):
    with tempfile.TemporaryDirectory() as base:
        _behind(batch, Path(base))
