"""rocketstore.testing.rocketmq_broker: starts a real broker, tells why it did not, and leaves neither
process nor directory behind, however the block ends."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient
from rocketstore.testing import BrokerError, ServeProcess, rocketmq_broker
from tests.testing.pytest_runs import processes_mentioning

pytestmark = pytest.mark.broker


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie, dead but not yet reaped by whoever adopted it, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _answers(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return False
    return True


def test_serves_every_protocol_then_stops_and_removes_its_store(tmp_path):
    with rocketmq_broker(["orders:2"], tmp_dir=tmp_path) as broker:
        assert broker.store_path.parent.parent == tmp_path
        assert (broker.store_path / "config").is_dir()
        assert all(_answers(a) for a in (broker.namesrv_addr, broker.broker_addr, broker.grpc_endpoint))
        with RemotingClient(broker.namesrv_addr) as client:  # the name server routes to the broker
            route = client.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "orders"})
        assert route.code == ResponseCode.SUCCESS
        assert broker.broker_addr.encode() in route.body
        assert "topic orders declared: 2 queues" in broker.log_tail()
        pid = broker.pid
        assert _alive(pid)
    assert not _alive(pid)
    assert list(tmp_path.iterdir()) == []
    assert not _answers(broker.broker_addr)


def test_without_grpc_there_is_no_grpc_endpoint(tmp_path):
    with rocketmq_broker(grpc=False, tmp_dir=tmp_path) as broker:
        assert broker.grpc_endpoint is None
        assert "--grpc off" in " ".join(processes_mentioning(str(broker.store_path)))
    assert list(tmp_path.iterdir()) == []


def test_a_broker_that_fails_to_start_is_reported_with_its_log(tmp_path):
    with pytest.raises(BrokerError) as failed:
        with rocketmq_broker(extra_args=["--max-frame-size", "12"], tmp_dir=tmp_path):
            pytest.fail("the block ran although the broker did not start")
    message = str(failed.value)
    assert "exited with 2 before it answered" in message
    assert "--max-frame-size" in message.split("--- broker log ---")[1]  # serve's own usage error
    assert list(tmp_path.iterdir()) == []
    assert processes_mentioning(str(tmp_path)) == []


def test_a_broker_that_does_not_answer_in_time_is_killed(tmp_path):
    with pytest.raises(BrokerError, match="did not answer on port"):  # no Python starts serving in 10 ms
        with rocketmq_broker(start_timeout=0.01, tmp_dir=tmp_path):
            pytest.fail("the block ran although the broker did not answer")
    assert list(tmp_path.iterdir()) == []
    assert processes_mentioning(str(tmp_path)) == []


def test_bad_arguments_start_nothing(tmp_path):
    with pytest.raises(ValueError, match="'orders:many'"):
        with rocketmq_broker(["orders:many"], tmp_dir=tmp_path):
            pytest.fail("the block ran with a bad topic spec")
    with pytest.raises(ValueError, match="declared twice: orders:4 and orders:4:FIFO"):
        with rocketmq_broker(["orders", "orders:4:FIFO"], tmp_dir=tmp_path):
            pytest.fail("the block ran with two specs of one topic")
    with pytest.raises(ValueError, match="--listen=127.0.0.1:10911 is chosen here"):
        with rocketmq_broker(extra_args=["--listen=127.0.0.1:10911"], tmp_dir=tmp_path):
            pytest.fail("the block ran with an address of its own")
    assert list(tmp_path.iterdir()) == []


def test_an_error_in_the_block_stops_the_broker_and_propagates(tmp_path):
    with pytest.raises(KeyError, match="from the block"):
        with rocketmq_broker(tmp_dir=tmp_path) as broker:
            pid = broker.pid
            raise KeyError("from the block")
    assert not _alive(pid)
    assert list(tmp_path.iterdir()) == []


def test_a_broker_that_ignores_sigterm_is_killed_and_reported(tmp_path):
    with pytest.raises(BrokerError, match="did not stop within 1 s of SIGTERM and was killed"):
        with rocketmq_broker(stop_timeout=1, tmp_dir=tmp_path) as broker:
            pid = broker.pid
            os.kill(pid, signal.SIGSTOP)  # a stopped process handles no SIGTERM; SIGKILL still ends it
    assert not _alive(pid)
    assert list(tmp_path.iterdir()) == []


def test_a_broker_that_died_in_the_block_is_reported(tmp_path):
    with pytest.raises(BrokerError, match=r"died \(exit code -9\) before it was stopped"):
        with rocketmq_broker(tmp_dir=tmp_path) as broker:
            os.kill(broker.pid, signal.SIGKILL)
            os.waitid(os.P_PID, broker.pid, os.WEXITED | os.WNOWAIT)  # dead, left for the manager to reap
    assert list(tmp_path.iterdir()) == []


def test_the_broker_dies_with_the_process_that_started_it(tmp_path):
    """A test run killed outright (kill -9) leaves no broker: the broker gets SIGTERM from the kernel."""
    script = tmp_path / "starter.py"
    script.write_text(
        "import os, sys\n"
        "from rocketstore.testing import rocketmq_broker\n"
        f"with rocketmq_broker(tmp_dir={str(tmp_path / 'stores')!r}) as broker:\n"
        "    print(broker.pid, flush=True)\n"
        "    os.kill(os.getpid(), 9)\n")
    (tmp_path / "stores").mkdir()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == -9, done.stderr
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid), "the broker outlived the process that started it"
    # nobody was left to remove its store: that is what a killed run leaves
    assert [p.name for p in (tmp_path / "stores").iterdir()] != []


@pytest.mark.parametrize("moment", ["first port", "every port", "every port + 20 ms"])
def test_sigterm_once_a_port_answers_is_a_clean_stop(tmp_path, moment):
    """Whatever port a client (or `rocketmq_broker`'s exit) sees answer first, SIGTERM from then on stops
    the broker cleanly: exit 0, the store closed, never the default action's death by signal."""
    serve = ServeProcess(tmp_path / "store", tmp_path / "broker.log")
    ports = {serve.broker_port, serve.namesrv_port, serve.grpc_port}
    with open(serve.log_path, "ab") as log:
        proc = subprocess.Popen(serve.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            answering = [port for port in ports if _answers(f"127.0.0.1:{port}")]
            if answering and (moment == "first port" or len(answering) == len(ports)):
                break
        assert proc.poll() is None, serve.log_tail()
        if moment.endswith("20 ms"):
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert code == 0, serve.log_tail()
    assert "broker stopped" in serve.log_tail()
    assert not (tmp_path / "store" / "abort").exists()
