"""Store files of the wrong size: every command refuses them, naming the way out, and `recover` takes it
(the odd file's bytes kept under quarantine/, the store opening again with every whole record)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig, StoreLayoutError
from tests.cli.cliharness import assert_one_line_error, run_cli

from .support import digests

CFG = StoreConfig(commitlog_file_size=4096, consume_queue_file_entries=8, index_hash_slots=8, index_max_entries=6,
                  deliver_delayed_messages=False)
FLAGS = ("--commitlog-file-size", "4096", "--consume-queue-file-entries", "8", "--index-hash-slots", "8",
         "--index-max-entries", "6")


def _store(root: Path, count: int = 60) -> list[int]:
    with MessageStore.open(root, CFG) as store:
        return [store.put(Message("T", f"m{i:03}".encode() * 25, keys=(f"k{i}",))).phy_offset for i in range(count)]


def _files(root: Path, kind: str) -> list[Path]:
    return sorted((root / kind).iterdir())


def test_an_index_file_of_the_wrong_size_is_set_aside_and_its_records_indexed_again(tmp_path):
    offsets = _store(tmp_path)
    odd = _files(tmp_path, "index")[1]
    original = odd.read_bytes()
    os.truncate(odd, len(original) - 100)
    with pytest.raises(StoreLayoutError, match="rocketstore recover"):
        MessageStore.open(tmp_path, CFG, read_only=True)
    with MessageStore.open(tmp_path, CFG) as store:
        report = store.recovery
        assert not report.clean
        assert report.odd_files[0].file == f"index/{odd.name}" and report.odd_files[0].size == len(original) - 100
        assert Path(report.odd_files[0].saved_to).read_bytes() == original[:-100]
        assert all(f.action.startswith("set aside") for f in report.odd_files)
        for i, phy in enumerate(offsets):
            assert [m.phy_offset for m in store.query("T", f"k{i}")] == [phy], i
    with MessageStore.open(tmp_path, CFG) as store:
        assert store.recovery.clean


def test_a_commitlog_file_cut_short_is_refused_until_recover_keeps_a_copy_and_resizes_it(tmp_path):
    offsets = _store(tmp_path)
    last = _files(tmp_path, "commitlog")[-1]
    original = last.read_bytes()
    cut = len(original.rstrip(b"\0")) + 10  # only zeros are cut
    assert cut < 4096
    os.truncate(last, cut)
    before = digests(tmp_path)
    for read_only in (True, False):
        with pytest.raises(StoreLayoutError, match="rocketstore recover"):
            MessageStore.open(tmp_path, CFG, read_only=read_only)
    refused = run_cli("get", tmp_path, "--topic", "T", "--queue", "0", *FLAGS)
    assert "rocketstore recover" in assert_one_line_error(refused)
    assert digests(tmp_path) == before
    result = run_cli("recover", tmp_path, *FLAGS, "--json")
    assert result.code == 1, result.err
    assert "moved 1 range(s) or file(s) aside" in result.err
    document = result.json(code=1)
    assert [(f["file"], f["size"], f["expected"]) for f in document["odd_files"]] == [
        (f"commitlog/{last.name}", cut, 4096)]
    assert Path(document["odd_files"][0]["saved_to"]).read_bytes() == original[:cut]
    assert last.stat().st_size == 4096
    with MessageStore.open(tmp_path, CFG) as store:
        assert store.recovery.clean
        assert [m.phy_offset for m in store.scan()] == offsets
        assert store.max_offset("T", 0) == len(offsets)


def test_a_commitlog_file_cut_inside_a_record_keeps_every_byte_in_quarantine(tmp_path):
    offsets = _store(tmp_path)
    files = _files(tmp_path, "commitlog")
    first = files[0]
    original = {p.name: p.read_bytes() for p in files}
    os.truncate(first, 3000)
    with MessageStore.open(tmp_path, CFG, repair=True) as store:
        report = store.recovery
        assert report.odd_files[0].action == "copied, then zero-extended to 4096 bytes"
        assert report.mode.value == "abnormal" and report.start_offset == 0
        kept = [m.phy_offset for m in store.scan()]
        assert kept == [o for o in offsets if o + 100 <= 3000][:len(kept)] and kept
        assert store.max_phy_offset <= 3000
        end = store.max_phy_offset
    assert Path(report.odd_files[0].saved_to).read_bytes() == original[first.name][:3000]
    original[first.name] = original[first.name][:3000]
    # every non-zero byte past the end is in quarantine, every byte before it still in the store
    for q in report.quarantined:
        assert Path(q.saved_to).read_bytes() == original[q.source][q.position:q.position + q.length]
    covered = {(q.source, q.position + q.length) for q in report.quarantined}
    for name, data in original.items():
        start = int(name)
        kept = max(0, min(len(data), end - start))
        if kept:
            assert (tmp_path / "commitlog" / name).read_bytes()[:kept] == data[:kept]
        if data[kept:].strip(b"\0"):
            assert (name, len(data.rstrip(b"\0"))) in covered, name


def test_commitlog_files_all_of_another_size_mean_the_geometry_is_wrong_and_nothing_is_touched(tmp_path):
    _store(tmp_path)
    (tmp_path / "config" / "rocketstore.json").unlink()  # as in a store RocketMQ wrote
    before = digests(tmp_path)
    wrong = StoreConfig(commitlog_file_size=8192, consume_queue_file_entries=8, index_hash_slots=8,
                        index_max_entries=6, deliver_delayed_messages=False)
    with pytest.raises(StoreLayoutError, match="no commitlog file has the configured size 8192"):
        MessageStore.open(tmp_path, wrong, repair=True)
    after = digests(tmp_path)
    assert {k: v for k, v in after.items() if k != "config/rocketstore.json"} == \
        {k: v for k, v in before.items() if k != "config/rocketstore.json"}


def test_a_writable_open_with_another_geometry_than_the_files_touches_nothing(tmp_path):
    from tests.conftest import GOLDEN_GEOMETRY, copy_golden_store

    store = copy_golden_store(tmp_path / "golden")  # written by RocketMQ: no config/rocketstore.json
    before = digests(store)
    with pytest.raises(StoreLayoutError, match="no commitlog file has the configured size"):
        MessageStore.open(store)  # the default geometry: 1 GiB files
    only_commitlog = StoreConfig(commitlog_file_size=GOLDEN_GEOMETRY["commitlog_file_size"],
                                 consume_queue_file_entries=GOLDEN_GEOMETRY["consume_queue_file_entries"])
    with pytest.raises(StoreLayoutError, match="no index file has the configured size"):
        MessageStore.open(store, only_commitlog)  # the index geometry left at its default
    assert digests(store) == before, "a refused open set files aside"
    assert not (store / "quarantine").exists()
