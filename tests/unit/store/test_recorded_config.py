"""An open without a config takes what the store recorded in config/rocketstore.json: its geometry and
the delay levels it was written with."""

from __future__ import annotations

import json

import pytest

from rocketstore import MessageStore, StoreConfig
from rocketstore.errors import StoreLayoutError


def test_an_open_without_a_config_takes_the_recorded_delay_levels(tmp_path):
    with MessageStore.open(tmp_path, StoreConfig(commitlog_file_size=1 << 20, delay_levels="2s 4s")):
        pass
    with MessageStore.open(tmp_path) as store:
        assert (store.config.delay_levels, store.config.commitlog_file_size) == ("2s 4s", 1 << 20)
    with MessageStore.open(tmp_path, read_only=True) as store:
        assert store.config.delay_level_millis() == [2000, 4000]


def test_recorded_delay_levels_that_do_not_parse_are_named(tmp_path):
    with MessageStore.open(tmp_path, StoreConfig(commitlog_file_size=1 << 20)):
        pass
    record = tmp_path / "config" / "rocketstore.json"
    data = json.loads(record.read_text())
    data["delay_levels"] = "2x 4s"
    record.write_text(json.dumps(data))
    with pytest.raises(StoreLayoutError, match="delay_levels"):
        MessageStore.open(tmp_path)
    with MessageStore.open(tmp_path, StoreConfig(commitlog_file_size=1 << 20)) as store:  # given: recorded anew
        assert store.config.delay_levels == StoreConfig().delay_levels
    assert json.loads(record.read_text())["delay_levels"] == StoreConfig().delay_levels


def test_a_read_only_open_of_a_rocketmq_store_takes_the_geometry_of_its_files(golden_store, caplog):
    """A store RocketMQ wrote records no geometry: a read-only open (the API's, the Spark reader's) takes
    what its files give, and says so; a writable open with the defaults refuses before touching it."""
    import logging

    from rocketstore.spark._stores import store_config

    expected = {"commitlog_file_size": 65536, "consume_queue_file_entries": 100, "index_hash_slots": 100,
                "index_max_entries": 400}
    with caplog.at_level(logging.INFO, logger="rocketstore.store"), \
            MessageStore.open(golden_store, read_only=True) as store:
        assert store.geometry_inferred == expected
        assert "TopicA" in store.queues() and store.max_phy_offset > 0
    assert "geometry inferred from its files" in caplog.text
    assert store_config(str(golden_store)).geometry() == {**StoreConfig().geometry(), **expected}
    before = sorted(p.name for p in golden_store.rglob("*"))
    with pytest.raises(StoreLayoutError, match="configured size"):
        MessageStore.open(golden_store)
    assert sorted(p.name for p in golden_store.rglob("*")) == before
