"""`serve` applies RocketMQ's retention and says so: the settings in force at start, each file it deletes
with its reason and size; `serve --read-only` serves a copied store without writing or deleting anything."""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.broker.grpc.protos import pb
from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient, decode_records
from rocketstore.protocol.codes import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION
from rocketstore.services.cleanup import local_hour
from tests.broker.broker_support import BrokerProcess
from tests.broker.test_broker_requests import send
from tests.cli.cliharness import assert_one_line_error, run_cli, tree_digest
from tests.grpc.grpc_support import GrpcBroker, call
from tests.grpc.test_grpc_bad_input import _message, _receive

pytestmark = pytest.mark.broker

DAY_MS = 86_400_000
GEOMETRY = {"commitlog_file_size": 65_536, "consume_queue_file_entries": 64, "index_hash_slots": 64,
            "index_max_entries": 128}
TOPIC = "Old"
MESSAGES = 260  # about five commitlog files of 64 KiB, four consume-queue files a queue, three index files


def _old_store(path: Path, days: int = 5) -> Path:
    """A store whose every message was stored `days` ago (the copy of a store written then)."""
    start = int(time.time() * 1000) - days * DAY_MS
    ticks = iter(range(start, start + 10 * MESSAGES))
    with MessageStore.open(path, StoreConfig(**GEOMETRY), clock=lambda: next(ticks)) as store:
        for i in range(MESSAGES):
            store.put(Message(TOPIC, b"%04d" % i + b"x" * 1000, queue_id=i % 2, keys=[f"k{i}"]))
    return path


def _config(tmp_path: Path) -> Path:
    """The store's geometry with a retention pass every 0.3 s instead of 10 s."""
    config = tmp_path / "store.json"
    config.write_text(json.dumps({**GEOMETRY, "clean_interval_ms": 300}))
    return config


def _now_hours() -> str:
    """deleteWhen naming this hour and the next (a test crossing the hour still finds its hour), in the
    order the broker logs the hours it takes: sorted, so that at 23:00 they are "00;23"."""
    hour = local_hour(int(time.time() * 1000))
    return ";".join(f"{h:02d}" for h in sorted({hour, (hour + 1) % 24}))


def _wait_for(broker: BrokerProcess, text: str, timeout_s: float = 20) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        log = broker.log_path.read_text(errors="replace")
        if text in log:
            return log
        time.sleep(0.2)
    pytest.fail(f"{text!r} not in the broker log within {timeout_s} s:\n{broker.log()}")


def test_serve_logs_the_retention_in_force_and_every_file_it_deletes(tmp_path):
    store = _old_store(tmp_path / "store")
    before = {p.relative_to(store).as_posix(): p.stat().st_size for p in store.rglob("*")
              if p.is_file() and p.parent.name != "config"}
    hours = _now_hours()
    broker = BrokerProcess(store, tmp_path / "broker.log", "--config", str(_config(tmp_path)),
                           "--delete-when", hours, "--file-reserved-time", "100", "--disk-max-used-space-ratio",
                           "95", "--log-level", "info").start()
    try:
        _wait_for(broker, "retention deleted index file")
        with RemotingClient(broker.addr) as client:
            reply = client.request(RequestCode.GET_MIN_OFFSET, {"topic": TOPIC, "queueId": 0})
            assert int(reply.ext_fields["offset"]) > 0  # the queue lost its first messages
    finally:
        assert broker.stop() == 0, broker.log()
    log = broker.log_path.read_text(errors="replace")
    assert (f"retention: commitlog files whose newest message is older than fileReservedTime=100 h are deleted "
            f"at deleteWhen={hours} (local hour), or at any hour while the disk is more than "
            "diskMaxUsedSpaceRatio=95% used") in log
    gone = sorted(name for name in before if not (store / name).exists())
    commitlogs = [name for name in gone if name.startswith("commitlog/")]
    assert len(commitlogs) == 4 and any(name.startswith("consumequeue/") for name in gone)
    assert any(name.startswith("index/") for name in gone)
    lines = [line for line in log.splitlines() if "retention deleted" in line]
    assert len(lines) == len(gone), "\n".join(lines)
    for name in gone:
        (line,) = [line for line in lines if line.split(" (")[0].endswith(name)]
        assert " INFO rocketstore.services.cleanup: " in line and f"({before[name]} bytes)" in line
        if name.startswith("commitlog/"):
            assert "expired: newest message 120.0 h old, fileReservedTime 100 h, deleteWhen " + hours in line, line
        else:
            assert "is gone (commitlog min offset " in line, line
    assert "WARNING" not in log  # no deletion for disk pressure


