"""A store records the delay levels it was written with (config/rocketstore.json), and `verify` computes
the delivery tags codes of its delayed records (SCHEDULE_TOPIC_XXXX) with them: a store written with
other than the default levels, through the API or by `serve --delay-levels`, verifies clean."""

from __future__ import annotations

import json
from pathlib import Path

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient
from rocketstore.report.verify import recorded_delay_levels, verify_store
from tests.broker.broker_support import FAST_DELAY_LEVELS, BrokerProcess, create_store

from .cliharness import run_cli

GEOMETRY = {"commitlog_file_size": 64 * 1024, "consume_queue_file_entries": 100, "index_hash_slots": 64,
            "index_max_entries": 256}
LEVELS = "2s 4s 6s"  # level 1 and 3 differ from the default 1s and 10s


def _recorded(root: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((root / "config" / "rocketstore.json").read_text(encoding="utf-8"))
    return data


def _write_delayed(root: Path, levels: str) -> None:
    config = StoreConfig(**GEOMETRY, delay_levels=levels, deliver_delayed_messages=False)
    with MessageStore.open(root, config) as store:
        assert store.put(Message("T", b"now", tags="A")).ok
        for level in (1, 3):
            parked = store.put(Message("T", b"later-%d" % level, tags="B", properties={"DELAY": str(level)}))
            assert parked.ok and parked.topic == SCHEDULE_TOPIC


def test_a_store_written_with_other_delay_levels_records_them_and_verifies_clean(tmp_path):
    root = tmp_path / "store"
    _write_delayed(root, LEVELS)
    assert _recorded(root)["delay_levels"] == LEVELS and recorded_delay_levels(root) == LEVELS
    assert verify_store(root, StoreConfig(**GEOMETRY)).ok  # the default levels given: the recorded ones win
    result = run_cli("verify", root, "--json")
    assert result.code == 0, (result.err, result.out)
    assert result.json()["ok"] is True

    # the control: with the default levels, the delivery tags codes of the parked records differ
    data = _recorded(root)
    del data["delay_levels"]
    (root / "config" / "rocketstore.json").write_text(json.dumps(data), encoding="utf-8")
    problems = verify_store(root, StoreConfig(**GEOMETRY)).problems
    assert len(problems) == 2 and all(p.file.startswith(f"consumequeue/{SCHEDULE_TOPIC}/") for p in problems)
    assert all("tags code" in p.message for p in problems), problems


def test_a_writable_open_records_the_levels_only_when_they_differ(tmp_path):
    root = tmp_path / "store"
    _write_delayed(root, LEVELS)
    path = root / "config" / "rocketstore.json"
    before = path.read_bytes()
    MessageStore.open(root, StoreConfig(**GEOMETRY, delay_levels=LEVELS)).close()
    assert path.read_bytes() == before, "the same levels: the record is left alone"
    MessageStore.open(root, StoreConfig(**GEOMETRY, delay_levels="2s 4s 6s 8s")).close()
    assert _recorded(root) == {**json.loads(before), "delay_levels": "2s 4s 6s 8s"}
    assert not path.with_name(path.name + ".tmp").exists()


def test_verify_after_serve_with_delay_levels_is_clean(tmp_path):
    store = create_store(tmp_path / "store")
    broker = BrokerProcess(store, tmp_path / "broker.log").start()  # serve ... --delay-levels "1s 1s ..."
    try:
        with RemotingClient(broker.addr, timeout_s=10) as client:
            fields = {"producerGroup": "P", "topic": "T", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
                      "queueId": 0, "sysFlag": 0, "bornTimestamp": 1_700_000_000_000, "flag": 0,
                      "properties": "TAGS\x01A\x02DELAY\x013", "reconsumeTimes": 0, "unitMode": "false"}
            reply = client.request(RequestCode.SEND_MESSAGE, fields, b"parked")
            assert reply.code == ResponseCode.SUCCESS, reply.remark
    finally:
        assert broker.stop() == 0, broker.log()
    assert recorded_delay_levels(store) == FAST_DELAY_LEVELS
    result = run_cli("verify", store, "--json")
    assert result.code == 0, (result.err, result.out)
    document = result.json()
    assert document["ok"] is True and document["records"] >= 1
    assert document["consume_queues"] >= 1 and document["cq_entries"] >= 1
