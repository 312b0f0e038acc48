"""Replaying the golden puts through put() writes the bytes RocketMQ 4.9.8 wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message, MessageStore, PutStatus, StoreConfig
from tests.conftest import GOLDEN_DIR


def replay(root: Path, expected: dict[str, Any]) -> list:
    """Put every golden input with the recorded store timestamps; returns the PutResults."""
    config = StoreConfig.from_rocketmq(expected["store_config"])
    by_offset = {m["commitLogOffset"]: m for m in expected["messages_in_commitlog_order"]}
    puts = [p for p in expected["puts"] if p["put"]["putMessageStatus"] == "PUT_OK"]
    now = [0]
    results = []
    with MessageStore.open(root, config, clock=lambda: now[0]) as store:
        for p in puts:
            now[0] = p["put"]["storeTimestamp"]
            stored = by_offset[p["put"]["wroteOffset"]]
            message = Message(
                p["topic"], bytes.fromhex(stored["bodyHex"]), queue_id=p["queueId"],
                properties=dict(stored["properties"]), flag=p["flag"], sys_flag=p["sysFlagIn"],
                born_host=p["bornHost"], born_timestamp=p["bornTimestamp"],
                reconsume_times=p["reconsumeTimes"], prepared_transaction_offset=p["preparedTransactionOffset"])
            results.append((p["put"], store.put(message)))
    return results


@pytest.fixture(scope="module")
def replayed(tmp_path_factory, golden_expected):
    root = tmp_path_factory.mktemp("replay") / "store"
    results = replay(root, golden_expected)
    return root, results


def test_put_results_equal_rocketmq(replayed):
    _, results = replayed
    assert len(results) == 520
    for want, got in results:
        assert got.status is PutStatus.PUT_OK
        assert (got.phy_offset, got.size, got.msg_id, got.queue_offset, got.store_timestamp) == (
            want["wroteOffset"], want["wroteBytes"], want["msgId"], want["logicsOffset"], want["storeTimestamp"])


def _files(root: Path, folder: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted((root / folder).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("folder", ["commitlog", "consumequeue"])
def test_files_are_byte_identical(replayed, folder):
    root, _ = replayed
    ours = _files(root, folder)
    theirs = _files(GOLDEN_DIR / "store", folder)
    assert sorted(ours) == sorted(theirs)
    for name, data in theirs.items():
        assert ours[name] == data, name


def test_index_files_have_identical_content(replayed, golden_expected):
    root, _ = replayed
    ours = [p.read_bytes() for p in sorted((root / "index").iterdir())]
    theirs = [p.read_bytes() for p in sorted((GOLDEN_DIR / "store" / "index").iterdir())]
    assert len(ours) == len(theirs) == len(golden_expected["index_headers"])
    for a, b in zip(ours, theirs, strict=True):
        assert a == b


def test_replayed_store_reopens_and_answers_the_same(replayed, golden_expected):
    root, _ = replayed
    config = StoreConfig.from_rocketmq(golden_expected["store_config"])
    with MessageStore.open(root, config) as store:
        assert store.recovery.mode.value == "normal"
        assert store.max_phy_offset == golden_expected["commitlog"]["maxPhyOffset"]
        for case in golden_expected["queries"]["queryMessage"]:
            got = store.index_lookup(case["topic"], case["key"], max_count=case["maxNum"],
                                     begin_ms=case["begin"], end_ms=case["end"])
            assert got == [m["commitLogOffset"] for m in case["result"]["messages"]]
    # Reopening dispatched nothing twice: consume queues are still identical.
    assert _files(root, "consumequeue") == _files(GOLDEN_DIR / "store", "consumequeue")
