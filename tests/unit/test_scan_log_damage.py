"""A read in log order over a damaged commitlog loses the records the damage touched and no other: the walk
goes on at the next whole record after the damaged bytes (seeded damage: zeroed, random and flipped
stretches at and inside records of every file but the newest), compiled and pure, in the default order and
in `scan=commitlog`."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import rocketstore.arrow
import rocketstore.scan.direct
from rocketstore import Message, MessageStore, StoreConfig

FILE_SIZE = 16 * 1024
OPTIONS = {"commitlogFileSize": FILE_SIZE, "consumeQueueFileEntries": 10, "bytesPerPartition": 6000}
CASES = 16


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("damage") / "store"
    with MessageStore.open(root, StoreConfig(commitlog_file_size=FILE_SIZE, consume_queue_file_entries=10)) as s:
        for i in range(300):
            s.put(Message(("TopicA", "TopicB")[i % 2], f"body-{i}".encode() * (1 + i % 7), queue_id=i % 3,
                          keys=(f"k{i}",)))
    return root


def _rows(root: Path, **options: Any) -> list[dict[str, Any]]:
    table = rocketstore.arrow.read(str(root), {**OPTIONS, **options}).read_all().drop_columns(["broker"])
    return sorted(table.to_pylist(), key=lambda r: r["commitLogOffset"])  # broker: the copy's path


def _damage(root: Path, rows: list[dict[str, Any]], rng: random.Random) -> tuple[int, int]:
    """Damage a stretch starting at or inside a record of any commitlog file but the newest; the stretch."""
    newest = max(r["commitLogOffset"] for r in rows) // FILE_SIZE
    victims = [r for r in rows if r["commitLogOffset"] // FILE_SIZE < newest]
    victim = rng.choice(victims)
    start = victim["commitLogOffset"] + rng.choice([0, 0, 4, rng.randrange(victim["storeSize"])])
    length = rng.choice([1, 4, 8, rng.randrange(1, 3 * victim["storeSize"])])
    length = min(length, FILE_SIZE - start % FILE_SIZE)
    path = root / "commitlog" / f"{start - start % FILE_SIZE:020d}"
    data = bytearray(path.read_bytes())
    at = start % FILE_SIZE
    kind = rng.choice(["zeros", "random", "flip"])
    for k in range(at, at + length):
        data[k] = 0 if kind == "zeros" else rng.randrange(256) if kind == "random" else data[k] ^ 0xFF
    path.write_bytes(bytes(data))
    return start, start + length


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "pure"])
@pytest.mark.parametrize("scan", [None, "commitlog"])
def test_damage_costs_only_the_records_it_touches(pristine: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  compiled: bool, scan: str | None) -> None:
    if compiled and not rocketstore.scan.direct.AVAILABLE:
        pytest.skip("the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")
    if not compiled:
        monkeypatch.setattr(rocketstore.scan.direct, "AVAILABLE", False)
    options = {} if scan is None else {"scan": scan}
    before = _rows(pristine, **options)
    assert len(before) == 300
    skipped = 0
    for seed in range(CASES):
        root = tmp_path / f"case{seed}"
        shutil.copytree(pristine, root)
        lo, hi = _damage(root, before, random.Random(seed))
        untouched = [r for r in before if r["commitLogOffset"] + r["storeSize"] <= lo or r["commitLogOffset"] >= hi]
        got = _rows(root, **options)
        got_offsets = {r["commitLogOffset"] for r in got}
        assert [r for r in untouched if r["commitLogOffset"] not in got_offsets] == [], (seed, lo, hi)
        # what was read beside them is only what the damaged bytes still hold whole (a flipped bit in a body)
        extra = [r for r in got if r not in untouched]
        assert all(lo < r["commitLogOffset"] + r["storeSize"] and r["commitLogOffset"] < hi for r in extra), seed
        skipped += len(before) - len(untouched)
        shutil.rmtree(root)
    assert skipped > 0  # the cases did damage records
