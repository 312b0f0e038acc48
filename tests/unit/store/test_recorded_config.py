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
