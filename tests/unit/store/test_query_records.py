"""`query` answers the same through the compiled `query_records` as through its twin `query_py`: keys that
collide in small index files, several index files, topics sharing keys, UNIQ_KEY, text beyond ASCII,
time bounds to the millisecond, more matches than asked for, records whose bytes were damaged."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.message import StoredMessage
from rocketstore.log.index_file import HEADER_SLOTS
from rocketstore.native import speedups
from rocketstore.store import read_path

CONFIG = StoreConfig(commitlog_file_size=64 * 1024, index_hash_slots=13, index_max_entries=300,
                     deliver_delayed_messages=False)
START_MS = 1_700_000_000_000
KEYS = ["k0", "k1", "键", "😀", "Aa", "BB", "order-1", "x y"]  # "Aa" and "BB": one Java hash

pytestmark = pytest.mark.skipif(speedups is None, reason="the compiled module is not built "
                                                          "(or ROCKETSTORE_PURE_PYTHON is set)")


def _written(root: Path) -> list[int]:
    """A store whose index holds colliding keys over several files; the store times, 250 ms apart."""
    now = [START_MS]
    times = []
    with MessageStore.open(root, CONFIG, clock=lambda: now[0]) as store:
        for i in range(900):
            now[0] += 250
            topic = ("Orders", "Pay_ments", "Other")[i % 3]
            keys = tuple(KEYS[(i // 3 + j) % len(KEYS)] for j in range(1 + i % 2))
            properties = {"UNIQ_KEY": f"U{i % 40}"} if i % 5 == 0 else None
            store.put(Message(topic, b"m%d" % i, queue_id=i % 2, keys=keys, properties=properties))
            times.append(now[0])
    return times


@pytest.fixture(scope="module")
def store_root(tmp_path_factory) -> tuple[Path, list[int]]:
    root = tmp_path_factory.mktemp("query") / "store"
    times = _written(root)
    return root, times


def _answers(store: MessageStore, compiled: bool, topic: str, key: str, **bounds: int | None) -> list[tuple]:
    saved = read_path._query_records
    read_path._query_records = saved if compiled else None
    try:
        return [(m.phy_offset, m.raw) for m in store.query(topic, key, **bounds)]
    finally:
        read_path._query_records = saved


def test_the_store_has_what_the_test_needs(store_root):
    root, _ = store_root
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        assert len(store.index.files) > 3
        found = store.index.query("Orders", "Aa", 10_000, 0, 2**63 - 1)
        assert len(found) > len(store.query("Orders", "Aa", max_count=10_000)) > 0, "no collision to remove"


@settings(deadline=None, max_examples=300)
@given(topic=st.sampled_from(["Orders", "Pay_ments", "Other", "None_such"]),
       key=st.sampled_from([*KEYS, "x", "y", "U3", "U17", "", "\ud800"]),
       max_count=st.sampled_from([1, 2, 5, 64, 1000]),
       begin=st.one_of(st.none(), st.integers(-5, 950)), span=st.one_of(st.none(), st.integers(0, 400)))
def test_query_answers_the_same_through_either_path(store_root, topic, key, max_count, begin, span):
    root, times = store_root
    bounds: dict[str, int | None] = {"max_count": max_count}
    if begin is not None:  # bounds on, near and between the store times
        bounds["begin_ms"] = START_MS + begin * 250 + begin % 3 - 1
        bounds["end_ms"] = None if span is None else bounds["begin_ms"] + span * 250 + span % 2
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        assert _answers(store, True, topic, key, **bounds) == _answers(store, False, topic, key, **bounds)


def test_damaged_records_are_left_out_alike(tmp_path):
    root = tmp_path / "store"
    _written(root)
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        victims = [m.phy_offset for m in store.query("Orders", "k1", max_count=5)]
    files = sorted((root / "commitlog").iterdir())
    for phy in victims[:3]:
        path = files[phy // CONFIG.commitlog_file_size]
        data = bytearray(path.read_bytes())
        data[phy % CONFIG.commitlog_file_size + 4] ^= 0xFF  # MAGICCODE: no record starts there any more
        path.write_bytes(bytes(data))
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        compiled = _answers(store, True, "Orders", "k1", max_count=5)
        assert compiled == _answers(store, False, "Orders", "k1", max_count=5)
        assert not {phy for phy, _ in compiled} & set(victims[:3])


def test_query_records_declines_bounds_it_does_not_take(store_root):
    root, _ = store_root
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        args = (StoredMessage, store.index.files, store.commitlog.queue.files, store.commitlog.file_size, "Orders",
                "k1", 64)
        assert read_path._query_records is not None
        more = (read_path._mapping_of, HEADER_SLOTS)
        assert read_path._query_records(*args, 0.5, 2**63 - 1, False, *more) is None  # a float: query_py compares it
        assert read_path._query_records(*args, 0, 2**64, False, *more) is None  # past int64
        assert read_path._query_records(*args, True, 2**63 - 1, False, *more) is None  # a bool: the query names it
        assert read_path._query_records(*args[:-1], True, 0, 2**63 - 1, True, *more) is None
        assert read_path._query_records(*args[:-1], 0, 0, 2**63 - 1, True, *more) is None  # a count below 1
        found = read_path._query_records(*args, 0, 2**63 - 1, True, *more)
        assert found and all(isinstance(m, StoredMessage) for m in found)
        twin = store._reads.query_py("Orders", "k1", 64, 0, 2**63 - 1, True)
        assert [m.phy_offset for m in found] == sorted(twin) == [m.phy_offset for m in read_path.newest_ascending(
            twin, 64)]
        assert [m.phy_offset for m in read_path._query_records(*args[:-1], 2, 0, 2**63 - 1, True,
                                                                              *more)] == sorted(twin)[-2:]
        assert store.query("Orders", "k1", begin_ms=0.5) == store.query("Orders", "k1")  # type: ignore[arg-type]
