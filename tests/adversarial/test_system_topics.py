"""Sends to the topics only the broker writes are refused, and delayed delivery never loops into one.

A message to SCHEDULE_TOPIC_XXXX with DELAY was once parked with its own topic as REAL_TOPIC; delivery
appended it back as due, forever (~10 MB/s until the disk was full, and close() never returned).
"""

from __future__ import annotations

import pytest

from rocketstore import FlushMode, Message, MessageStore, StoreConfig
from rocketstore.errors import InvalidMessageError
from rocketstore.format.topics import NOT_ALLOWED_SEND_TOPICS, SCHEDULE_TOPIC
from rocketstore.store import prepare as prepare_module
from tests.adversarial.support import digests

FORBIDDEN = sorted(NOT_ALLOWED_SEND_TOPICS) + ["rmq_sys_REVIVE_LOG_DefaultCluster"]
BASE_MS = 1_764_000_000_000


def _config(**overrides) -> StoreConfig:
    # the test delivers with deliver_delayed; no background pass reads its counting clock meanwhile
    return StoreConfig(commitlog_file_size=1 << 20, consume_queue_file_entries=100, index_hash_slots=64,
                       index_max_entries=256, schedule_interval_ms=3_600_000, **overrides)


@pytest.mark.parametrize("topic", FORBIDDEN)
@pytest.mark.parametrize("how", ["put", "put_batch", "put_nowait", "delayed", "sync"])
def test_a_send_to_a_system_topic_is_refused_and_changes_nothing(tmp_path, topic, how):
    config = _config(flush_mode=FlushMode.SYNC) if how == "sync" else _config()
    with MessageStore.open(tmp_path / "s", config) as store:
        store.put(Message("TopicA", b"before"))
        store.flush()
        before = digests(tmp_path / "s")
        message = Message(topic, b"x", properties={"DELAY": "1"} if how == "delayed" else None)
        with pytest.raises(InvalidMessageError, match=topic) as refused:
            if how == "put_batch":
                store.put_batch([Message("TopicA", b"ok"), message])
            elif how == "put_nowait":
                store.put_nowait(message)
            else:
                store.put(message)
        assert "system topic" in str(refused.value)
        store.flush()
        assert digests(tmp_path / "s") == before
        assert store.put(Message("TopicA", b"after")).queue_offset == 1


def test_parking_a_delayed_message_still_writes_the_schedule_topic(tmp_path):
    with MessageStore.open(tmp_path / "s", _config()) as store:
        parked = store.put(Message("TopicA", b"later", properties={"DELAY": "2"}))
        assert (parked.topic, parked.queue_id) == (SCHEDULE_TOPIC, 1)
        assert store.message_at(parked.phy_offset).properties["REAL_TOPIC"] == "TopicA"


@pytest.mark.timeout(60)
def test_a_parked_record_whose_real_topic_is_a_system_topic_is_skipped_not_delivered_forever(
        tmp_path, monkeypatch):
    clock = iter(range(BASE_MS, BASE_MS + 10**9))
    root = tmp_path / "s"
    # Write what the store once accepted: a delayed message to the schedule topic itself.
    with monkeypatch.context() as patch:
        patch.setattr(prepare_module, "refuses_sends", lambda topic: False)
        prepare_module.checked_topic.cache_clear()
        with MessageStore.open(root, _config(), clock=lambda: next(clock)) as store:
            bad = store.put(Message(SCHEDULE_TOPIC, b"x", properties={"DELAY": "1"}))
            good = store.put(Message("TopicA", b"y", properties={"DELAY": "1"}))
    prepare_module.checked_topic.cache_clear()
    prepare_module._CHECKED_TOPICS.pop(SCHEDULE_TOPIC, None)
    assert bad.topic == SCHEDULE_TOPIC

    with MessageStore.open(root, _config(), clock=lambda: next(clock)) as store:
        assert store.message_at(bad.phy_offset).properties["REAL_TOPIC"] == SCHEDULE_TOPIC
        end = store.max_phy_offset
        assert store.deliver_delayed(BASE_MS + 3_600_000) == 1  # the good one only
        delivered_end = store.max_phy_offset
        assert delivered_end > end
        for _ in range(5):
            assert store.deliver_delayed(BASE_MS + 7_200_000) == 0
        assert store.max_phy_offset == delivered_end
        got = store.get("TopicA", 0, 0)
        assert [m.body for m in got.messages] == [b"y"]
        assert good.topic == SCHEDULE_TOPIC


def test_only_the_broker_topics_take_broker_records(tmp_path):
    from rocketstore.format.topics import BROKER_WRITTEN_TOPICS, TRANS_OP_TOPIC

    with MessageStore.open(tmp_path / "s", _config()) as store:
        for topic in ("TopicA", SCHEDULE_TOPIC, "rmq_sys_REVIVE_LOG_DefaultCluster"):
            before = digests(tmp_path / "s")
            with pytest.raises(InvalidMessageError, match="not one the broker writes"):
                store.put_broker_records([Message(TRANS_OP_TOPIC, b"0"), Message(topic, b"x")])
            assert digests(tmp_path / "s") == before, "a refused batch writes nothing"
        results = store.put_broker_records([Message(t, b"0", tags="d") for t in sorted(BROKER_WRITTEN_TOPICS)])
        assert [(r.topic, r.queue_offset) for r in results] == [(t, 0) for t in sorted(BROKER_WRITTEN_TOPICS)]
        assert [m.body for m in store.iter_queue(TRANS_OP_TOPIC, 0)] == [b"0"]
