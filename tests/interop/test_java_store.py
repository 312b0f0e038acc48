"""rocketstore and the real RocketMQ 4.9.8 store (java-reference) open each other's stores and answer alike.

Every test runs the Java `DefaultMessageStore` in a subprocess (a few seconds each) on a store directory
written here, or writes with it and reads here. They skip with a one-line reason where the reference or
Java 17 is absent; CI has both.
"""

from __future__ import annotations

import hashlib
import ipaddress
import itertools
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rocketstore import Message, MessageStore, StoreConfig, StoredMessage
from rocketstore.format.sysflag import TransactionType
from rocketstore.report.verify import verify_store
from rocketstore.services.recovery import RecoveryMode
from tests.conftest import GOLDEN_GEOMETRY
from tests.interop import java_reference

pytestmark = pytest.mark.skipif(java_reference.missing_reason() is not None,
                                reason=java_reference.missing_reason() or "")

TOPICS = ("TopicA", "TopicB", "Topic_C-1")
BASE_MS = 1_764_000_000_000
DELAYED_LEVEL = 2  # 5 s


def _clock() -> Callable[[], int]:
    ticks = itertools.count(BASE_MS, 3)
    return lambda: next(ticks)


def _config() -> StoreConfig:
    # delayed messages are delivered by the test's own deliver_delayed: the background pass would read the
    # shared counting clock too, which every call of any service moves on
    return StoreConfig(**GOLDEN_GEOMETRY, schedule_interval_ms=3_600_000)


def _message(i: int) -> Message:
    """Message i of the mixed workload: three topics, TopicA queue 0 the busiest (its queue rolls over),
    unicode keys and property values, IPv6 and IPv4 born hosts, bodies of 1 to 1,200 bytes."""
    topic = TOPICS[i % 3] if i % 2 else "TopicA"
    queue_id = 0 if topic == "TopicA" and i % 4 == 0 else i % 4
    born_host = f"[2001:db8::{i % 50 + 1:x}]:{40000 + i}" if i % 3 == 0 else f"10.1.{i % 7}.{i % 200}:{30000 + i}"
    body = bytes((i + k) % 251 for k in range(1 + (i * 37) % 1200))
    return Message(topic, body, queue_id=queue_id, tags=None if i % 5 == 0 else f"Tag{i % 3}",
                   keys=(f"key-{i}", f"ключ-{i % 11}", f"🚀-{i % 7}"),
                   properties={"prop-é": f"v{i}-中文", "seq": str(i)},
                   born_host=born_host, flag=i, reconsume_times=i % 3)


def write_mixed_store(root: Path) -> None:
    """A store written here with records of every kind the Java store must read: ~720 records over
    several commitlog, consume-queue and index files; delayed records parked and delivered, and parked
    still; a transaction's half, commit and rollback records."""
    with MessageStore.open(root, _config(), clock=_clock()) as store:
        for i in range(600):
            store.put(_message(i))
        for i in range(10):
            store.put(Message("TopicB", b"later %d" % i, queue_id=i % 4, keys=(f"delayed-{i}",),
                              properties={"DELAY": str(DELAYED_LEVEL)}))
        assert store.deliver_delayed(BASE_MS + 3_600_000) == 10
        for i in range(5):
            store.put(Message("TopicB", b"parked %d" % i, keys=(f"parked-{i}",),
                              properties={"DELAY": str(DELAYED_LEVEL + 1)}))
        half = store.put(Message("TopicT", b"half", keys=("tx-1",), sys_flag=TransactionType.PREPARED,
                                 properties={"TRAN_MSG": "true", "PGROUP": "pg"}))
        store.put(Message("TopicT", b"half", keys=("tx-1",), sys_flag=TransactionType.COMMIT,
                          prepared_transaction_offset=half.phy_offset, properties={"PGROUP": "pg"}))
        store.put(Message("TopicT", b"half 2", keys=("tx-2",), sys_flag=TransactionType.ROLLBACK,
                          prepared_transaction_offset=half.phy_offset, properties={"PGROUP": "pg"}))
        for i in range(600, 720):
            store.put(_message(i))


def _host(text: str) -> tuple[ipaddress.IPv4Address | ipaddress.IPv6Address, int]:
    ip, _, port = text.rpartition(":")
    return ipaddress.ip_address(ip.strip("[]")), int(port)


