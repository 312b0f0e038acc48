"""Damaged JSON state files (config/*.json): the store stays usable, the damage is kept and reported.

A value that does not parse ("5x"), does not fit the Java type RocketMQ reads it into (2**70, -1), or a
file cut short once made every command fail with a bare ValueError, or was dropped without a word and
then overwritten, losing every committed offset.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from tests.cli.cliharness import run_cli

from .support import digests

SMALL = {"commitlog_file_size": 1 << 16, "index_hash_slots": 64, "index_max_entries": 256}
CFG = StoreConfig(deliver_delayed_messages=False, **SMALL)
OFFSETS = "config/consumerOffset.json"


def _store(root: Path) -> None:
    with MessageStore.open(root, CFG) as store:
        for i in range(5):
            store.put(Message("T", f"m{i}".encode()))
        store.commit_offset("G", "T", 0, 2)
        store.flush()
    with MessageStore.open(root, CFG) as store:  # a second write: the first content is now the .bak
        store.commit_offset("G", "T", 0, 3)
        store.commit_offset("H", "T", 0, 1)
        store.flush()
    assert json.loads((root / OFFSETS).read_text().replace("{0:", '{"0":'))["offsetTable"]["T@G"] == {"0": 3}


@pytest.mark.parametrize("damage", [
    pytest.param(lambda text: text.replace(":3", ':"5x"'), id="not-a-number"),
    pytest.param(lambda text: text.replace(":3", ":1180591620717411303424"), id="past-a-java-long"),
    pytest.param(lambda text: text.replace(":3", ":-1"), id="negative"),
    pytest.param(lambda text: text[:len(text) // 2], id="cut-short"),
    pytest.param(lambda text: "", id="empty"),
])
def test_a_damaged_offsets_file_falls_back_to_its_backup_and_is_kept(tmp_path, damage):
    _store(tmp_path)
    path = tmp_path / OFFSETS
    path.write_text(damage(path.read_text()))
    damaged = path.read_bytes()
    before = digests(tmp_path)
    with MessageStore.open(tmp_path, CFG, read_only=True) as reader:  # reads, writes nothing
        assert reader.committed_offset("G", "T", 0) == 2  # the .bak's value
        (problem,) = reader.recovery.state_files
        assert (problem.file, problem.used, problem.saved_to) == (OFFSETS, OFFSETS + ".bak", None)
        assert not reader.recovery.clean
    assert digests(tmp_path) == before
    with MessageStore.open(tmp_path, CFG) as store:
        (problem,) = store.recovery.state_files
        assert Path(problem.saved_to).read_bytes() == damaged
        assert store.committed_offset("G", "T", 0) == 2
        store.commit_offset("G", "T", 0, 4)
    with MessageStore.open(tmp_path, CFG) as store:
        assert store.recovery.clean and store.committed_offset("G", "T", 0) == 4
    assert "2" in (tmp_path / (OFFSETS + ".bak")).read_text(), "the backup holds the good content, not the damage"


def test_a_damaged_offsets_file_without_a_backup_is_kept_and_said(tmp_path):
    with MessageStore.open(tmp_path, CFG) as store:
        store.put(Message("T", b"x"))
        store.commit_offset("G", "T", 0, 1)
    path = tmp_path / OFFSETS
    path.write_text(path.read_text()[:-3])
    damaged = path.read_bytes()
    result = run_cli("get", tmp_path, "--topic", "T", "--queue", "0", "--json")
    assert result.code == 0, result.err
    assert f"note: {OFFSETS} is damaged" in result.err and "read nothing (empty) instead" in result.err
    result = run_cli("recover", tmp_path, "--json")
    document = result.json(code=1)
    (problem,) = document["state_files"]
    assert problem["used"] == "nothing (empty)" and Path(problem["saved_to"]).read_bytes() == damaged
    assert not path.exists() or "T@G" not in path.read_text()


def test_damaged_topic_config_and_delay_progress_are_kept_and_reported(tmp_path):
    with MessageStore.open(tmp_path, StoreConfig(**SMALL)) as store:
        store.put(Message("T", b"x", properties={"DELAY": "1"}))
        store.deliver_delayed(now_ms=2**40)
    topics, delay = tmp_path / "config" / "topics.json", tmp_path / "config" / "delayOffset.json"
    assert topics.exists() and delay.exists()
    topics.write_text(topics.read_text().replace('"writeQueueNums":1', '"writeQueueNums":"four"'))
    delay.write_text("{not json")
    with MessageStore.open(tmp_path, StoreConfig(**SMALL)) as store:
        found = {p.file: p for p in store.recovery.state_files}
        assert set(found) == {"config/topics.json", "config/delayOffset.json"}
        assert "writeQueueNums of topic 'T'" in found["config/topics.json"].problem
        assert all(Path(p.saved_to).is_file() for p in found.values())
        assert store.put(Message("T", b"y")).status.name == "PUT_OK"
