"""The writer and the streaming sink with option `broker`: rows sent through a live `rocketstore serve`
into the store it serves (whose lock the broker holds), exactly once across a driver killed with SIGKILL
in the middle of a micro-batch, and refusals that write nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.protocol.client import RemotingClient
from rocketstore.spark.broker_send import SINK_ROW_PROPERTY, log_end, sent_rows
from tests.broker.broker_support import SMALL_GEOMETRY, BrokerProcess, create_store, free_port
from tests.spark.spark_helpers import row_schema

pytestmark = [pytest.mark.spark, pytest.mark.broker]

DRIVER = Path(__file__).with_name("sink_driver.py")
ROW_SCHEMA = row_schema()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A store served by a live broker (which holds the store's lock)."""
    broker = BrokerProcess(create_store(tmp_path / "served"), tmp_path / "broker.log").start()
    try:
        yield broker
    finally:
        assert broker.stop() == 0, broker.log()


def _stored(root: Path, *topics: str) -> list[Any]:
    with MessageStore.open(root, read_only=True) as store:
        return [m for m in store.scan() if not topics or m.topic in topics]


def _rows(count: int) -> list[tuple[Any, ...]]:
    return [(f"Topic{i % 2}", f"payload-{i}", i % 3, f"Tag{i % 4}", [f"key-{i}", "all"], {"n": str(i)})
            for i in range(count)]


def _write(df: Any, broker: BrokerProcess, staging: Path, **options: str) -> None:
    (df.write.format("rocketstore").option("broker", broker.addr).option("stagingDir", str(staging))
     .options(**options).mode("append").save(str(broker.store)))


def test_batch_writer_sends_every_row_through_the_serving_broker(spark, served, tmp_path):
    df = spark.createDataFrame(_rows(600), ROW_SCHEMA).repartition(3)
    _write(df, served, tmp_path / "staging")
    plain = spark.createDataFrame([(f"plain-{i}",) for i in range(20)], "body string")
    _write(plain, served, tmp_path / "staging", topic="Plain")  # no queueId column: the broker picks

    written = _stored(served.store, "Topic0", "Topic1")
    by_n = {int(m.properties["n"]): m for m in written}
    assert len(written) == 600 and sorted(by_n) == list(range(600))
    for i, m in by_n.items():
        assert (m.topic, m.body, m.queue_id, m.tags, m.keys) == (
            f"Topic{i % 2}", f"payload-{i}".encode(), i % 3, f"Tag{i % 4}", [f"key-{i}", "all"])
        assert SINK_ROW_PROPERTY not in m.properties  # only the streaming sink tags its rows
    plain_rows = _stored(served.store, "Plain")
    assert sorted(m.body for m in plain_rows) == sorted(f"plain-{i}".encode() for i in range(20))
    assert {m.queue_id for m in plain_rows} <= set(range(4))
    assert not [p for p in (tmp_path / "staging").iterdir() if p.name.startswith("job-")]

    assert served.alive()
    with RemotingClient(served.addr, timeout_s=10) as client:  # the broker still serves, index included
        assert [m.properties["n"] for m in client.query_message("Topic1", "key-7")] == ["7"]
    read = spark.read.format("rocketstore").option("topics", "Topic0,Topic1").load(str(served.store))
    assert read.count() == 600


def test_bad_broker_address_and_refused_sends_fail_and_write_nothing(spark, served, tmp_path):
    staging = tmp_path / "staging"
    df = spark.createDataFrame(_rows(30), ROW_SCHEMA)
    nobody = f"127.0.0.1:{free_port()}"
    with pytest.raises(Exception, match=f"cannot connect to broker {nobody}"):
        (df.write.format("rocketstore").option("broker", nobody).option("stagingDir", str(staging))
         .mode("append").save(str(served.store)))
    with pytest.raises(Exception, match="Option 'broker'"):
        (df.write.format("rocketstore").option("broker", "localhost").option("stagingDir", str(staging))
         .mode("append").save(str(served.store)))
    with pytest.raises(Exception, match="Option 'stagingDir'"):
        df.write.format("rocketstore").option("broker", served.addr).mode("append").save(str(served.store))

    system = spark.createDataFrame([("SCHEDULE_TOPIC_XXXX", "x", 0, None, None, None)] + _rows(5), ROW_SCHEMA)
    with pytest.raises(Exception, match="SCHEDULE_TOPIC_XXXX.*NO_PERMISSION"):
        _write(system, served, staging)

    # A queue id past the topic's queues: the broker itself answers SYSTEM_ERROR before storing anything.
    out_of_range = spark.createDataFrame([("Wide", f"w-{i}", 99, None, None, None) for i in range(5)], ROW_SCHEMA)
    with pytest.raises(Exception, match=f"broker {served.addr} refused 5 messages of topic 'Wide' queue 99: "
                                        "SYSTEM_ERROR"):
        _write(out_of_range, served, staging)

    assert _stored(served.store) == []
    assert served.alive()


