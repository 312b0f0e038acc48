"""File descriptors: a store of 10,000 consume queues opens, takes puts and reopens under `ulimit -n 1024`;
a store of hundreds of index files does the same under `ulimit -n 256`, with readers beside its writer.

A mapping holds one descriptor, so files (commitlog, consume queue and index files alike) are mapped when
touched and let go past a budget of half the descriptor limit (storage/mapping_budget.py); running out
anyway is a StoreResourceError, not a bare OSError.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import pytest

from rocketstore import Message, MessageStore, StoreConfig, StoreResourceError
from rocketstore.storage import mapping_budget
from tests.conftest import REPO_ROOT

QUEUES = 10_000
LIMIT = 1024


def test_ten_thousand_queues_open_and_take_puts_under_1024_descriptors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tests.adversarial.fd_workload", str(tmp_path / "store"),
                           str(QUEUES), str(LIMIT)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["clean"] is True
    assert result["most_open"] < LIMIT * 3 // 4, result["most_open"]
    step = QUEUES // 50
    assert result["bodies"] == [[f"0-{n}", f"1-{n}"] for n in range(0, QUEUES, step)]
    assert result["last"] == f"1-{QUEUES - 1}"
    files = list((tmp_path / "store" / "consumequeue").glob("*/*/*"))
    assert len(files) == QUEUES


INDEX_MESSAGES = 6_000
INDEX_LIMIT = 256


def test_hundreds_of_index_files_take_puts_beside_readers_close_and_reopen_under_256_descriptors(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tests.adversarial.fd_workload", "index", str(tmp_path / "store"),
                           str(INDEX_MESSAGES), str(INDEX_LIMIT)], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["errors"] == 0, result["first_errors"]
    assert result["clean"] is True
    assert result["index_files"] > INDEX_LIMIT  # more index files than descriptors
    assert result["damaged"] == [] and result["missing"] == []
    assert result["most_open"] < INDEX_LIMIT * 3 // 4, result["most_open"]


def test_index_files_are_mapped_within_the_budget_and_answer_after_being_let_go(tmp_path, monkeypatch):
    monkeypatch.setattr(mapping_budget, "BUDGET", mapping_budget.MappingBudget(capacity=4))
    monkeypatch.setattr("rocketstore.storage.mapped_file.BUDGET", mapping_budget.BUDGET)
    monkeypatch.setattr("rocketstore.log.index_file.BUDGET", mapping_budget.BUDGET)
    cfg = StoreConfig(index_hash_slots=4, index_max_entries=4, deliver_delayed_messages=False)
    with MessageStore.open(tmp_path, cfg) as store:
        offsets = [store.put(Message("T", f"m{n}".encode(), keys=(f"k{n}",))).phy_offset for n in range(30)]
        assert [m.phy_offset for n in range(30) for m in store.query("T", f"k{n}")] == offsets
        assert len(store.index.files) == 10 and len(mapping_budget.BUDGET) <= 4
        assert sum(f.mapped for f in store.index.files) <= 4
    with MessageStore.open(tmp_path, cfg, read_only=True) as store:
        assert sum(f.mapped for f in store.index.files) == 0  # an open reads the headers only
        assert [m.phy_offset for n in range(30) for m in store.query("T", f"k{n}")] == offsets
        assert len(mapping_budget.BUDGET) <= 4


def test_running_out_of_descriptors_is_a_store_resource_error_naming_the_limit(tmp_path, monkeypatch):
    cfg = StoreConfig(consume_queue_file_entries=64, deliver_delayed_messages=False)
    with MessageStore.open(tmp_path, cfg) as store:
        store.put(Message("T", b"x"))
    real_open = os.open

    def no_descriptor(path, flags, *args):
        if "consumequeue" in str(path):
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, *args)

    monkeypatch.setattr(mapping_budget.os, "open", no_descriptor)
    with pytest.raises(StoreResourceError, match=r"no file descriptor left \(ulimit -n is \d+"):
        with MessageStore.open(tmp_path, cfg) as store:
            store.get("T", 0, 0)


def test_a_mapping_let_go_is_mapped_again_with_the_bytes_written_through_it(tmp_path, monkeypatch):
    monkeypatch.setattr(mapping_budget, "BUDGET", mapping_budget.MappingBudget(capacity=4))
    monkeypatch.setattr("rocketstore.storage.mapped_file.BUDGET", mapping_budget.BUDGET)
    cfg = StoreConfig(consume_queue_file_entries=64, deliver_delayed_messages=False)
    with MessageStore.open(tmp_path, cfg) as store:
        for n in range(40):
            store.put(Message(f"T{n}", f"m{n}".encode()))
        assert len(mapping_budget.BUDGET) <= 4
        assert [store.get(f"T{n}", 0, 0).messages[0].body for n in range(40)] == [f"m{n}".encode() for n in range(40)]
    with MessageStore.open(tmp_path, cfg) as store:
        assert store.recovery.clean
        assert [store.get(f"T{n}", 0, 0).messages[0].body for n in range(40)] == [f"m{n}".encode() for n in range(40)]
