"""Delayed delivery with an injected clock: a consumer sees a delayed message only after its delay."""

from __future__ import annotations

import pytest

from rocketstore import GetStatus, Message, MessageStore, StoreConfig, StoreReadOnlyError
from rocketstore.config import DEFAULT_DELAY_LEVELS
from rocketstore.log.json_config import read_json
from rocketstore.services.dispatch import SCHEDULE_TOPIC

T0 = 1_800_000_000_000
DEFAULT_DELAYS_MS = [1_000, 5_000, 10_000, 30_000, *(m * 60_000 for m in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20, 30)),
                     3_600_000, 7_200_000]


class Clock:
    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def open_store(root, clock, **kw) -> MessageStore:
    cfg = StoreConfig(commitlog_file_size=64 * 1024, consume_queue_file_entries=50, index_hash_slots=16,
                      index_max_entries=64, schedule_interval_ms=3_600_000, clean_interval_ms=3_600_000,
                      disk_full_ratio=0.90, **kw)
    return MessageStore.open(root, cfg, clock=clock)


def test_the_18_default_levels_are_rocketmqs():
    assert StoreConfig().delay_levels == DEFAULT_DELAY_LEVELS
    assert StoreConfig().delay_level_millis() == DEFAULT_DELAYS_MS


def test_a_delayed_message_reaches_its_real_queue_only_when_due(tmp_path):
    clock = Clock(T0)
    with open_store(tmp_path, clock) as store:
        parked = store.put(Message("Real", b"late", queue_id=2, keys=["k1"], tags="TagL",
                                   properties={"DELAY": "3"}))
        assert (parked.topic, parked.queue_id) == (SCHEDULE_TOPIC, 2)
        assert store.deliver_delayed(T0 + 9_999) == 0
        assert store.get("Real", 2, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE
        clock.now = T0 + 10_000
        assert store.deliver_delayed() == 1
        (msg,) = store.get("Real", 2, 0).messages
        assert msg.body == b"late" and msg.tags == "TagL" and msg.keys == ["k1"]
        # the copy keeps the parked record's properties, DELAY with them (RocketMQ writes the parked
        # record's properties string), and is not parked again
        assert msg.properties["DELAY"] == "3"
        assert list(msg.properties) == list(store.message_at(parked.phy_offset).properties)
        assert (msg.properties["REAL_TOPIC"], msg.properties["REAL_QID"]) == ("Real", "2")
        assert msg.store_timestamp == T0 + 10_000
        assert [m.phy_offset for m in store.query("Real", "k1")] == [msg.phy_offset]
        assert store.deliver_delayed(T0 + 60_000) == 0, "delivered once only"
        assert read_json(tmp_path / "config" / "delayOffset.json") == {"offsetTable": {"3": 1}}
        assert "{3:1" in (tmp_path / "config" / "delayOffset.json").read_text()


def test_progress_survives_a_reopen(tmp_path):
    clock = Clock(T0)
    with open_store(tmp_path, clock) as store:
        store.put(Message("Real", b"a", properties={"DELAY": "1"}))
        store.put(Message("Real", b"b", properties={"DELAY": "1"}))
        assert store.deliver_delayed(T0 + 1_000) == 2
    with open_store(tmp_path, clock) as store:
        assert store.deliver_delayed(T0 + 100_000) == 0
        assert [m.body for m in store.get("Real", 0, 0).messages] == [b"a", b"b"]


def test_every_level_waits_its_own_delay(tmp_path):
    clock = Clock(T0)
    with open_store(tmp_path, clock) as store:
        for level in range(1, 19):
            store.put(Message("Lv", f"level {level}".encode(), properties={"DELAY": str(level)}))
        for level, delay in enumerate(DEFAULT_DELAYS_MS, start=1):
            assert store.deliver_delayed(T0 + delay - 1) == 0
            assert store.deliver_delayed(T0 + delay) == 1
            last = store.get("Lv", 0, level - 1).messages[0]
            assert last.body == f"level {level}".encode()
        assert store.max_offset("Lv", 0) == 18


def test_a_level_past_the_last_waits_the_last_levels_delay(tmp_path):
    clock = Clock(T0)
    with open_store(tmp_path, clock) as store:
        parked = store.put(Message("Far", b"x", properties={"DELAY": "40"}))
        assert parked.queue_id == 17
        assert store.deliver_delayed(T0 + 7_200_000 - 1) == 0
        assert store.deliver_delayed(T0 + 7_200_000) == 1


def test_a_clock_that_went_back_delivers_at_once(tmp_path):
    clock = Clock(T0)
    with open_store(tmp_path, clock) as store:
        store.put(Message("Back", b"x", properties={"DELAY": "2"}))  # due at T0 + 5 s
        assert store.deliver_delayed(T0 - 10_000) == 1  # now + delay < due: RocketMQ delivers now


def test_delivery_off_or_read_only(tmp_path):
    clock = Clock(T0)
    with open_store(tmp_path, clock, deliver_delayed_messages=False) as store:
        store.put(Message("Off", b"x", properties={"DELAY": "1"}))
        with pytest.raises(StoreReadOnlyError):
            store.deliver_delayed(T0 + 5_000)
    with MessageStore.open(tmp_path, read_only=True) as reader, pytest.raises(StoreReadOnlyError):
        reader.deliver_delayed(T0 + 5_000)


def test_a_full_disk_pauses_delivery_and_space_resumes_it(tmp_path, monkeypatch):
    from rocketstore.storage import fs

    usage = {"ratio": 0.5}
    monkeypatch.setattr(fs, "disk_used_ratio", lambda path: usage["ratio"])
    clock = Clock(T0)
    with open_store(tmp_path, clock, delete_when="", file_reserved_hours=1000) as store:
        store.put(Message("Paused", b"x", properties={"DELAY": "1"}))
        usage["ratio"] = 0.95
        assert store.clean_expired(T0).disk_full
        assert store.deliver_delayed(T0 + 1_000) == 0
        assert store.max_offset("Paused", 0) == 0
        usage["ratio"] = 0.5
        store.clean_expired(T0)
        assert store.deliver_delayed(T0 + 1_000) == 1
        assert [m.body for m in store.get("Paused", 0, 0).messages] == [b"x"]
