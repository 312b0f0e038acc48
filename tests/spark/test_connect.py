"""The data source, the writer, export and a streaming query from a Spark Connect client (a separate
process whose session is `remote("local[2]")`); rebuild, which needs RDDs, refuses Connect by name."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig

pytestmark = pytest.mark.spark

DRIVER = Path(__file__).with_name("connect_driver.py")
CFG = StoreConfig(commitlog_file_size=1 << 20, consume_queue_file_entries=64, index_hash_slots=64,
                  index_max_entries=256, deliver_delayed_messages=False)


def test_source_writer_export_and_stream_work_from_a_connect_client(tmp_path):
    store = tmp_path / "store"
    with MessageStore.open(store, CFG) as opened:
        for i in range(40):
            opened.put(Message(f"T{i % 2}", f"m{i}".encode(), queue_id=i % 3, tags=f"Tag{i % 2}", keys=(f"k{i}",)))
        expected = sorted([m.topic, m.queue_id, m.queue_offset, m.body.decode(), m.tags, m.keys]
                          for m in opened.scan())
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, str(DRIVER), str(store), str(tmp_path / "new"), str(tmp_path / "export"),
                           str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["session"].startswith("pyspark.sql.connect")
    assert result["read"] == expected
    assert result["export"] == sorted([row[0], row[2]] for row in expected)
    assert result["stream"] == len(expected)
    assert result["rebuild"].startswith("InvalidArgumentError: rebuild needs a classic Spark session")
    with MessageStore.open(tmp_path / "new", read_only=True) as written:
        assert sorted([m.topic, m.queue_id, m.body.decode(), m.tags, m.keys] for m in written.scan()) == \
            sorted([row[0], row[1], row[3], row[4], row[5]] for row in expected)
