"""data_extents: the data of a sparse file, and recovery's search for the last non-zero byte through it."""

from __future__ import annotations

import os

import pytest

from rocketstore.services.recovery import _last_nonzero
from rocketstore.storage.mapped_file import MappedFile
from rocketstore.storage.sparse import data_extents

SIZE = 64 << 20


@pytest.fixture
def sparse_file(tmp_path):
    path = tmp_path / "00000000000000000000"
    with open(path, "wb") as fh:
        fh.truncate(SIZE)
    return path


def _poke(path, pos, data):
    with open(path, "r+b") as fh:
        fh.seek(pos)
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _covered(extents, pos):
    return any(lo <= pos < hi for lo, hi in extents)


def test_extents_cover_every_written_byte_and_skip_the_holes(sparse_file):
    for pos in (0, 5 << 20, SIZE - 1):
        _poke(sparse_file, pos, b"x")
    extents = list(data_extents(sparse_file, 0, SIZE))
    assert all(_covered(extents, pos) for pos in (0, 5 << 20, SIZE - 1))
    assert extents == sorted(extents)
    assert all(0 <= lo < hi <= SIZE for lo, hi in extents)
    assert sum(hi - lo for lo, hi in extents) < SIZE  # the holes were skipped (a file system with SEEK_HOLE)


def test_extents_are_clipped_to_the_range_asked(sparse_file):
    _poke(sparse_file, 1 << 20, b"y" * 10)
    assert list(data_extents(sparse_file, (1 << 20) + 4, (1 << 20) + 8)) == [((1 << 20) + 4, (1 << 20) + 8)]
    assert list(data_extents(sparse_file, 10, 10)) == []


def test_an_all_hole_file_has_no_extents(sparse_file):
    assert list(data_extents(sparse_file, 0, SIZE)) == []


@pytest.mark.parametrize("pos", [0, 4095, 1 << 20, (40 << 20) + 3, SIZE - 1])
def test_last_nonzero_finds_the_last_written_byte_in_a_sparse_file(sparse_file, pos):
    _poke(sparse_file, pos, b"\x01")
    mf = MappedFile(sparse_file, SIZE)
    try:
        assert _last_nonzero(mf, 0) == pos + 1
        assert _last_nonzero(mf, pos + 1) == pos + 1  # nothing at or after the start: the start
    finally:
        mf.close()
