"""A store file appears under its name only at its full size: at every moment a file is being sized, every
offset- or time-named file of the store already has its geometry's size, so a reader beside the writer
(another process's `verify`, a read-only open, a Spark job) never lists a short file, and a crash or a
refused allocation leaves nothing under a store name."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from rocketstore import FlushMode, Message, MessageStore, StoreConfig
from rocketstore.format.consume_queue import UNIT_SIZE
from rocketstore.format.index import index_file_size
from rocketstore.format.store_dirs import STAGING_PREFIX
from rocketstore.storage import fs

CONFIG = StoreConfig(commitlog_file_size=16 * 1024, consume_queue_file_entries=40, index_hash_slots=32,
                     index_max_entries=64, flush_mode=FlushMode.ASYNC, deliver_delayed_messages=False)


def _short_files(root: Path, config: StoreConfig) -> list[tuple[str, int]]:
    """(path, size) of every store file whose size is not its geometry's."""
    expected = {"commitlog": config.commitlog_file_size, "consumequeue": config.consume_queue_file_entries * UNIT_SIZE,
                "index": index_file_size(config.index_hash_slots, config.index_max_entries)}
    short = []
    for kind, size in expected.items():
        for path in (root / kind).rglob("*"):
            if path.is_file() and path.stat().st_size != size:
                short.append((str(path.relative_to(root)), path.stat().st_size))
    return short


def _workload(root: Path, config: StoreConfig) -> None:
    with MessageStore.open(root, config) as store:
        for i in range(1500):  # rolls commitlog, queue and index files many times
            store.put(Message(f"Whole{i % 3}", b"x" * 100, queue_id=i % 2, keys=f"k{i}"))


@pytest.mark.parametrize("staged", [True, False], ids=["staged-then-linked", "in-place-across-file-systems"])
def test_no_short_store_file_is_ever_visible_while_files_are_sized(tmp_path, monkeypatch, staged):
    seen: list[list[tuple[str, int]]] = []
    real_ftruncate = os.ftruncate

    def watching_ftruncate(fd: int, length: int) -> None:  # every store file is sized by an ftruncate
        seen.append(_short_files(tmp_path, CONFIG))
        real_ftruncate(fd, length)

    monkeypatch.setattr(os, "ftruncate", watching_ftruncate)
    if not staged:
        def cross_device(src: str, dst: str) -> None:
            raise OSError(errno.EXDEV, "Invalid cross-device link")

        monkeypatch.setattr(os, "link", cross_device)
    _workload(tmp_path, CONFIG)
    monkeypatch.undo()
    files = _short_files(tmp_path, CONFIG), sum(1 for _ in tmp_path.rglob("0*")), len(seen)
    assert files[0] == [] and files[1] > 50 and files[2] > 50, files
    assert not any(p.name.startswith(STAGING_PREFIX) for p in tmp_path.iterdir())
    if staged:
        assert [short for short in seen if short] == []
    else:  # a root on another file system: the file being sized is under its name, as RocketMQ makes it
        assert any(short for short in seen)
    with MessageStore.open(tmp_path, CONFIG, read_only=True) as store:
        assert store.max_offset("Whole0", 0) == 250


def test_a_refused_allocation_leaves_no_file(tmp_path, monkeypatch):
    def full_disk(fd: int, size: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    target = tmp_path / "commitlog" / "00000000000000016384"
    target.parent.mkdir()
    monkeypatch.setattr(fs, "allocate", full_disk)
    with pytest.raises(OSError, match="No space"):
        fs.create_sized(target, 16 * 1024)
    assert list(tmp_path.rglob("*")) == [target.parent]


def test_a_file_a_crash_left_half_made_is_removed_by_the_next_writable_open_only(tmp_path):
    MessageStore.open(tmp_path, CONFIG).close()
    left = tmp_path / f"{STAGING_PREFIX}x1y2z3"
    left.write_bytes(b"\0" * 100)
    MessageStore.open(tmp_path, CONFIG, read_only=True).close()
    assert left.exists()
    MessageStore.open(tmp_path, CONFIG).close()
    assert not left.exists()


def test_a_file_left_empty_by_a_crash_is_sized_and_any_other_size_is_left_alone(tmp_path):
    empty, odd = tmp_path / "00000000000000000000", tmp_path / "00000000000000016384"
    empty.touch()
    odd.write_bytes(b"\1" * 100)
    assert fs.create_sized(empty, 16 * 1024) == 16 * 1024 and empty.stat().st_size == 16 * 1024
    assert fs.create_sized(odd, 16 * 1024) == 100 and odd.read_bytes() == b"\1" * 100
