"""MessageStore.delete_topic: the queues and topics.json entry go, and a reopen does not rebuild them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import InvalidArgumentError, StoreReadOnlyError
from rocketstore.log.json_config import read_json
from tests.broker.broker_support import SMALL_GEOMETRY


def _json(path: Path) -> dict:
    data = read_json(path)
    assert data is not None, path
    return data


def _fill(store: MessageStore, topic: str, count: int) -> None:
    for i in range(count):
        store.put(Message(topic, f"{topic}-{i}".encode(), queue_id=i % 2, keys=[f"k{i}"]))


@pytest.mark.parametrize("flush_first", [True, False])
def test_deleted_topic_stays_deleted_after_close_and_reopen(tmp_path: Path, flush_first: bool) -> None:
    root = tmp_path / "store"
    with MessageStore.open(root, StoreConfig(**SMALL_GEOMETRY)) as store:
        _fill(store, "Gone", 10)
        _fill(store, "Kept", 6)
        if flush_first:  # the record names Gone's queues: only delete_topic's rewrite keeps them deleted
            store.flush()
            recorded = _json(root / "config" / "derivedEnds.json")["queues"]
            assert "Gone" in recorded
        log_end = store.max_phy_offset
        assert store.delete_topic("Gone") is True
        assert store.max_offset("Gone", 0) == 0 and "Gone" not in store.queues()
        assert not (root / "consumequeue" / "Gone").exists()
        assert "Gone" not in _json(root / "config" / "topics.json")["topicConfigTable"]
        assert "Gone" not in _json(root / "config" / "derivedEnds.json")["queues"]
        assert store.delete_topic("Gone") is False  # nothing left to delete
    with MessageStore.open(root) as store:
        assert "Gone" not in store.queues() and "Gone" not in store.topic_config()
        assert not (root / "consumequeue" / "Gone").exists()
        assert store.queues()["Kept"] == [0, 1]
        assert [m.body for m in store.get("Kept", 0, 0, 32).messages] == [b"Kept-0", b"Kept-2", b"Kept-4"]
        assert store.max_phy_offset == log_end  # the records stay in the log until retention
        assert store.message_at(0).topic == "Gone"
        result = store.put(Message("Gone", b"again", queue_id=0))  # a new send starts the queue again
        assert result.queue_offset == 0
    with MessageStore.open(root) as store:
        assert [m.body for m in store.get("Gone", 0, 0, 32).messages] == [b"again"]


def test_delete_topic_refuses_what_it_cannot_delete(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with MessageStore.open(root, StoreConfig(**SMALL_GEOMETRY)) as store:
        _fill(store, "T", 2)
        for bad in ("", "SCHEDULE_TOPIC_XXXX", None):
            with pytest.raises(InvalidArgumentError):
                store.delete_topic(bad)  # type: ignore[arg-type]
    with MessageStore.open(root, read_only=True) as store, pytest.raises(StoreReadOnlyError):
        store.delete_topic("T")
