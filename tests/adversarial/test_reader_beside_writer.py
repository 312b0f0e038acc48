"""A read-only reader beside a live writer process, as `rocketstore` commands and Spark read a store a
broker is writing: every open sees a whole prefix of the log, every acknowledged message in it intact,
every queue entry pointing at its own record, and the reader never writes a byte."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from rocketstore import FlushMode, MessageStore
from tests.crash.workload import assert_intact, crash_config, parse_acks

WRITER = Path(__file__).resolve().parent.parent / "crash" / "writer.py"
READ_FOR_S = 6.0


def test_read_only_opens_beside_a_writer_see_whole_prefixes_with_every_acknowledged_message(tmp_path):
    config = crash_config(FlushMode.SYNC)
    MessageStore.open(tmp_path, config).close()
    writer = subprocess.Popen([sys.executable, str(WRITER), str(tmp_path), "SYNC_FLUSH", "0", "1000000", "put"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def pump() -> None:
        assert writer.stdout is not None
        for line in writer.stdout:
            lines.append(line)

    threading.Thread(target=pump, daemon=True).start()
    opens = checked = acks_checked = 0
    try:
        deadline = time.monotonic() + READ_FOR_S
        while time.monotonic() < deadline:
            acked = {a.seq: a for a in parse_acks("".join(list(lines)))}
            with MessageStore.open(tmp_path, config, read_only=True) as reader:
                end = reader.max_phy_offset
                seen = {}
                for msg in reader.scan():  # a whole prefix: every record decodes, CRC checked
                    seen[assert_intact(msg)] = msg
                assert all(seq in seen for seq, a in acked.items() if a.phy_offset + a.size <= end)
                for seq, ack in acked.items():
                    msg = seen.get(seq)
                    if msg is not None:
                        assert (msg.phy_offset, msg.queue_offset) == (ack.phy_offset, ack.queue_offset)
                        acks_checked += 1
                for topic, queue_ids in reader.queues().items():
                    for queue_id in queue_ids:
                        for n, unit in enumerate(reader.queue_entries(topic, queue_id)):
                            if unit.phy_offset + unit.size <= end:
                                record = reader.message_at(unit.phy_offset)
                                assert (record.topic, record.queue_id) == (topic, queue_id)
                                assert record.queue_offset == reader.min_offset(topic, queue_id) + n
                checked += len(seen)
            opens += 1
    finally:
        writer.kill()
        writer.wait()
    assert writer.returncode == -9, writer.stderr.read() if writer.stderr else ""
    assert opens >= 5 and checked > 0 and acks_checked > 0, (opens, checked, acks_checked)
    assert not (tmp_path / "quarantine").exists()
    assert len(parse_acks("".join(lines))) > 0
    assert os.path.exists(tmp_path / "abort"), "the writer's abort file is the writer's, untouched"
