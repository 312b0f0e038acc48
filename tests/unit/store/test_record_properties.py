"""What properties a stored record keeps: every one it was put with, as RocketMQ writes the properties
string it is given. WAIT (whether a put waits for the disk) and DELAY (where it is parked) are read, never
removed; a delayed message's parked record adds REAL_TOPIC / REAL_QID, and its delivered copy keeps the
parked record's properties, DELAY and WAIT among them, without being parked again."""

from __future__ import annotations

from rocketstore import FlushMode, Message, MessageStore, StoreConfig
from rocketstore.format.properties import decode_properties
from rocketstore.format.topics import SCHEDULE_TOPIC

T0 = 1_800_000_000_000


def _store(root, now: list[int], **kw) -> MessageStore:
    cfg = StoreConfig(commitlog_file_size=64 * 1024, consume_queue_file_entries=50, index_hash_slots=16,
                      index_max_entries=64, schedule_interval_ms=3_600_000, **kw)
    return MessageStore.open(root, cfg, clock=lambda: now[0])


def _stored_properties(store: MessageStore, phy_offset: int) -> str:
    return store.message_at(phy_offset).properties_string


def test_a_record_keeps_wait_as_it_was_sent(tmp_path):
    with _store(tmp_path, [T0]) as store:
        kept = store.put(Message("T", b"x", tags="A", properties={"WAIT": "true", "UNIQ_KEY": "u1"}))
        quick = store.put(Message("T", b"y", properties={"WAIT": "false"}))
        assert _stored_properties(store, kept.phy_offset) == "WAIT\x01true\x02UNIQ_KEY\x01u1\x02TAGS\x01A"
        assert decode_properties(_stored_properties(store, quick.phy_offset)) == {"WAIT": "false"}


def test_wait_false_is_kept_and_still_read_by_a_sync_store(tmp_path):
    with _store(tmp_path, [T0], flush_mode=FlushMode.SYNC) as store:
        result = store.put(Message("T", b"x", properties={"WAIT": "false"}))
        assert result.ok and store.message_at(result.phy_offset).properties == {"WAIT": "false"}


def test_the_delivered_copy_keeps_delay_and_wait_and_is_not_parked_again(tmp_path):
    now = [T0]
    with _store(tmp_path, now) as store:
        parked = store.put(Message("Real", b"late", queue_id=1, keys=("k",),
                                   properties={"DELAY": "1", "WAIT": "false", "RETRY_TOPIC": "Orig"}))
        assert (parked.topic, parked.queue_id) == (SCHEDULE_TOPIC, 0)
        parked_props = store.message_at(parked.phy_offset).properties
        assert parked_props["WAIT"] == "false" and parked_props["DELAY"] == "1"
        assert (parked_props["REAL_TOPIC"], parked_props["REAL_QID"]) == ("Real", "1")
        now[0] = T0 + 1_000
        assert store.deliver_delayed() == 1
        (copy,) = store.get("Real", 1, 0).messages
        assert copy.properties_string == store.message_at(parked.phy_offset).properties_string
        assert store.max_offset(SCHEDULE_TOPIC, 0) == 1, "the copy was not parked again"
        now[0] = T0 + 3_600_000
        assert store.deliver_delayed() == 0
        assert store.max_offset("Real", 1) == 1