def _ours(m: StoredMessage, tags_code: int | None = None) -> dict[str, Any]:
    """A record as the harness prints it (Harness.msgJson)."""
    fields: dict[str, Any] = {
        "topic": m.topic, "queueId": m.queue_id, "queueOffset": m.queue_offset, "commitLogOffset": m.phy_offset,
        "storeSize": m.size, "bodyCRC": m.body_crc, "flag": m.flag, "sysFlag": m.sys_flag,
        "bornTimestamp": m.born_timestamp, "storeTimestamp": m.store_timestamp, "bornHost": _host(m.born_host),
        "storeHost": _host(m.store_host), "reconsumeTimes": m.reconsume_times,
        "preparedTransactionOffset": m.prepared_transaction_offset, "msgId": m.msg_id, "bodyHex": m.body.hex(),
        "properties": dict(sorted(m.properties.items())), "rawSha256": hashlib.sha256(m.raw).hexdigest(),
    }
    if tags_code is not None:
        fields["tagsCode"] = tags_code
    return fields


def _theirs(m: dict[str, Any]) -> dict[str, Any]:
    return dict(m, bornHost=_host(m["bornHost"]), storeHost=_host(m["storeHost"]))


def _probes(store: MessageStore) -> list[str]:
    """A byOffset probe for every record and a query probe for keys of every kind."""
    records = list(store.scan())
    lines = [f"P\t{m.phy_offset}" for m in records]
    keys = {(m.topic, k) for m in records[::7] for k in m.keys} | {(m.topic, m.uniq_key) for m in records[::29]
                                                                   if m.uniq_key}
    first, last = records[0].store_timestamp, records[-1].store_timestamp
    for topic, key in sorted(keys):
        lines.append(f"Q\t{topic}\t{key}\t64\t0\t{2**63 - 1}")
        lines.append(f"Q\t{topic}\t{key}\t3\t{first}\t{(first + last) // 2}")
    return lines


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mixed") / "store"
    write_mixed_store(root)
    return root


def _copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    return dest


def test_the_workload_rolls_over_every_file_kind(mixed_store):
    assert len(list((mixed_store / "commitlog").iterdir())) >= 4
    assert len(list((mixed_store / "consumequeue" / "TopicA" / "0").iterdir())) >= 2
    assert len(list((mixed_store / "index").iterdir())) >= 2


def test_java_reads_a_store_written_here_as_rocketstore_does(mixed_store, tmp_path):
    store_dir = _copy(mixed_store, tmp_path / "store")
    with MessageStore.open(store_dir, _config(), read_only=True) as store:
        probes = _probes(store)
        java = java_reference.read(store_dir, tmp_path, probes)
        assert java["lastExitOK"] is True
        assert (java["minPhyOffset"], java["maxPhyOffset"]) == (store.min_phy_offset, store.max_phy_offset)
        assert java["dispatchBehindBytes"] == 0
        # Java's schedule service makes an empty queue object for each of the 18 delay levels on load;
        # the queues with entries are the ones on disk.
        java_queues = {t: {int(n): q for n, q in qs.items() if q["max"] > 0} for t, qs in java["queues"].items()}
        assert {t: sorted(qs) for t, qs in java_queues.items()} == \
            {t: sorted(qs) for t, qs in store.queues().items()}
        assert "SCHEDULE_TOPIC_XXXX" in java_queues
        for topic, queues in java_queues.items():
            for qid, q in queues.items():
                assert (q["min"], q["max"]) == (store.min_offset(topic, qid), store.max_offset(topic, qid))
                units = list(store.queue_entries(topic, qid))
                assert q["entries"] == [[store.min_offset(topic, qid) + n, u.phy_offset, u.size, u.tags_code]
                                        for n, u in enumerate(units)], (topic, qid)
                tags = {e[0]: e[3] for e in q["entries"]}
                ours = [_ours(m, tags[m.queue_offset]) for m in store.iter_queue(topic, qid)]
                assert [_theirs(m) for m in q["messages"]] == ours, (topic, qid)
        for phy, m in java["byOffset"].items():
            assert _theirs(m) == _ours(store.message_at(int(phy))), phy
        assert len(java["byOffset"]) == len(list(store.scan()))
        assert java["queries"]
        for case in java["queries"]:
            ours_offsets = store.index_lookup(case["topic"], case["key"], max_count=case["maxNum"],
                                              begin_ms=case["begin"], end_ms=case["end"])
            assert ours_offsets == case["offsets"], case


