"""Geometry read off a store's files: only what the sizes answer without doubt."""

from __future__ import annotations

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.index import index_file_size
from rocketstore.log.geometry import infer_geometry


def test_the_sizes_of_a_store_give_its_geometry(tmp_path):
    config = StoreConfig(commitlog_file_size=8192, consume_queue_file_entries=16, index_hash_slots=10,
                         index_max_entries=40, deliver_delayed_messages=False)
    with MessageStore.open(tmp_path, config) as store:
        for i in range(100):
            store.put(Message(f"T{i % 3}", b"x" * 100, keys=(f"k{i}",)))
    assert infer_geometry(tmp_path) == config.geometry()


def test_sizes_that_do_not_answer_without_doubt_give_nothing(tmp_path):
    (tmp_path / "commitlog").mkdir()
    (tmp_path / "commitlog" / f"{0:020d}").write_bytes(bytes(4096))
    (tmp_path / "commitlog" / f"{4096:020d}").write_bytes(bytes(1000))  # a file cut short
    (tmp_path / "consumequeue" / "T" / "0").mkdir(parents=True)
    (tmp_path / "consumequeue" / "T" / "0" / f"{0:020d}").write_bytes(bytes(30))  # not whole entries
    (tmp_path / "index").mkdir()
    (tmp_path / "index" / "20261125000000000").write_bytes(bytes(index_file_size(10, 7)))  # not 4 per slot
    assert infer_geometry(tmp_path) == {}
