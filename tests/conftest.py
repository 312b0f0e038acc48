"""Fixtures shared by every test folder: the golden RocketMQ store, scratch store directories, a failing disk."""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from rocketstore.config import DISK_CLEAN_FORCIBLY_ENV, DISK_FULL_ENV

# CI's sanitizer run (.ci/run: ASan and UBSan, every allocation through malloc) is several times slower;
# how fast hypothesis generates inputs is not what it tests
settings.register_profile("sanitized", suppress_health_check=[HealthCheck.too_slow], deadline=None)

# The stores under test (and those of the brokers and Spark jobs the tests start, which inherit the
# environment) neither delete fresh files nor refuse puts because the host's disk is full of other
# things: above 85 % a broker under test deleted its store's files while a test read them. The retention
# tests set the levels they check on their own stores (docs/recovery.md, Retention).
os.environ[DISK_CLEAN_FORCIBLY_ENV] = "1.0"
os.environ[DISK_FULL_ENV] = "1.0"

REPO_ROOT = Path(__file__).resolve().parents[1]
# The store written by the real RocketMQ 4.9.8 store code, carried in the repository (tests/golden/.../README.md).
# Tests never write here: they open a copy (copy_golden_store), and test_golden_copy_is_intact checks the bytes.
GOLDEN_DIR = REPO_ROOT / "tests" / "golden" / "rocketmq-4.9.8" / "basic"

# Geometry the golden store was written with (golden README).
GOLDEN_GEOMETRY = {
    "commitlog_file_size": 65536,
    "consume_queue_file_entries": 100,
    "index_hash_slots": 100,
    "index_max_entries": 400,
    "store_host": "127.0.0.1:10911",
}


def copy_golden_store(dest: Path) -> Path:
    """Copy the read-only golden store to `dest` and make the copy writable."""
    shutil.copytree(GOLDEN_DIR / "store", dest)
    for path in [dest, *dest.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IWUSR | (stat.S_IXUSR if path.is_dir() else 0))
    return dest


@pytest.fixture(scope="session")
def golden_expected() -> dict[str, Any]:
    """The answers the real RocketMQ 4.9.8 store gave (`expected.json`)."""
    with open(GOLDEN_DIR / "expected.json", encoding="utf-8") as fh:
        return json.load(fh)


@pytest.fixture
def golden_store(tmp_path: Path) -> Path:
    """A writable copy of the golden store directory."""
    return copy_golden_store(tmp_path / "golden-store")


@pytest.fixture
def golden_config():  # -> StoreConfig
    from rocketstore import StoreConfig

    return StoreConfig(**GOLDEN_GEOMETRY)


class MsyncSwitch:
    """`fs.msync` patched to fail with EIO while `broken` is set (the disk error seam)."""

    def __init__(self) -> None:
        self.broken = False


@pytest.fixture
def failing_msync(monkeypatch: pytest.MonkeyPatch) -> MsyncSwitch:
    from rocketstore.storage import fs

    switch = MsyncSwitch()
    real = fs.msync

    def failing(mm, start, end):
        if switch.broken:
            raise OSError(errno.EIO, "I/O error")
        real(mm, start, end)

    monkeypatch.setattr(fs, "msync", failing)
    return switch
