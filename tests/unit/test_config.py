"""StoreConfig: ranges, RocketMQ names, geometry."""

from __future__ import annotations

import pytest

from rocketstore import FlushMode, StoreConfig
from rocketstore.errors import InvalidArgumentError


def test_rocketmq_names_map_with_their_units():
    config = StoreConfig.from_rocketmq({
        "mappedFileSizeCommitLog": "65536", "mappedFileSizeConsumeQueue": 128, "maxHashSlotNum": 100,
        "maxIndexNum": 400, "flushDiskType": "SYNC_FLUSH", "checkCRCOnRecover": "false",
        "diskMaxUsedSpaceRatio": 99, "fileReservedTime": "48", "flushIntervalConsumeQueue": "1000",
        "unrelatedSetting": "ignored",
    })
    assert config.geometry() == {"commitlog_file_size": 65536, "consume_queue_file_entries": 7,
                                 "index_hash_slots": 100, "index_max_entries": 400}
    assert config.consume_queue_file_size == 140  # RocketMQ rounds 128 up to whole 20-byte entries
    assert config.index_file_size == 8440
    assert config.flush_mode is FlushMode.SYNC
    assert config.check_crc_on_recover is False
    assert config.disk_max_used_ratio == 0.95  # clamped as RocketMQ clamps it
    assert config.file_reserved_hours == 48
    assert config.flush_consume_queue_interval_ms == 1000
    levels = StoreConfig.from_rocketmq({"diskSpaceCleanForciblyRatio": "0.8", "diskSpaceWarningLevelRatio": 0.95})
    assert (levels.disk_clean_forcibly_ratio, levels.disk_full_ratio) == (0.8, 0.95)


def test_the_disk_levels_default_to_rocketmqs_and_follow_the_environment(monkeypatch):
    from rocketstore.config import DISK_CLEAN_FORCIBLY_ENV, DISK_FULL_ENV

    monkeypatch.delenv(DISK_CLEAN_FORCIBLY_ENV)  # tests/conftest.py sets both for the suite
    monkeypatch.delenv(DISK_FULL_ENV)
    assert (StoreConfig().disk_clean_forcibly_ratio, StoreConfig().disk_full_ratio) == (0.85, 0.90)
    monkeypatch.setenv(DISK_CLEAN_FORCIBLY_ENV, " 0.7 ")
    monkeypatch.setenv(DISK_FULL_ENV, "")
    assert (StoreConfig().disk_clean_forcibly_ratio, StoreConfig().disk_full_ratio) == (0.7, 0.90)
    assert StoreConfig(disk_clean_forcibly_ratio=0.9).disk_clean_forcibly_ratio == 0.9
    monkeypatch.setenv(DISK_FULL_ENV, "ninety")
    with pytest.raises(InvalidArgumentError, match=f"{DISK_FULL_ENV}='ninety' is not a ratio"):
        StoreConfig()
    monkeypatch.setenv(DISK_FULL_ENV, "1.5")
    with pytest.raises(InvalidArgumentError, match="disk_full_ratio out of range: 1.5"):
        StoreConfig()


@pytest.mark.parametrize("field", ["commitlog_file_size", "consume_queue_file_entries", "index_hash_slots",
                                   "max_message_size", "max_get_count", "disk_clean_forcibly_ratio",
                                   "disk_full_ratio"])
def test_out_of_range_values_name_the_field(field):
    with pytest.raises(InvalidArgumentError, match=field) as raised:
        StoreConfig(**{field: 0})
    assert isinstance(raised.value, ValueError)  # what callers caught before


def test_round_trip_through_a_dict():
    config = StoreConfig(commitlog_file_size=1 << 20, flush_mode=FlushMode.SYNC)
    assert StoreConfig.from_dict(config.to_dict()) == config
    assert StoreConfig.from_dict({**config.to_dict(), "future_field": 1}) == config


def test_delay_levels_in_milliseconds():
    levels = StoreConfig().delay_level_millis()
    assert len(levels) == 18 and levels[0] == 1000 and levels[2] == 10_000 and levels[-1] == 7_200_000
