"""Spark beside live brokers: the stores of several `rocketstore serve` processes read as one, and a
streaming query over a store the broker is writing, killed with SIGKILL and restarted from its checkpoint,
holding every sent message exactly once. The real RocketMQ client (PyPI `rocketmq` 0.4.4) sends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.broker.broker_support import BrokerProcess, RealClient, client_venv_python, create_store, finish

pytestmark = [pytest.mark.spark, pytest.mark.broker]

DRIVER = Path(__file__).with_name("stream_driver.py")
TOPIC = "LiveTopic"


@pytest.fixture(scope="module")
def client(tmp_path_factory) -> RealClient:
    return RealClient(client_venv_python(), tmp_path_factory.mktemp("client-home"))


def _sent_keys(lines: list[dict]) -> list[str]:
    sent = [line["key"] for line in lines if "status" in line]
    assert len(sent) == len([line for line in lines if "key" in line]), "a send failed"
    return sent


def _serve_and_send(root: Path, client: RealClient, prefix: str, count: int) -> list[str]:
    """Start a broker on a new store under `root`, send `count` messages through it, stop it."""
    broker = BrokerProcess(create_store(root / "store"), root / "broker.log").start()
    try:
        return _sent_keys(client.run("produce", "--namesrv", broker.namesrv, "--topic", TOPIC, "--count",
                                     str(count), "--key-prefix", prefix, timeout=120))
    finally:
        assert broker.stop() == 0, broker.log()


def _driver(store: str, work: Path, *extra: str) -> subprocess.Popen[bytes]:
    log = open(work / "driver.log", "ab")
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    proc = subprocess.Popen([sys.executable, str(DRIVER), store, str(work / "out"), str(work / "checkpoint"),
                             str(work / "stop"), *extra], stdout=log, stderr=subprocess.STDOUT, env=env)
    log.close()
    return proc


def _output_keys(spark, out: Path) -> Counter[str]:
    """Keys of the rows in the Parquet sink's output (Spark's reader follows the sink's commit log, so
    files of an attempt killed before its commit are not read)."""
    rows = spark.read.parquet(str(out)).select("keys").collect()
    return Counter(key for row in rows for key in row.keys)


def test_three_brokers_read_as_one_and_a_stream_resumes_when_a_fourth_appears(spark, client, tmp_path):
    brokers = tmp_path / "brokers"
    sent = {f"b{n}": _serve_and_send(brokers / f"b{n}", client, f"b{n}-", 25) for n in range(3)}
    pattern = str(brokers / "*" / "store")

    df = spark.read.format("rocketstore").option("topics", TOPIC).load(pattern)
    by_broker = {row.broker: row.n for row in df.groupBy("broker").count().withColumnRenamed("count", "n")
                 .collect()}
    assert by_broker == {str(brokers / name / "store"): 25 for name in sent}
    keys = Counter(k for row in df.select("keys").collect() for k in row.keys)
    assert keys == Counter(k for ks in sent.values() for k in ks)

    work = tmp_path / "stream"
    work.mkdir()
    assert _driver(pattern, work, "--available-now").wait(300) == 0, (work / "driver.log").read_text()[-3000:]
    assert _output_keys(spark, work / "out") == keys
    sent["b3"] = _serve_and_send(brokers / "b3", client, "b3-", 25)
    assert _driver(pattern, work, "--available-now").wait(300) == 0, (work / "driver.log").read_text()[-3000:]
    assert _output_keys(spark, work / "out") == Counter(k for ks in sent.values() for k in ks)


def _committed_batches(checkpoint: Path) -> int:
    commits = checkpoint / "commits"
    return len([p for p in commits.iterdir() if p.name.isdigit()]) if commits.is_dir() else 0


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


def test_a_stream_over_a_live_broker_killed_and_restarted_holds_every_sent_message_once(spark, client, tmp_path):
    store = create_store(tmp_path / "store")
    broker = BrokerProcess(store, tmp_path / "broker.log").start()
    work = tmp_path / "stream"
    work.mkdir()
    try:
        first = client.start("produce", "--namesrv", broker.namesrv, "--topic", TOPIC, "--count", "1000",
                             "--key-prefix", "a-")
        driver = _driver(str(store), work)
        _wait_for(lambda: _committed_batches(work / "checkpoint") >= 1 or driver.poll() is not None, 240,
                  "a committed micro-batch")
        second = client.start("produce", "--namesrv", broker.namesrv, "--topic", TOPIC, "--count", "2000",
                              "--key-prefix", "b-")
        _wait_for(lambda: second.out.exists() and second.out.read_bytes().count(b"\n") >= 100, 120,
                  "the second producer's first sends")
        assert driver.poll() is None, (work / "driver.log").read_text()[-3000:]
        os.kill(driver.pid, signal.SIGKILL)  # in the middle: the broker is taking the second producer's sends
        driver.wait(30)
        assert second.poll() is None, "the kill should come while the producer sends"
        driver = _driver(str(store), work)
        sent = [k for p in (first, second) for k in _sent_keys(finish(p, 240))]
        (work / "stop").touch()
        assert driver.wait(300) == 0, (work / "driver.log").read_text()[-3000:]
    finally:
        assert broker.stop() == 0, broker.log()
    assert len(sent) == 3000
    assert _output_keys(spark, work / "out") == Counter(sent)
