"""`serve` takes the store's settings as every other command does (`--config`, the geometry flags): a
store RocketMQ wrote with small files is served as it is, and the real client reads it."""

from __future__ import annotations

import json

import pytest

from tests.broker.broker_support import BrokerProcess
from tests.cli.cliharness import assert_one_line_error, run_cli, tree_digest
from tests.conftest import GOLDEN_GEOMETRY, copy_golden_store

pytestmark = pytest.mark.broker

FLAGS = [f"--{name.replace('_', '-')}" if i % 2 == 0 else str(value)
         for name, value in GOLDEN_GEOMETRY.items() if name != "store_host" for i in (0, 1)]


def test_serve_with_geometry_flags_serves_a_store_rocketmq_wrote(tmp_path, real_client, golden_expected):
    store = copy_golden_store(tmp_path / "golden")
    before = tree_digest(store)
    refused = run_cli("serve", store, "--grpc", "off", "--listen", "127.0.0.1:0", "--namesrv", "off")
    line = assert_one_line_error(refused)
    assert "give --commitlog-file-size 65536 --consume-queue-file-entries 100" in line, line
    assert tree_digest(store) == before, "a refused serve moved or recorded nothing (the index stays in place)"
    broker = BrokerProcess(store, tmp_path / "broker.log", *FLAGS).start()
    try:
        pulled = [line for line in real_client.run("pull", "--namesrv", broker.namesrv, "--topic", "TopicA",
                                                   "--group", "GoldenReader") if "body" in line]
    finally:
        assert broker.stop() == 0, broker.log()
    want = sorted(m["bodyUtf8"] for m in golden_expected["messages_in_commitlog_order"] if m["topic"] == "TopicA")
    assert sorted(m["body"] for m in pulled) == want


def test_serve_reads_a_rocketstore_config_file(tmp_path):
    store = copy_golden_store(tmp_path / "golden")
    config = tmp_path / "store.json"
    config.write_text(json.dumps({"geometry": {k: v for k, v in GOLDEN_GEOMETRY.items() if k != "store_host"}}))
    broker = BrokerProcess(store, tmp_path / "broker.log", "--config", str(config)).start()
    assert broker.stop() == 0, broker.log()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"commitlog_file_size": 65536, "no_such_setting": 1}))
    refused = run_cli("serve", store, "--config", bad, "--grpc", "off")
    assert refused.code == 2 and "no_such_setting" in refused.err


def test_serve_refuses_a_flag_the_store_files_contradict_before_touching_them(tmp_path):
    store = copy_golden_store(tmp_path / "golden")
    before = tree_digest(store)
    flags = [("131072" if value == "65536" else value) for value in FLAGS]
    refused = run_cli("serve", store, *flags, "--grpc", "off", "--namesrv", "off", "--listen", "127.0.0.1:0")
    line = assert_one_line_error(refused)
    assert ("--commitlog-file-size 131072 does not match the geometry of the store's files: "
            "commitlog files of 65536 bytes") in line
    assert tree_digest(store) == before
