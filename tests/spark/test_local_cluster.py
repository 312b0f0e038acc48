"""The data source, the writer, rebuild, export and a streaming query on separate executor processes
(`local-cluster[2,1,1024]`), checked against the store API in this process."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from rocketstore import MessageStore
from tests.spark.spark_helpers import sample_messages, small_config, small_options

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).with_name("cluster_driver.py")
WRITE_ROWS = 60


def _files(root: Path, sub: str) -> dict[str, bytes]:
    return {str(p.relative_to(root / sub)): p.read_bytes() for p in sorted((root / sub).rglob("*")) if p.is_file()}


def _digest(rows: Iterable[tuple[str, int, int, bytes]]) -> str:
    """The digest cluster_driver.py takes of (topic, queue id, queue offset, body) rows."""
    lines = sorted(f"{topic}\t{queue_id}\t{offset}\t{body.hex()}" for topic, queue_id, offset, body in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _rows(messages: list[Any]) -> list[tuple[str, int, int, bytes]]:
    return [(m.topic, m.queue_id, m.queue_offset, m.body) for m in messages]


def _queued(root: Path) -> list[Any]:
    with MessageStore.open(root, small_config(), read_only=True) as store:
        return [m for topic, queues in store.queues().items() for q in queues for m in store.iter_queue(topic, q)]


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory) -> tuple[Path, dict[str, Any]]:
    """Every job on one local cluster; returns the work folder and what the driver answered."""
    work = tmp_path_factory.mktemp("cluster")
    store = work / "store"
    with MessageStore.open(store, small_config()) as s:
        for m in sample_messages(300, topics=("TopicA", "TopicB", "TopicC"), queues=3):
            assert s.put(m).ok
    shutil.copytree(store, work / "rebuild-store")
    shutil.rmtree(work / "rebuild-store" / "consumequeue")
    shutil.rmtree(work / "rebuild-store" / "index")
    with MessageStore.open(work / "write-store", small_config()):
        pass
    spec = {"store": str(store), "options": small_options(), "write_store": str(work / "write-store"),
            "write_rows": WRITE_ROWS, "rebuild_store": str(work / "rebuild-store"),
            "export_out": str(work / "export"), "stream_out": str(work / "stream"),
            "stream_checkpoint": str(work / "stream-checkpoint")}
    (work / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.run([sys.executable, str(DRIVER), str(work / "spec.json"), str(work / "out.json")],
                          capture_output=True, text=True, timeout=600, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work, json.loads((work / "out.json").read_text())


def test_jobs_run_in_executor_processes_other_than_the_driver(cluster_run):
    _, out = cluster_run
    assert len(out["executor_pids"]) >= 2
    assert out["driver_pid"] not in out["executor_pids"]


def test_batch_read_on_separate_executors_returns_every_message_once(cluster_run):
    work, out = cluster_run
    messages = _queued(work / "store")
    assert out["read"] == {"count": len(messages), "digest": _digest(_rows(messages))}


def test_writer_on_separate_executors_appends_every_row_once(cluster_run):
    work, _ = cluster_run
    written = _queued(work / "write-store")
    assert sorted(m.body.decode() for m in written) == sorted(f"written-{i}" for i in range(WRITE_ROWS))
    assert all(m.keys == [m.body.decode().replace("written", "w")] for m in written)


def test_rebuild_on_separate_executors_writes_the_store_s_own_files(cluster_run):
    work, out = cluster_run
    assert _files(work / "rebuild-store", "consumequeue") == _files(work / "store", "consumequeue")
    ours = [p.read_bytes() for p in sorted((work / "store" / "index").iterdir())]
    assert [p.read_bytes() for p in sorted((work / "rebuild-store" / "index").iterdir())] == ours
    assert out["rebuild"]["queue_entries"] == len(_queued(work / "store"))


def test_export_and_stream_on_separate_executors_hold_every_message_once(cluster_run):
    import pyarrow.parquet as pq

    work, _ = cluster_run
    expected = _digest(_rows(_queued(work / "store")))
    for folder in ("export", "stream"):
        table = pq.read_table(work / folder).to_pydict()
        rows = zip(table["topic"], table["queueId"], table["queueOffset"], table["body"], strict=True)
        assert _digest(rows) == expected, folder
