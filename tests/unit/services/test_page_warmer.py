"""The page warmer: pages ahead of the commitlog's write position become resident, no byte changes, and
a machine without the system call (or a failing one) only turns the warmer off."""

from __future__ import annotations

import errno
import mmap
import time
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.services import page_warmer
from rocketstore.services.page_warmer import NEVER, PageWarmer
from rocketstore.storage import fs
from rocketstore.storage.mapped_file import MappedFile

FILE = 8 << 20
PAGE = fs.PAGE_SIZE


def mapped_pages(mf: MappedFile) -> int:
    """How many pages of mf's mapping this process has mapped in (Rss of its entry in /proc/self/smaps)."""
    start = fs.mapping_address(mf.mm)
    lines = Path("/proc/self/smaps").read_text().splitlines()
    for i, line in enumerate(lines):
        if line.split("-", 1)[0] == f"{start:x}" or line.split("-", 1)[0] == f"{start:012x}":
            for detail in lines[i + 1:]:
                if detail.startswith("Rss:"):
                    return int(detail.split()[1]) * 1024 // PAGE
    raise AssertionError("mapping not found in /proc/self/smaps")


@pytest.fixture
def mapped(tmp_path: Path):
    mf = MappedFile.create(tmp_path, 0, FILE)
    yield mf
    mf.close()


def supported() -> bool:
    try:
        with mmap.mmap(-1, PAGE) as probe:
            fs.populate_write(fs.mapping_address(probe), PAGE)
    except OSError:
        return False
    return True


needs_populate = pytest.mark.skipif(not supported(), reason="the kernel has no MADV_POPULATE_WRITE (< 5.14)")


@needs_populate
def test_pages_ahead_of_the_write_position_become_resident_and_stay_zero(mapped: MappedFile):
    mapped.append(b"r" * 5000)
    warmer = PageWarmer(ahead=3 << 20)
    assert mapped_pages(mapped) == 2  # the two pages written
    mark = warmer.advance(mapped)
    assert mark == 5000 + (3 << 20) // 2
    warmer.run_once()  # what the thread does, here in the test's thread
    assert warmer.warmed_bytes >= (3 << 20) - PAGE and warmer.disabled_reason is None
    assert mapped_pages(mapped) == -(-(5000 + (3 << 20)) // PAGE)  # up to `ahead` past the position, no further
    assert bytes(mapped.mm[:5000]) == b"r" * 5000
    assert bytes(mapped.mm[5000:FILE]).count(0) == FILE - 5000  # no byte changed


@needs_populate
def test_the_wanted_range_stops_at_the_file_end_and_moves_with_the_writer(mapped: MappedFile, tmp_path: Path):
    warmer = PageWarmer(ahead=16 << 20)
    assert warmer.advance(mapped) == FILE  # the next call comes at the file's end, not 8 MiB into the next
    warmer.run_once()
    assert mapped_pages(mapped) == FILE // PAGE
    following = MappedFile.create(tmp_path, FILE, FILE)
    try:
        following.append(b"x" * 100)
        assert warmer.advance(following) == 2 * FILE
        assert mapped_pages(following) == 1
        warmer.run_once()
        assert mapped_pages(following) == FILE // PAGE
    finally:
        following.close()


def test_a_failing_call_turns_the_warmer_off_and_nothing_else(mapped: MappedFile, monkeypatch):
    def unsupported(address: int, length: int) -> None:
        raise OSError(errno.EINVAL, "Invalid argument")

    monkeypatch.setattr(fs, "populate_write", unsupported)
    warmer = PageWarmer(ahead=1 << 20)
    warmer.advance(mapped)
    warmer.run_once()
    assert warmer.disabled_reason is not None and "Invalid argument" in warmer.disabled_reason
    assert warmer.advance(mapped) == NEVER
    warmer.fail(RuntimeError("boom"))  # an unexpected error: off, and no owner is told
    assert warmer.error is not None


def test_a_store_warms_while_it_writes_and_closes_cleanly(tmp_path: Path):
    config = StoreConfig(commitlog_file_size=32 << 20, warm_ahead_bytes=4 << 20)
    with MessageStore.open(tmp_path / "s", config) as store:
        results = [store.put(Message("T", bytes([i % 251]) * 1000, keys=[f"k{i}"])) for i in range(3000)]
        warmer = store._warmer
        assert warmer is not None
        deadline = time.monotonic() + 30
        while supported() and warmer.warmed_bytes < (4 << 20) and time.monotonic() < deadline:
            time.sleep(0.01)
        if supported():
            assert warmer.warmed_bytes >= 4 << 20 and warmer.disabled_reason is None
        else:
            assert warmer.disabled_reason is not None
    with MessageStore.open(tmp_path / "s", config, read_only=True) as store:
        got = store.get("T", 0, 0, max_count=32)
        assert [m.phy_offset for m in got.messages] == [r.phy_offset for r in results[:32]]
        assert store.query("T", "k2999")[0].body == bytes([2999 % 251]) * 1000
        assert store.recovery is None or not store.recovery.quarantined


def test_warming_is_off_when_asked(tmp_path: Path):
    with MessageStore.open(tmp_path / "s", StoreConfig(commitlog_file_size=1 << 20, warm_ahead_bytes=0)) as store:
        store.put(Message("T", b"x"))
        assert store._warmer is None
    with pytest.raises(ValueError, match="warm_ahead_bytes"):
        StoreConfig(warm_ahead_bytes=-1)
    assert page_warmer.CHUNK % PAGE == 0
