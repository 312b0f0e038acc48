"""After an abnormal recovery the index can hold the message at an index-file boundary twice (RocketMQ's
own recovery leaves the same): `query` answers each message once; `index_lookup`, RocketMQ's exact
queryMessage answer, keeps the duplicate as RocketMQ does."""

from __future__ import annotations

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.log.index_file import KEY
from rocketstore.log.index_service import index_keys_of

CFG = StoreConfig(index_hash_slots=8, index_max_entries=5, deliver_delayed_messages=False)


def test_a_message_indexed_twice_across_a_file_boundary_is_answered_once(tmp_path):
    with MessageStore.open(tmp_path, CFG) as store:
        results = [store.put(Message("T", f"m{i}".encode(), keys=(f"k{i}",))) for i in range(4)]
        store._writes.dispatch_behind()  # the index keys of puts follow behind the log
        boundary = results[3]  # the last key of the first file (4 entries: capacity is max_entries - 1)
        first = store.index.files[0]
        assert first.full and first.header.end_phy_offset == boundary.phy_offset
        current = store.index.current()  # the next file, as a re-dispatch from the boundary record makes it
        packed = index_keys_of((("T", boundary.phy_offset, ("k3",), None),))
        assert len(packed) == KEY.size
        current.put_keys(packed, store.message_at(boundary.phy_offset).store_timestamp)
        results += [store.put(Message("T", f"m{i}".encode(), keys=(f"k{i}",))) for i in range(4, 6)]
        store._writes.dispatch_behind()
        assert store.index.files == [first, current] and current.header.index_count == 4
        assert first.find_damage(full=True) is None and current.find_damage(full=True) is None
        assert store.index_lookup("T", "k3") == [boundary.phy_offset] * 2
        assert [m.phy_offset for m in store.query("T", "k3")] == [boundary.phy_offset]
        assert [m.phy_offset for m in store.query("T", "k3", max_count=1)] == [boundary.phy_offset]
        assert [m.phy_offset for m in store.query("T", "k5")] == [results[5].phy_offset]
