"""`verify` beside a live writer process: a store an ASYNC writer fills at full speed, rolling commitlog,
consume-queue and index files, verifies clean every time, the entries written after verify read the
log's end counted as newer than the snapshot; and the same verify still finds queue entries damaged
below that end while the writer goes on (one of them pointing past the end, as the entries the writer
adds do)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from rocketstore import FlushMode, MessageStore, StoreConfig
from rocketstore.format.consume_queue import UNIT_SIZE
from rocketstore.report.verify import verify_store
from tests.cli.cliharness import run_cli
from tests.crash.workload import crash_config

WRITER = Path(__file__).resolve().parent.parent / "crash" / "writer.py"
VERIFY_FOR_S = 8.0
VERIFY_AT_LEAST = 5
"""Verifies beside the writer: for VERIFY_FOR_S and at least this many, however loaded the machine."""


def _start_writer(root: Path) -> subprocess.Popen[str]:
    writer = subprocess.Popen([sys.executable, str(WRITER), str(root), FlushMode.ASYNC.value, "0", "100000000", "put"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert writer.stdout is not None
    assert writer.stdout.readline() == "READY\n", writer.stderr.read() if writer.stderr else ""
    stdout = writer.stdout
    threading.Thread(target=lambda: all(stdout), daemon=True).start()  # drain its ACK lines: it never blocks
    return writer


def _files(directory: Path) -> int:
    return sum(1 for p in directory.rglob("*") if p.is_file())


def _flip_tags_code(path: Path, entry: int) -> None:
    """Flip a bit of the tags code of one consume-queue entry (its last 8 bytes)."""
    with open(path, "r+b") as fh:
        pos = entry * UNIT_SIZE + UNIT_SIZE - 1
        fh.seek(pos)
        byte = fh.read(1)[0]
        fh.seek(pos)
        fh.write(bytes([byte ^ 0x01]))


def _write_phy_offset(path: Path, entry: int, phy_offset: int) -> int:
    """Overwrite the physical offset (the first 8 bytes) of one consume-queue entry; the one it held."""
    with open(path, "r+b") as fh:
        fh.seek(entry * UNIT_SIZE)
        was = int.from_bytes(fh.read(8), "big")
        fh.seek(entry * UNIT_SIZE)
        fh.write(phy_offset.to_bytes(8, "big"))
    return was


def test_verify_beside_an_async_writer_reports_no_problem_and_still_finds_a_damaged_entry(tmp_path):
    config = crash_config(FlushMode.ASYNC)  # 16 KiB commitlog files, 40-entry queue files, 64-entry index files
    MessageStore.open(tmp_path, config).close()
    writer = _start_writer(tmp_path)
    try:
        runs = grew = newer = 0
        first_records = verify_store(tmp_path, config).records
        deadline = time.monotonic() + VERIFY_FOR_S
        while time.monotonic() < deadline or runs < VERIFY_AT_LEAST:
            result = verify_store(tmp_path, config)
            assert result.ok, (runs, result.snapshot_end, result.problems[:10])
            runs += 1
            grew += result.log_grew
            newer += result.newer > 0
        cli = run_cli("verify", tmp_path, "--json")  # the command, geometry from config/rocketstore.json
        assert cli.code == 0, (cli.err, cli.out[-2000:])
        document = cli.json()
        assert document["ok"] and document["problems"] == [] and document["records"] > 0
        assert writer.poll() is None, "the writer ran all along"
        assert grew > 0 and newer > 0, (runs, grew, newer)
        assert result.records > first_records + 1000, (first_records, result.records)  # written at full speed
        # files of every kind rolled over while verify ran
        assert _files(tmp_path / "commitlog") >= 5
        assert _files(tmp_path / "index") >= 3
        assert len(list((tmp_path / "consumequeue" / "CrashA" / "0").iterdir())) >= 3

        # the negative control: queue entries damaged below the log's end, the writer still writing: one
        # with a wrong tags code, one pointing far past the end (as an entry the writer adds would)
        rel, far = "consumequeue/CrashA/0/00000000000000000000", "consumequeue/CrashB/1/00000000000000000000"
        _flip_tags_code(tmp_path / rel, 3)
        lost = _write_phy_offset(tmp_path / far, 5, 1 << 50)  # its record is then in no consume queue
        size = config.commitlog_file_size
        record = (f"commitlog/{lost - lost % size:020d}", lost % size)
        damaged = verify_store(tmp_path, config)
        assert [(p.file, p.pos) for p in damaged.problems] == [(rel, 3 * UNIT_SIZE), (far, 5 * UNIT_SIZE), record], \
            damaged.problems
        assert "queue offset 3 -> record at" in damaged.problems[0].message
        assert "tags code" in damaged.problems[0].message
        assert damaged.problems[1].message == f"queue offset 5 points at {1 << 50}, past the end of the commitlog"
        assert damaged.problems[2].message == f"record at {lost} (CrashB/1 offset 5) is in no consume queue"
        cli = run_cli("verify", tmp_path)
        assert cli.code == 1, (cli.err, cli.out)
        assert rel in cli.out and far in cli.out and "3 problem(s) found" in cli.err
        assert writer.poll() is None
    finally:
        writer.kill()
        writer.wait()


def _keyed_store(root: Path) -> tuple[StoreConfig, Path]:
    """An ASYNC store of 20 messages with a key each, closed: its config and its newest index file."""
    from rocketstore import Message

    config = crash_config(FlushMode.ASYNC)
    with MessageStore.open(root, config) as store:
        for i in range(20):
            store.put(Message("TopicA", b"m%d" % i, keys=(f"k{i}",)))
    return config, sorted(p for p in (root / "index").iterdir() if p.name.isdigit())[-1]


def _index_count(path: Path, delta: int) -> int:
    """Add `delta` to the indexCount of the index file at `path`; the count it held."""
    from rocketstore.format.index import HEADER_LAYOUT

    at = HEADER_LAYOUT.position("indexCount")
    with open(path, "r+b") as fh:
        fh.seek(at)
        was = int.from_bytes(fh.read(4), "big")
        fh.seek(at)
        fh.write((was + delta).to_bytes(4, "big"))
    return was


def test_a_key_the_dispatch_adds_to_the_newest_index_file_while_verify_reads_it_is_no_problem(tmp_path, monkeypatch):
    """An ASYNC writer's dispatch adds index keys for records below the log's end while the log does not
    grow: verify's check of the index files' chains may read the newest file between an entry and the
    header's count. Read again after a pause, the finding is gone; a count that stays behind its entries
    is still reported."""
    import rocketstore.report.verify as verify_module

    config, newest = _keyed_store(tmp_path)
    count_at_close = _index_count(newest, 0)
    real_index_file, real_sleep = verify_module.IndexFile, time.sleep

    def mid_put(path: Path, *args: object, **kwargs: object) -> object:
        if path == newest and sys._getframe(1).f_code.co_name == "_index_damage" \
                and _index_count(newest, 0) == count_at_close and not mid_put.done:  # type: ignore[attr-defined]
            _index_count(newest, -1)  # the writer wrote its last entry, not yet the header's count
            mid_put.done = True  # type: ignore[attr-defined]
        return real_index_file(path, *args, **kwargs)

    def header_written_meanwhile(seconds: float) -> None:
        if sys._getframe(1).f_code.co_name == "index_chains" and _index_count(newest, 0) < count_at_close:
            _index_count(newest, +1)
        real_sleep(0)

    mid_put.done = False  # type: ignore[attr-defined]
    monkeypatch.setattr(verify_module, "IndexFile", mid_put)
    monkeypatch.setattr(verify_module.time, "sleep", header_written_meanwhile)
    result = verify_store(tmp_path, config)
    assert mid_put.done and result.ok, result.problems  # type: ignore[attr-defined]
    monkeypatch.setattr(verify_module.time, "sleep", lambda seconds: real_sleep(0))
    _index_count(newest, -1)  # and now it stays behind
    result = verify_store(tmp_path, config)
    assert f"entry {count_at_close - 1} is written past indexCount" in [p.message for p in result.problems], \
        result.problems


def test_a_slot_the_dispatch_points_at_an_entry_the_header_does_not_count_yet_is_no_problem(tmp_path, monkeypatch):
    """A dispatch writes a batch's index entries and slots, then the header's count: verify's check of an
    index file's slots may find a slot pointing at an entry past the count it read. Read against the count
    again after a pause, the slot is fine; a count that stays behind the slot is still reported."""
    import rocketstore.report.verify as verify_module

    config, newest = _keyed_store(tmp_path)
    count_at_close = _index_count(newest, 0)
    real_sleep = time.sleep
    pauses: list[str] = []

    def header_written_meanwhile(seconds: float) -> None:
        pauses.append(sys._getframe(1).f_code.co_name)
        if pauses[-1] == "_check_index_file" and _index_count(newest, 0) < count_at_close:
            _index_count(newest, +1)
        real_sleep(0)

    _index_count(newest, -1)  # the last entry and its slot are written, not yet the header's count
    monkeypatch.setattr(verify_module.time, "sleep", header_written_meanwhile)
    result = verify_store(tmp_path, config)
    assert "_check_index_file" in pauses and result.ok, result.problems
    assert _index_count(newest, 0) == count_at_close

    monkeypatch.setattr(verify_module.time, "sleep", lambda seconds: real_sleep(0))
    _index_count(newest, -1)  # and now it stays behind
    result = verify_store(tmp_path, config)
    messages = [p.message for p in result.problems if p.file == f"index/{newest.name}"]
    assert any(m.endswith(f"points at entry {count_at_close - 1}, outside [1, {count_at_close - 1})")
               for m in messages), result.problems
