"""`MessageStore` hands each read and put to the part that answers it: the facade's method has that part's
signature and docstring (one text for both), and the hot calls (put, get, query) are the part's own bound
methods on an open store."""

from __future__ import annotations

import inspect

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.store.read_path import ReadPath
from rocketstore.store.write_path import WritePath

DELEGATED = [(WritePath, name) for name in ("put", "put_nowait", "put_batch", "put_broker_records")] + [
    (ReadPath, name) for name in ("queues", "min_offset", "max_offset", "message_at", "message_by_id", "queue_entries",
                                  "iter_queue", "scan", "get", "index_lookup", "query", "offset_by_time",
                                  "store_timestamp_at")]


@pytest.mark.parametrize(("part", "name"), DELEGATED)
def test_a_facade_method_has_its_parts_signature_and_docstring(part, name):
    facade, answer = getattr(MessageStore, name), getattr(part, name)
    assert inspect.signature(facade) == inspect.signature(answer)
    assert facade.__doc__ == answer.__doc__ and answer.__doc__


@pytest.mark.parametrize("name", ["min_phy_offset", "max_phy_offset"])
def test_a_facade_property_has_its_parts_docstring(name):
    assert getattr(MessageStore, name).__doc__ == getattr(ReadPath, name).__doc__


def test_the_hot_calls_are_the_parts_own(tmp_path):
    config = StoreConfig(commitlog_file_size=64 * 1024, consume_queue_file_entries=64, index_hash_slots=11,
                         index_max_entries=64, deliver_delayed_messages=False)
    with MessageStore.open(tmp_path / "store", config) as store:
        assert store.put.__self__ is store._writes and store.get.__self__ is store._reads
        assert store.query.__self__ is store._reads
        result = store.put(Message("Facade", b"body", queue_id=0, keys=("k",)))
        assert store.get("Facade", 0, 0).messages[0].phy_offset == result.phy_offset
        assert [m.phy_offset for m in store.query("Facade", "k")] == [result.phy_offset]