def test_read_only_serves_a_copied_store_and_changes_nothing_on_disk(tmp_path, real_client):
    original = _old_store(tmp_path / "original")
    store = shutil.copytree(original, tmp_path / "copy")
    before = tree_digest(store)
    broker = GrpcBroker(store, tmp_path / "broker.log", "--read-only", "--config", str(_config(tmp_path)),
                        "--delete-when", _now_hours()).start()
    ep = broker.endpoint
    try:
        log = _wait_for(broker, "retention: off (the store is open read-only")
        pulled = [line for line in real_client.run("pull", "--namesrv", broker.namesrv, "--topic", TOPIC,
                                                   "--group", "Reader") if "body" in line]
        assert len(pulled) == MESSAGES
        with RemotingClient(broker.namesrv) as ns:
            route = json.loads(ns.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC}).body)
        assert route["queueDatas"][0]["perm"] == 4  # read: producers do not pick this broker
        with RemotingClient(broker.addr, timeout_s=10) as client:
            refused = send(client, TOPIC, b"new")
            assert (refused.code, "forbidden" in refused.remark) == (ResponseCode.NO_PERMISSION, True)
            back = client.request(RequestCode.CONSUMER_SEND_MSG_BACK, {"offset": 0, "group": "Reader",
                                                                        "delayLevel": 0, "originMsgId": "x"})
            assert back.code == ResponseCode.NO_PERMISSION
            created = client.request(RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": "New", "readQueueNums": 1,
                                                                           "writeQueueNums": 1, "perm": 6})
            assert created.code == ResponseCode.NO_PERMISSION
            offsets = {"consumerGroup": "Mem", "topic": TOPIC, "queueId": 1}
            assert client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**offsets, "commitOffset": 7}).code == 0
            pull = client.request(RequestCode.PULL_MESSAGE, {
                "consumerGroup": "Mem", "topic": TOPIC, "queueId": 0, "queueOffset": 0, "maxMsgNums": 4,
                "sysFlag": PULL_SUBSCRIPTION | PULL_COMMIT_OFFSET, "commitOffset": 3, "suspendTimeoutMillis": 0,
                "subscription": "*", "subVersion": 0})
            assert len(decode_records(pull.body)) == 4
            assert client.request(RequestCode.QUERY_CONSUMER_OFFSET, offsets).ext_fields["offset"] == "7"
            zero = client.request(RequestCode.QUERY_CONSUMER_OFFSET, {**offsets, "queueId": 0})
            assert zero.ext_fields["offset"] == "3"
            found = client.query_message(TOPIC, "k5")
            assert [m.body[:4] for m in found] == [b"0005"]
        sent = call(ep, "SendMessage", pb.SendMessageRequest(messages=[_message(TOPIC)]))
        assert sent.status.code == pb.Code.FORBIDDEN
        route_request = pb.QueryRouteRequest()
        route_request.topic.name = TOPIC
        assert {q.permission for q in call(ep, "QueryRoute", route_request).message_queues} == {pb.Permission.READ}
        received = [a.message for a in _receive(ep, "G5", TOPIC) if a.HasField("message")]
        assert len(received) == 4
        ack = pb.AckMessageRequest()
        ack.group.name, ack.topic.name = "G5", TOPIC
        ack.entries.add(message_id="m", receipt_handle=received[0].system_properties.receipt_handle)
        assert call(ep, "AckMessage", ack).status.code == pb.Code.OK
        forward = pb.ForwardMessageToDeadLetterQueueRequest(
            receipt_handle=received[1].system_properties.receipt_handle)
        forward.group.name, forward.topic.name = "G5", TOPIC
        assert call(ep, "ForwardMessageToDeadLetterQueue", forward).status.code == pb.Code.FORBIDDEN
        time.sleep(1)  # three retention passes' time
    finally:
        assert broker.stop() == 0, broker.log()
    log = broker.log_path.read_text(errors="replace")
    assert "retention deleted" not in log and "Traceback" not in log
    assert tree_digest(store) == before  # no file written, deleted or created (no lock, no abort file)


def test_read_only_refuses_what_would_write_before_opening(tmp_path):
    store = _old_store(tmp_path / "store")
    before = tree_digest(store)
    refused = run_cli("serve", store, "--read-only", "--topic", "New", "--grpc", "off")
    assert "cannot be given with --read-only" in assert_one_line_error(refused)
    assert tree_digest(store) == before
    missing = run_cli("serve", tmp_path / "nothing", "--read-only", "--grpc", "off")
    assert "no store at" in assert_one_line_error(missing)
    assert not (tmp_path / "nothing").exists()
    bad = run_cli("serve", store, "--delete-when", "25", "--grpc", "off")
    assert "--delete-when" in assert_one_line_error(bad)


def test_cleanup_logs_each_file_with_its_reason_and_a_warning_for_disk_pressure(tmp_path, caplog, monkeypatch):
    from rocketstore.storage import fs

    store_path = _old_store(tmp_path / "store")
    monkeypatch.setattr(fs, "disk_used_ratio", lambda path: 0.8)
    other_hour = (local_hour(int(time.time() * 1000)) + 12) % 24
    config = StoreConfig(**GEOMETRY, delete_when=f"{other_hour:02d}", clean_interval_ms=3_600_000,
                         disk_clean_forcibly_ratio=0.85, disk_full_ratio=0.9)
    with MessageStore.open(store_path, config) as store, caplog.at_level(logging.INFO, "rocketstore.services.cleanup"):
        report = store.clean_expired()
    assert len(report.commitlog_files_deleted) == 4
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [f"disk of {store_path} is 80.0% used, above diskMaxUsedSpaceRatio 75%: expired files go "
                        "at any hour"]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    for name in report.commitlog_files_deleted:
        (line,) = [m for m in infos if f"commitlog file {store_path / 'commitlog' / name} (65536 bytes)" in m]
        assert line.endswith("fileReservedTime 72 h; disk 80.0% used, above diskMaxUsedSpaceRatio 75%"), line
    caplog.clear()
    monkeypatch.setattr(fs, "disk_used_ratio", lambda path: 0.95)
    with MessageStore.open(store_path, config) as store, caplog.at_level(logging.INFO, "rocketstore.services.cleanup"):
        store.put(Message(TOPIC, b"y" * 60_000))  # a new file, so the last old one is no longer the newest
        report = store.clean_expired()
    messages = [r.getMessage() for r in caplog.records]
    assert any("above diskSpaceWarningLevelRatio 90%: puts are refused" in m for m in messages)
    assert any("above diskSpaceCleanForciblyRatio 85%: every file but the newest goes" in m for m in messages)
    forced = [m for m in messages if "retention deleted commitlog file" in m]
    assert forced and all("forced: disk 95.0% used" in m or "expired:" in m for m in forced), forced
    assert any("forced: disk 95.0% used" in m for m in forced)
