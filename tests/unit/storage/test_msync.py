"""fs.msync: libc's msync through ctypes on Linux (the interpreter lock is let go while the disk works),
mmap.flush elsewhere; a flush and a close of the same mapped file never overlap."""

from __future__ import annotations

import ctypes
import errno
import mmap
import sys
import threading
from pathlib import Path

import pytest

from rocketstore.storage import fs
from rocketstore.storage.mapped_file import MappedFile

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libc msync is used on Linux only")


@linux_only
def test_a_flush_goes_through_libc_with_a_page_aligned_range(tmp_path: Path, monkeypatch):
    calls: list[tuple[int, int, int]] = []
    real = fs._msync
    assert real is not None

    def recording(address: int, length: int, flags: int) -> int:
        calls.append((address, length, flags))
        return real(address, length, flags)

    monkeypatch.setattr(fs, "_msync", recording)
    mf = MappedFile.create(tmp_path, 0, 1 << 20)
    try:
        mf.append(b"a" * 5000)
        mf.flushed_position = 4200  # the next flush starts inside the second page
        mf.append(b"b" * 100)
        assert mf.flush() == 5100
        base = fs._address_of(mf.mm)
        assert calls == [(base + fs.PAGE_SIZE, 5100 - fs.PAGE_SIZE, 4)]  # MS_SYNC, from the page start
        assert mf.flush() == 5100 and len(calls) == 1  # nothing new: no call
    finally:
        mf.close()


@linux_only
def test_a_refused_msync_raises_with_its_errno(tmp_path: Path, monkeypatch):
    def failing(address: int, length: int, flags: int) -> int:
        ctypes.set_errno(errno.EIO)
        return -1

    monkeypatch.setattr(fs, "_msync", failing)
    mf = MappedFile.create(tmp_path, 0, 1 << 20)
    try:
        mf.append(b"x" * 10)
        with pytest.raises(OSError) as raised:
            mf.flush()
        assert raised.value.errno == errno.EIO and mf.flushed_position == 0
    finally:
        mf.close()


def test_a_mapping_not_open_for_writing_is_flushed_through_mmap(tmp_path: Path):
    path = tmp_path / "f"
    path.write_bytes(b"z" * mmap.PAGESIZE)
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        assert fs._address_of(mm) is None
        fs.msync(mm, 0, 10)  # mmap.flush of a read-only mapping: nothing to write, no error


def test_close_waits_for_a_flush_in_progress(tmp_path: Path):
    mf = MappedFile.create(tmp_path, 0, 1 << 20)
    mf.append(b"x" * 10)
    with mf._io:  # what a flush holds around its msync
        closer = threading.Thread(target=mf.close)
        closer.start()
        closer.join(0.2)
        assert closer.is_alive() and not mf.mm.closed  # blocked while the flush holds the mapping
    closer.join()
    assert mf.mm.closed
    assert mf.flush() == 0  # a flush after close does nothing
