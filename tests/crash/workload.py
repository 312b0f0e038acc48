"""The crash tests' workload and invariant checks, shared by the writer child and the tests.

Message `seq` is fully determined by its number: topic, queue, keys and a body whose bytes derive
from `seq`, so a reader can tell an intact message from a corrupt one without any bookkeeping.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from rocketstore import FlushMode, Message, MessageStore, StoreConfig
from rocketstore.format.message import StoredMessage

TOPICS = ("CrashA", "CrashB")
QUEUES = 3


def crash_config(mode: FlushMode, **overrides: object) -> StoreConfig:
    """Small files so that a short run rolls commitlog, consume-queue and index files."""
    values: dict[str, object] = dict(
        commitlog_file_size=16 * 1024, consume_queue_file_entries=40, index_hash_slots=32,
        index_max_entries=64, flush_mode=mode, flush_interval_ms=5, flush_least_pages=1,
        flush_thorough_interval_ms=50, flush_consume_queue_interval_ms=20,
        flush_consume_queue_thorough_interval_ms=100, sync_flush_timeout_ms=20_000,
        deliver_delayed_messages=False)
    values.update(overrides)
    return StoreConfig(**values)  # type: ignore[arg-type]


def body_for(seq: int) -> bytes:
    """A body of 20..400 bytes, every byte a function of `seq`."""
    digest = hashlib.sha256(str(seq).encode()).digest()
    size = 20 + digest[0] * 3 // 2
    return (f"seq={seq};".encode() + digest * (size // 32 + 1))[:size]


def message_for(seq: int) -> Message:
    """The message number `seq` of the workload."""
    return Message(TOPICS[seq % len(TOPICS)], body_for(seq), queue_id=seq % QUEUES,
                   keys=(f"key-{seq}", f"group-{seq % 7}"), tags=f"Tag{seq % 3}")


def seq_of(msg: StoredMessage) -> int:
    """The workload number a stored message claims (from its body)."""
    head = msg.body.split(b";", 1)[0]
    assert head.startswith(b"seq="), f"foreign body at {msg.phy_offset}: {msg.body[:20]!r}"
    return int(head[4:])


def assert_intact(msg: StoredMessage) -> int:
    """Check that a stored message is exactly workload message `seq`; return seq."""
    seq = seq_of(msg)
    expected = message_for(seq)
    assert msg.body == expected.body, f"body of seq {seq} at {msg.phy_offset} is corrupt"
    assert msg.topic == expected.topic and msg.queue_id == expected.queue_id, f"seq {seq} misplaced"
    assert msg.keys == list(expected.keys), f"keys of seq {seq}"
    return seq


@dataclass(frozen=True)
class Ack:
    """What the writer reported for one acknowledged put."""

    seq: int
    phy_offset: int
    queue_offset: int
    size: int


def parse_acks(text: str) -> list[Ack]:
    """The complete `ACK seq phy qoff size` lines of the writer's output (a cut last line is dropped)."""
    acks = []
    for line in text.splitlines(keepends=True):
        parts = line.split()
        if line.endswith("\n") and len(parts) == 5 and parts[0] == "ACK":
            acks.append(Ack(*(int(p) for p in parts[1:])))
    return acks


def check_store(store: MessageStore, acked: dict[int, Ack]) -> list[StoredMessage]:
    """Every invariant the crash tests demand of a recovered store; returns the messages in log order.

    * every acknowledged message is where the put said, intact;
    * the commitlog holds each workload message at most once, in increasing order, none corrupt;
    * each queue lists exactly the commitlog's messages of that queue, in order, offsets 0..n-1;
    * every message is found by each of its keys.
    """
    messages = list(store.scan())
    seqs = [assert_intact(m) for m in messages]
    assert seqs == sorted(set(seqs)), "a message is stored twice or out of order"
    by_seq = dict(zip(seqs, messages, strict=True))
    for seq, ack in acked.items():
        assert seq in by_seq, f"acknowledged message {seq} is lost"
        msg = by_seq[seq]
        assert (msg.phy_offset, msg.queue_offset, msg.size) == (ack.phy_offset, ack.queue_offset, ack.size)
    for topic in TOPICS:
        for queue_id in range(QUEUES):
            expected = [m for m in messages if m.topic == topic and m.queue_id == queue_id]
            got = list(store.iter_queue(topic, queue_id))
            assert [m.phy_offset for m in got] == [m.phy_offset for m in expected], f"{topic}/{queue_id}"
            assert [m.queue_offset for m in got] == list(range(len(got))), f"{topic}/{queue_id} offsets"
            assert store.max_offset(topic, queue_id) == len(expected), f"{topic}/{queue_id} max offset"
    for msg in messages:
        for key in msg.keys[:1]:
            found = store.query(msg.topic, key, max_count=4)
            assert msg.phy_offset in [f.phy_offset for f in found], f"key {key} does not find its message"
    return messages


def file_digests(root: Path) -> dict[str, bytes]:
    """Content hash of every file under `root` (to prove that a reader changed nothing)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).digest()
            for p in sorted(root.rglob("*")) if p.is_file()}
