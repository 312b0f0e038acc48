"""The MessageStore API on stores the tests write: puts, reads, rules, reopen, locking, threads."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rocketstore import (
    GetStatus,
    InvalidMessageError,
    Message,
    MessageNotFoundError,
    MessageStore,
    PutStatus,
    StoreConfig,
    StoreLayoutError,
    StoreLockedError,
    StoreReadOnlyError,
)
from rocketstore.format.javahash import java_hash
from rocketstore.format.sysflag import TransactionType

SMALL = StoreConfig(commitlog_file_size=8192, consume_queue_file_entries=10, index_hash_slots=16,
                    index_max_entries=8)


class Clock:
    def __init__(self, start: int = 1_700_000_000_000) -> None:
        self.now = start

    def __call__(self) -> int:
        self.now += 7
        return self.now


def open_small(root: Path, **kw) -> MessageStore:
    return MessageStore.open(root, SMALL, clock=kw.pop("clock", Clock()), **kw)


def test_put_then_get_round_trips_every_field(tmp_path):
    with open_small(tmp_path / "s") as store:
        result = store.put(Message("TopicA", b"hello", queue_id=2, tags="TagA", keys=("k1", "k2"),
                                   properties={"color": "red"}, flag=5, born_host="10.0.0.9:4242",
                                   born_timestamp=123, reconsume_times=3))
        assert result.status is PutStatus.PUT_OK
        assert (result.phy_offset, result.queue_offset) == (0, 0)
        got = store.get("TopicA", 2, 0)
        assert got.status is GetStatus.FOUND and got.next_offset == 1 and got.max_offset == 1
        m = got.messages[0]
        assert (m.topic, m.queue_id, m.body, m.flag, m.born_host, m.born_timestamp, m.reconsume_times) == (
            "TopicA", 2, b"hello", 5, "10.0.0.9:4242", 123, 3)
        assert m.properties == {"color": "red", "TAGS": "TagA", "KEYS": "k1 k2"}
        assert m.tags == "TagA" and m.keys == ["k1", "k2"] and m.uniq_key is None
        assert m.msg_id == result.msg_id and m.store_host == "127.0.0.1:10911"
        assert m.store_timestamp == result.store_timestamp and m.size == result.size
        assert store.message_by_id(result.msg_id) == m
        assert [x.phy_offset for x in store.query("TopicA", "k2")] == [0]


def test_messages_roll_over_commitlog_files_with_a_blank_record(tmp_path):
    with open_small(tmp_path / "s") as store:
        results = [store.put(Message("T", bytes(1000), keys=(f"k{i}",))) for i in range(20)]
        assert store.max_phy_offset > 8192 * 2
        for r in results:
            assert r.phy_offset // 8192 == (r.phy_offset + r.size + 7) // 8192  # never spans files
        first_file = (tmp_path / "s" / "commitlog" / "00000000000000000000").read_bytes()
        last = max((r for r in results if r.phy_offset < 8192), key=lambda r: r.phy_offset)
        blank_at = last.phy_offset + last.size
        assert int.from_bytes(first_file[blank_at:blank_at + 4], "big") == 8192 - blank_at
        assert first_file[blank_at + 4:blank_at + 8].hex().upper() == "CBD43194"
        assert [m.body for m in store.iter_queue("T", 0)] == [bytes(1000)] * 20
        assert len(list(store.scan())) == 20
        assert [store.query("T", f"k{i}")[0].phy_offset for i in range(20)] == [r.phy_offset for r in results]


def test_reads_cross_consume_queue_files(tmp_path):
    with open_small(tmp_path / "s") as store:
        for i in range(25):
            store.put(Message("T", f"m{i}".encode()))
        got = store.get("T", 0, 8, max_count=10)
        assert [m.queue_offset for m in got.messages] == list(range(8, 18))
        assert sorted(p.name for p in (tmp_path / "s" / "consumequeue" / "T" / "0").iterdir()) == [
            "00000000000000000000", "00000000000000000200", "00000000000000000400"]


@pytest.mark.parametrize(("message", "status"), [
    (Message("", b"x"), PutStatus.MESSAGE_ILLEGAL),
    (Message("T" * 128, b"x"), PutStatus.MESSAGE_ILLEGAL),
    (Message("bad/topic", b"x"), PutStatus.MESSAGE_ILLEGAL),
    (Message("..", b"x"), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", bytes(4097)), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", b"x", properties={"a": "b\x01c"}), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", b"x", properties={"a": ""}), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", b"x", properties={"a": "x" * 32767}), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", b"x", properties={"a": "\u00e9" * 16383}), PutStatus.PROPERTIES_SIZE_EXCEEDED),
    (Message("T", b"x", born_host="nohost"), PutStatus.MESSAGE_ILLEGAL),
    # header fields out of their int32 / int64 range (once they took a queue offset and then failed)
    (Message("T", b"x", flag=2**31), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", b"x", sys_flag=-(2**31) - 1), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", b"x", reconsume_times=2**40), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", b"x", born_timestamp=2**63), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", b"x", prepared_transaction_offset=-(2**63) - 1), PutStatus.MESSAGE_ILLEGAL),
    (Message("T", b"x", flag="1"), PutStatus.MESSAGE_ILLEGAL),  # type: ignore[arg-type]
])
def test_invalid_messages_raise_and_write_nothing(tmp_path, message, status):
    config = StoreConfig(commitlog_file_size=1 << 20, max_message_size=4096)
    with MessageStore.open(tmp_path / "s", config) as store:
        store.put(Message("T", b"first"))
        before = store.max_phy_offset
        with pytest.raises(InvalidMessageError) as info:
            store.put(message)
        assert info.value.status is status
        with pytest.raises(InvalidMessageError):
            store.put_batch([Message("T", b"fine"), message])
        assert store.max_phy_offset == before
        assert store.put(Message("T", b"after")).queue_offset == 1


def test_a_127_character_topic_is_accepted(tmp_path):
    with open_small(tmp_path / "s") as store:
        assert store.put(Message("T" * 127, b"x")).ok


def test_a_record_larger_than_a_commitlog_file_is_rejected(tmp_path):
    with open_small(tmp_path / "s") as store:
        with pytest.raises(InvalidMessageError, match="does not fit"):
            store.put(Message("T", bytes(8192)))
        assert store.max_phy_offset == 0


def test_a_bad_message_in_a_batch_rejects_the_whole_batch(tmp_path):
    with open_small(tmp_path / "s") as store:
        with pytest.raises(InvalidMessageError):
            store.put_batch([Message("T", b"ok"), Message("", b"bad")])
        assert store.max_phy_offset == 0
        results = store.put_batch([Message("T", b"a"), Message("T", b"b")])
        assert [r.queue_offset for r in results] == [0, 1]


def test_reopen_continues_offsets_and_keeps_geometry(tmp_path):
    root = tmp_path / "s"
    with open_small(root) as store:
        for i in range(15):
            store.put(Message("T", f"{i}".encode(), queue_id=i % 2, keys=(f"k{i}",)))
        max_phy = store.max_phy_offset
    assert not (root / "abort").exists()
    with MessageStore.open(root) as store:  # geometry from config/rocketstore.json
        assert store.config.geometry() == SMALL.geometry()
        assert store.recovery.mode.value == "normal" and store.recovery.clean
        assert store.max_phy_offset == max_phy
        assert store.max_offset("T", 0) == 8 and store.max_offset("T", 1) == 7
        assert store.put(Message("T", b"x", queue_id=1)).queue_offset == 7
        assert [m.body for m in store.query("T", "k3")] == [b"3"]
    with pytest.raises(StoreLayoutError, match="geometry"):
        MessageStore.open(root, StoreConfig())


def test_a_second_writer_is_locked_out_but_readers_are_not(tmp_path):
    root = tmp_path / "s"
    with open_small(root) as store:
        store.put(Message("T", b"x"))
        with pytest.raises(StoreLockedError, match="already open for writing in this process") as here:
            MessageStore.open(root, SMALL)
        assert here.value.in_this_process
        code = (f"import sys; from rocketstore import MessageStore, StoreLockedError\n"
                f"try:\n    MessageStore.open({str(root)!r})\nexcept StoreLockedError as e:\n"
                f"    sys.exit(7 if 'another process' in str(e) and not e.in_this_process else 8)\n")
        assert subprocess.run([sys.executable, "-c", code]).returncode == 7
        with MessageStore.open(root, read_only=True) as reader:
            assert reader.get("T", 0, 0).messages[0].body == b"x"
            with pytest.raises(StoreReadOnlyError):
                reader.put(Message("T", b"y"))
    with open_small(root) as again:
        assert again.max_offset("T", 0) == 1


def test_transactions_follow_rocketmq_dispatch_rules(tmp_path):
    with open_small(tmp_path / "s") as store:
        prepared = store.put(Message("T", b"p", keys=("kp",), sys_flag=TransactionType.PREPARED))
        rollback = store.put(Message("T", b"r", keys=("kr",), sys_flag=TransactionType.ROLLBACK,
                                     prepared_transaction_offset=prepared.phy_offset))
        commit = store.put(Message("T", b"c", keys=("kc",), sys_flag=TransactionType.COMMIT))
        assert (prepared.queue_offset, rollback.queue_offset, commit.queue_offset) == (0, 0, 0)
        assert [m.body for m in store.iter_queue("T", 0)] == [b"c"]
        assert [m.body for m in store.query("T", "kp")] == [b"p"]
        assert store.query("T", "kr") == []
        assert [m.body for m in store.query("T", "kc")] == [b"c"]
        assert store.message_at(rollback.phy_offset).prepared_transaction_offset == prepared.phy_offset


def test_delayed_messages_are_rewritten_to_the_schedule_topic(tmp_path):
    clock = Clock()
    with open_small(tmp_path / "s", clock=clock) as store:
        result = store.put(Message("Real", b"later", queue_id=3, keys=("kd",), properties={"DELAY": "3"}))
        assert (result.topic, result.queue_id) == ("SCHEDULE_TOPIC_XXXX", 2)
        msg = store.message_at(result.phy_offset)
        assert msg.properties["REAL_TOPIC"] == "Real" and msg.properties["REAL_QID"] == "3"
        unit = next(store.queue_entries("SCHEDULE_TOPIC_XXXX", 2))
        assert unit.tags_code == result.store_timestamp + 10_000
        assert store.max_offset("Real", 3) == 0
        assert store.query("Real", "kd") == []


def test_get_statuses(tmp_path):
    with open_small(tmp_path / "s") as store:
        assert store.get("T", 0, 0).status is GetStatus.NO_MESSAGE_IN_QUEUE
        for tag in ["A", "B", "A"]:
            store.put(Message("T", tag.encode(), tags=tag))
        assert store.get("T", 0, -1).status is GetStatus.OFFSET_TOO_SMALL
        assert store.get("T", 0, 3).status is GetStatus.OFFSET_OVERFLOW_ONE
        bad = store.get("T", 0, 9)
        assert bad.status is GetStatus.OFFSET_OVERFLOW_BADLY and bad.next_offset == 3
        assert store.get("T", 0, 0, tags="C").status is GetStatus.NO_MATCHED_MESSAGE
        only_a = store.get("T", 0, 0, tags="A || C")
        assert [m.body for m in only_a.messages] == [b"A", b"A"] and only_a.next_offset == 3
        assert all(u.tags_code == java_hash(t) for u, t in zip(store.queue_entries("T", 0), "ABA", strict=True))


def test_query_time_bounds_are_exact_to_the_millisecond(tmp_path):
    clock = Clock()
    with open_small(tmp_path / "s", clock=clock) as store:
        stamps = [store.put(Message("T", bytes([i]), keys=("k",))).store_timestamp for i in range(6)]
        inside = store.query("T", "k", begin_ms=stamps[2], end_ms=stamps[4])
        assert [m.store_timestamp for m in inside] == stamps[2:5]
        assert [m.store_timestamp for m in store.query("T", "k", max_count=2)] == stamps[-2:]
        assert store.offset_by_time("T", 0, stamps[3]) == 3
        assert store.offset_by_time("T", 0, stamps[3] - 1) == 3
        assert store.offset_by_time("T", 0, stamps[-1] + 1) == 6


def test_consumer_offsets_persist_in_rocketmq_json(tmp_path):
    root = tmp_path / "s"
    with open_small(root) as store:
        store.commit_offset("g1", "TopicA", 0, 250)
        store.commit_offset("g1", "TopicA", 1, 251)
        assert store.committed_offset("g1", "TopicA", 1) == 251
        assert store.committed_offset("g2", "TopicA", 1) is None
        with pytest.raises(ValueError):
            store.commit_offset("g@x", "TopicA", 0, 1)
    text = (root / "config" / "consumerOffset.json").read_text()
    assert text == '{\n\t"offsetTable":{\n\t\t"TopicA@g1":{0:250,1:251\n\t\t}\n\t}\n}'
    with MessageStore.open(root, read_only=True) as store:
        assert store.consumer_offsets() == {"g1": {("TopicA", 0): 250, ("TopicA", 1): 251}}


def test_topics_json_lists_topics_with_their_queues(tmp_path):
    root = tmp_path / "s"
    with open_small(root) as store:
        store.put(Message("TopicA", b"x", queue_id=5))
    data = json.loads((root / "config" / "topics.json").read_text())
    assert data["topicConfigTable"]["TopicA"]["writeQueueNums"] >= 6
    assert data["topicConfigTable"]["TopicA"]["topicName"] == "TopicA"


def test_message_at_rejects_offsets_that_are_not_record_starts(tmp_path):
    with open_small(tmp_path / "s") as store:
        r = store.put(Message("T", b"x"))
        for bad in (1, r.size, -5, 10**9):
            with pytest.raises(MessageNotFoundError):
                store.message_at(bad)
        with pytest.raises(MessageNotFoundError):
            store.message_by_id("nothex")


def test_concurrent_puts_get_distinct_consecutive_offsets(tmp_path):
    with open_small(tmp_path / "s") as store:
        results: list = []
        lock = threading.Lock()

        def produce(n: int) -> None:
            for i in range(50):
                r = store.put(Message("T", f"{n}-{i}".encode(), keys=(f"{n}-{i}",)))
                with lock:
                    results.append(r)

        threads = [threading.Thread(target=produce, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(r.queue_offset for r in results) == list(range(200))
        assert len({r.phy_offset for r in results}) == 200
        bodies = [m.body for m in store.iter_queue("T", 0)]
        assert len(bodies) == len(set(bodies)) == 200


def test_check_message_applies_put_rules_without_writing(tmp_path):
    root = tmp_path / "s"
    with open_small(root) as store:
        store.put(Message("T", b"x"))
    with MessageStore.open(root, read_only=True) as reader:
        reader.check_message(Message("T", b"fine", keys=("k",)))
        with pytest.raises(InvalidMessageError) as info:
            reader.check_message(Message("T", b"x", properties={"a": "\u00e9" * 16383}))
        assert info.value.status is PutStatus.PROPERTIES_SIZE_EXCEEDED


def test_arrival_listeners_hear_every_new_queue_end(tmp_path):
    heard: list[tuple[str, int, int]] = []
    with open_small(tmp_path / "s") as store:
        remove = store.add_arrival_listener(lambda t, q, m: heard.append((t, q, m)))
        store.put(Message("T", b"a", queue_id=1))
        store.put_batch([Message("T", b"b", queue_id=1), Message("U", b"c"), Message("T", b"d", queue_id=1)])
        remove()
        store.put(Message("T", b"e", queue_id=1))
    assert heard[0] == ("T", 1, 1)
    assert ("T", 1, 3) in heard and ("U", 0, 1) in heard
    assert all(m <= 3 for _, _, m in heard)


def test_ensure_topic_and_config_of(tmp_path):
    root = tmp_path / "s"
    with open_small(root) as store:
        store.ensure_topic("Orders", 8)
        with pytest.raises(InvalidMessageError):
            store.ensure_topic("bad topic", 1)
    assert json.loads((root / "config" / "topics.json").read_text())["topicConfigTable"]["Orders"][
        "readQueueNums"] == 8
    config = MessageStore.config_of(root, store_host="10.1.2.3:10911")
    assert config.geometry() == SMALL.geometry() and config.store_host == "10.1.2.3:10911"
    with pytest.raises(StoreLayoutError):
        MessageStore.config_of(root, commitlog_file_size=1 << 20)