def test_java_rebuilds_byte_identical_queues_and_index_from_our_commitlog(mixed_store, tmp_path):
    store_dir = _copy(mixed_store, tmp_path / "store")
    shutil.rmtree(store_dir / "consumequeue")
    shutil.rmtree(store_dir / "index")
    java_reference.read(store_dir, tmp_path, opts=["-DwaitMs=500"])

    def files(root: Path, folder: str) -> dict[str, bytes]:
        return {p.relative_to(root).as_posix(): p.read_bytes()
                for p in sorted((root / folder).rglob("*")) if p.is_file()}

    assert files(store_dir, "consumequeue") == files(mixed_store, "consumequeue")
    # Index files are named by their creation time; their content must be identical, file for file.
    theirs = [data for _, data in sorted(files(store_dir, "index").items())]
    ours = [data for _, data in sorted(files(mixed_store, "index").items())]
    assert len(theirs) == len(ours)
    for n, (a, b) in enumerate(zip(theirs, ours, strict=True)):
        assert a == b, f"index file {n} differs"


def test_java_appends_to_our_store_and_we_read_every_message_back(mixed_store, tmp_path):
    store_dir = _copy(mixed_store, tmp_path / "store")
    with MessageStore.open(store_dir, _config(), read_only=True) as store:
        end_before = store.max_phy_offset
    java = java_reference.write(store_dir, 150, "jv", tmp_path)
    puts = java["puts"]
    assert java["lastExitOK"] is True and all(p["status"] == "PUT_OK" for p in puts)
    assert puts[0]["wroteOffset"] == end_before
    with MessageStore.open(store_dir, _config()) as store:
        assert store.recovery.clean
        for put in puts:
            m = store.message_by_id(put["msgId"])
            assert (m.phy_offset, m.size, m.topic, m.queue_id, m.queue_offset, m.store_timestamp) == (
                put["wroteOffset"], put["wroteBytes"], put["topic"], put["queueId"], put["logicsOffset"],
                put["storeTimestamp"])
            assert m.keys == put["keys"].split(" ") and m.uniq_key == put["uniqKey"] and m.tags == put["tags"]
            assert m.properties["jprop"].endswith("-é中")
            got = store.get(put["topic"], put["queueId"], put["logicsOffset"], 1)
            assert [g.phy_offset for g in got.messages] == [put["wroteOffset"]]
            assert put["wroteOffset"] in {q.phy_offset for q in store.query(put["topic"], f"jv-{puts.index(put)}")}
        last_end = puts[-1]["wroteOffset"] + puts[-1]["wroteBytes"]
        assert store.max_phy_offset == last_end
        after = store.put(Message("TopicA", b"after java", keys=("after",)))
        assert after.phy_offset in (last_end, -(-last_end // _config().commitlog_file_size)
                                    * _config().commitlog_file_size)
    result = verify_store(store_dir, _config())
    assert result.ok, result.to_dict()


def test_a_store_java_wrote_and_crashed_recovers_here_to_javas_end(tmp_path):
    crashed = tmp_path / "crashed"
    write_mixed_store(crashed)
    java = java_reference.write(crashed, 200, "cr", tmp_path, opts=["-Dcrash=true", "-DcrashWaitMs=500"])
    assert (crashed / "abort").exists(), "the harness halted without shutdown"
    last = java["puts"][-1]
    theirs_dir = _copy(crashed, tmp_path / "java-copy")
    ours_dir = _copy(crashed, tmp_path / "ours-copy")
    java_after = java_reference.read(theirs_dir, tmp_path)
    with MessageStore.open(ours_dir, _config(), read_only=True) as reader:
        read_only_end = reader.max_phy_offset
    assert java_after["lastExitOK"] is False
    # (the Java master may have delivered a due delayed record after its last put)
    assert java_after["maxPhyOffset"] >= last["wroteOffset"] + last["wroteBytes"]
    with MessageStore.open(ours_dir, _config()) as store:
        assert store.recovery.mode is RecoveryMode.ABNORMAL
        assert store.max_phy_offset == java_after["maxPhyOffset"] == read_only_end
        for topic, queues in java_after["queues"].items():
            for qid_text, q in queues.items():
                assert (store.min_offset(topic, int(qid_text)), store.max_offset(topic, int(qid_text))) == (
                    q["min"], q["max"]), (topic, qid_text)
        for put in java["puts"]:
            assert store.message_by_id(put["msgId"]).queue_offset == put["logicsOffset"]
