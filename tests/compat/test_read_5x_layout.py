"""Records in RocketMQ 5.x layout (v2 magic, 2-byte topic length, trailing property separator) read."""

from __future__ import annotations

from pathlib import Path

from rocketstore import MessageStore, StoreConfig
from rocketstore.format.checkpoint import FIELDS_V5, Checkpoint
from rocketstore.format.consume_queue import pack_unit
from rocketstore.format.filenames import offset_to_name
from rocketstore.format.javahash import java_hash
from rocketstore.format.message import encode_blank, encode_message
from rocketstore.format.properties import encode_properties

CONFIG = StoreConfig(commitlog_file_size=4096, consume_queue_file_entries=10, index_hash_slots=8,
                     index_max_entries=8)


def _write_5x_store(root: Path) -> list[tuple[int, bytes]]:
    """A store as a 5.x broker lays it out: v1 and v2 records, trailing separators, 5-field checkpoint."""
    (root / "commitlog").mkdir(parents=True)
    cq_dir = root / "consumequeue" / "TopicV5" / "0"
    cq_dir.mkdir(parents=True)
    log = bytearray(4096)
    cq = bytearray(200)
    written = []
    pos = 0
    topics = ["TopicV5", "TopicV5", "TopicV5"]
    for i, topic in enumerate(topics):
        props = encode_properties({"TAGS": "TagA", "KEYS": f"k{i}", "WAIT": "true"}, trailing_separator=True)
        record = encode_message(
            topic=topic.encode(), body=f"body-{i}".encode(), properties=props.encode(), queue_id=0, flag=0,
            queue_offset=i, phy_offset=pos, sys_flag=0, born_timestamp=1, born_ip=b"\x7f\0\0\1", born_port=1,
            store_timestamp=1_800_000_000_000 + i, store_ip=b"\x7f\0\0\1", store_port=10911,
            version=2 if i % 2 else 1)
        log[pos:pos + len(record)] = record
        cq[i * 20:(i + 1) * 20] = pack_unit(pos, len(record), java_hash("TagA"))
        written.append((pos, record))
        pos += len(record)
    log[pos:pos + 8] = encode_blank(4096 - pos)
    (root / "commitlog" / offset_to_name(0)).write_bytes(bytes(log))
    (root / "commitlog" / offset_to_name(4096)).write_bytes(bytes(4096))  # pre-allocated, unused
    (root / "consumequeue" / "TopicV5" / "0" / offset_to_name(0)).write_bytes(bytes(cq))
    checkpoint = FIELDS_V5.pack(1_800_000_000_002, 1_800_000_000_002, 0, 0, written[-1][0])
    (root / "checkpoint").write_bytes(checkpoint + bytes(4096 - len(checkpoint)))
    return written


def test_v2_records_and_trailing_separators_read(tmp_path):
    root = tmp_path / "store5"
    written = _write_5x_store(root)
    with MessageStore.open(root, CONFIG, read_only=True) as store:
        messages = list(store.scan())
        assert [(m.phy_offset, m.raw) for m in messages] == written
        assert [m.magic for m in messages] == [0xDAA320A7, 0xDAA320AB, 0xDAA320A7]
        assert all(m.properties == {"TAGS": "TagA", "KEYS": f"k{i}", "WAIT": "true"}
                   for i, m in enumerate(messages))
        got = store.get("TopicV5", 0, 0, tags="TagA")
        assert [m.body for m in got.messages] == [b"body-0", b"body-1", b"body-2"]
        assert store.max_phy_offset == 4096


def test_a_5x_store_opens_for_writing_and_keeps_its_records(tmp_path):
    root = tmp_path / "store5"
    written = _write_5x_store(root)
    with MessageStore.open(root, CONFIG) as store:
        assert store.recovery.end_offset == 4096
        assert [m.raw for m in store.scan()] == [r for _, r in written]
        assert [m.phy_offset for m in store.query("TopicV5", "k1")] == [written[1][0]]
    assert Checkpoint.unpack((root / "checkpoint").read_bytes()).confirm_phy_offset == written[-1][0]