def _make_source(root: Path, count: int) -> Path:
    with MessageStore.open(root, StoreConfig(**SMALL_GEOMETRY)) as store:
        store.put_batch([Message("SinkTopic", f"row-{i}:".encode() + b"x" * 2000, queue_id=i % 4,
                                 tags=f"T{i % 3}", keys=(f"row-{i}",)) for i in range(count)])
    return root


def _start_driver(source: Path, work: Path, broker: BrokerProcess, per_trigger: int) -> subprocess.Popen[bytes]:
    log = open(work / "driver.log", "ab")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.Popen([sys.executable, str(DRIVER), str(source), str(broker.store), broker.addr,
                             str(work / "staging"), str(work / "checkpoint"), "--per-trigger", str(per_trigger)],
                            stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    log.close()
    return proc


def _progress(work: Path) -> dict[str, Any] | None:
    try:
        return json.loads((work / "staging" / "sparkSink-copy.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def test_stream_sink_through_a_broker_killed_mid_batch_writes_every_row_once(spark, served, tmp_path):
    count, per_trigger = 8000, 2000
    source = _make_source(tmp_path / "source", count)
    work = tmp_path / "work"
    work.mkdir()
    partial = None
    for _attempt in range(4):  # kill once some, not all, rows of a micro-batch (after the first) are stored
        driver = _start_driver(source, work, served, per_trigger)
        deadline = time.monotonic() + 120
        while driver.poll() is None and time.monotonic() < deadline:
            record = _progress(work)
            if (record is not None and record["state"] == "appending" and record["batchId"] >= 1
                    and log_end(str(served.store), ()) > record["startPhyOffset"]):
                os.killpg(driver.pid, signal.SIGKILL)
                break
            time.sleep(0.002)
        else:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
                pytest.fail("no micro-batch was being sent within 120 s:\n"
                            + (work / "driver.log").read_text()[-3000:])
        driver.wait(30)
        record = _progress(work)
        if record is not None and record["state"] == "appending":
            sent = sent_rows(str(served.store), (), record["startPhyOffset"], f"copy/{record['batchId']}/")
            if 0 < len(sent) < per_trigger:
                partial = len(sent)
                break
        if record is not None and record["batchId"] >= count // per_trigger - 1:
            break  # the query ended before a kill landed inside a batch
    assert partial is not None, "the kill never landed while a micro-batch was half sent"
    assert max(Counter(m.keys[0] for m in _stored(served.store, "SinkTopic")).values()) == 1

    driver = _start_driver(source, work, served, per_trigger)  # replays the half-sent batch, then the rest
    assert driver.wait(240) == 0, (work / "driver.log").read_text()[-3000:]
    stored = _stored(served.store, "SinkTopic")
    keys = Counter(m.keys[0] for m in stored)
    assert keys == Counter(f"row-{i}" for i in range(count))
    by_key = {m.keys[0]: m for m in stored}
    assert all(by_key[f"row-{i}"].queue_id == i % 4 and by_key[f"row-{i}"].tags == f"T{i % 3}"
               for i in range(count))
    assert _progress(work)["state"] == "committed"
    assert served.alive()


def test_a_sink_id_recording_another_store_in_the_staging_dir_is_refused(tmp_path):
    from rocketstore.spark.options import WriteOptions
    from rocketstore.spark.writer import load_progress, progress_path

    def opts(store: str) -> WriteOptions:
        return WriteOptions.parse({"path": str(tmp_path / store), "broker": "127.0.0.1:10911",
                                   "stagingDir": str(tmp_path / "staging"), "sinkId": "s1"})

    assert load_progress(opts("a")) is None
    os.makedirs(tmp_path / "staging")
    Path(progress_path(opts("a"))).write_text(json.dumps(
        {"store": str(tmp_path / "a"), "batchId": 3, "state": "committed", "startPhyOffset": 0}))
    assert load_progress(opts("a"))["batchId"] == 3
    with pytest.raises(ValueError, match="Option 'sinkId'.*give each query its own sinkId"):
        load_progress(opts("b"))
