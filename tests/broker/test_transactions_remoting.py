"""Transactions over remoting with the real Java client: RocketMQ 4.9.8's TransactionMQProducer (driven by
tests/broker/java/TxProducer.java, compiled here) against `rocketstore serve`, and the same run against
the Java broker to compare.

The plan CRUXNCRU sends eight messages: C commits, R rolls back, U and X are UNKNOWN until the broker's
CHECK_TRANSACTION_STATE, answered COMMIT (U) or ROLLBACK (X), and N stays UNKNOWN at every check. A
consumer must get exactly the committed ones (C, and U after its check), never the rolled-back ones, and
an open transaction must survive a restart of the broker and be committed by the producer's answer to
a check after it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore import MessageStore
from rocketstore.broker.transactions import PROGRESS_GROUP
from rocketstore.format.msgid import decode_msg_id
from rocketstore.format.sysflag import TRANSACTION_MASK, TransactionType
from rocketstore.format.topics import TRANS_HALF_TOPIC, TRANS_OP_TOPIC
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode
from rocketstore.protocol.bodies import BatchItem, encode_batch_body
from rocketstore.protocol.client import RemotingClient, decode_records
from tests.broker.broker_support import BrokerProcess, create_store
from tests.broker.differential import (
    JavaBroker,
    compile_driver,
    driver_command,
    mqadmin,
    require_java_broker,
    run_tool,
)

DRIVER = Path(__file__).parent / "java" / "TxProducer.java"
PLAN = "CRUXNCRU"
COMMITTED = sorted(f"tx-{i}" for i, letter in enumerate(PLAN) if letter in "CU")
CHECKED = {f"tx-{i}": answer for i, letter in enumerate(PLAN)
           for answer in ["COMMIT_MESSAGE" if letter == "U" else "ROLLBACK_MESSAGE"] if letter in "UX"}
OPEN = [f"tx-{i}" for i, letter in enumerate(PLAN) if letter == "N"]
FAST_CHECKS = ("--transaction-timeout", "1", "--transaction-check-interval", "1")
JAVA_FAST_CHECKS = ("transactionTimeOut=1000", "transactionCheckInterval=1000")
RUN_TIMEOUT_S = 120
# Properties whose values differ between two runs or two brokers by nature.
VARYING = {"UNIQ_KEY", "CONSUME_START_TIME", "MIN_OFFSET", "MAX_OFFSET"}
# What the Java broker's committed record carries that serve's does not: RocketMQ appends a copy of the
# half message at each check, counting the checks in it; serve counts them in memory (and sends the count
# with each check).
NOT_KEPT = {"TRANSACTION_CHECK_TIMES"}


@pytest.fixture(scope="module")
def classes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_java_broker()
    if shutil.which("javac") is None:
        pytest.skip("javac is not on PATH (the transaction driver is compiled at test time)")
    return compile_driver(DRIVER, tmp_path_factory.mktemp("txdriver"))


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def transact(classes: Path, namesrv: str, topic: str, plan: str, *options: str) -> list[dict[str, object]]:
    """Run TxProducer; its JSON lines (it must succeed)."""
    done = subprocess.run(driver_command(classes, "TxProducer", namesrv, topic, "TxGroup", plan, *options),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    lines = _lines(done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return lines


def consume(namesrv: str, topic: str, group: str, expect: int) -> list[dict[str, object]]:
    """The messages a push consumer of the client driver gets (it must get `expect`)."""
    out = run_tool("consumer", namesrv, topic, group, "--expect", str(expect), "--timeout", "60")
    assert f'"received":{expect}' in out, out
    return [line for line in _lines(out) if "body" in line]


def queue_total(namesrv: str, topic: str) -> int:
    """The sum of the max offsets of the topic's queues, as mqadmin topicStatus prints them."""
    out = mqadmin("topicStatus", "-n", namesrv, "-t", topic)
    rows = [line.split() for line in out.splitlines() if re.match(r"^broker-a\s+\d+\s+\d+\s+\d+", line)]
    assert rows, out
    return sum(int(row[3]) for row in rows)


def checks(lines: list[dict[str, object]]) -> dict[str, str]:
    """Message body -> the last answer the producer gave to a check of it."""
    return {str(line["check"]): str(line["answer"]) for line in lines if "check" in line}


def _sends(lines: list[dict[str, object]]) -> list[tuple[object, ...]]:
    return [(line["plan"], line["status"], line["local"]) for line in lines if "i" in line]


def test_the_java_transaction_producer_against_serve_and_across_a_restart(classes: Path, tmp_path: Path) -> None:
    store = create_store(tmp_path / "store")
    broker = BrokerProcess(store, tmp_path / "serve.log", *FAST_CHECKS).start()
    try:
        lines = transact(classes, broker.namesrv, "TxTopic", PLAN)
        assert _sends(lines) == [(letter, "SEND_OK", {"C": "COMMIT_MESSAGE", "R": "ROLLBACK_MESSAGE"}.get(
            letter, "UNKNOW")) for letter in PLAN], lines
        answered = checks(lines)
        assert {body: answered[body] for body in CHECKED} == CHECKED, lines
        assert all(answered.get(body) == "UNKNOW" for body in OPEN), lines
        counted = [line["properties"]["TRANSACTION_CHECK_TIMES"] for line in lines  # type: ignore[index]
                   if line.get("check") == OPEN[0]]
        assert counted == [str(n) for n in range(1, len(counted) + 1)], lines  # as RocketMQ's copies count
        got = consume(broker.namesrv, "TxTopic", "TxConsumer", len(COMMITTED))
        assert sorted(str(m["body"]) for m in got) == COMMITTED
        assert queue_total(broker.namesrv, "TxTopic") == len(COMMITTED), "a rolled-back message was delivered"
        assert broker.stop() == 0
        _assert_on_disk(store)

        broker = BrokerProcess(store, tmp_path / "serve.log", *FAST_CHECKS).start()
        after = transact(classes, broker.namesrv, "TxTopic", "", "--on-check", "COMMIT_MESSAGE", "--checks",
                         str(len(OPEN)))
        assert checks(after) == dict.fromkeys(OPEN, "COMMIT_MESSAGE"), after
        got = consume(broker.namesrv, "TxTopic", "TxConsumer", len(OPEN))
        assert sorted(str(m["body"]) for m in got) == OPEN
        assert queue_total(broker.namesrv, "TxTopic") == len(COMMITTED) + len(OPEN)
    finally:
        broker.stop()
    with MessageStore.open(store, read_only=True) as opened:
        assert opened.committed_offset(PROGRESS_GROUP, TRANS_HALF_TOPIC, 0) == len(PLAN)


def _assert_on_disk(store: Path) -> None:
    """RocketMQ's layout: every half message in RMQ_SYS_TRANS_HALF_TOPIC, an end record in
    RMQ_SYS_TRANS_OP_HALF_TOPIC for each one ended, the open one without; committed records of
    COMMIT type pointing at their half message."""
    with MessageStore.open(store, read_only=True) as opened:
        halves = list(opened.iter_queue(TRANS_HALF_TOPIC, 0))
        ends = sorted(int(record.body) for record in opened.iter_queue(TRANS_OP_TOPIC, 0))
        committed = [m for q in opened.queues()["TxTopic"] for m in opened.iter_queue("TxTopic", q)]
    assert [h.body.decode() for h in halves] == [f"tx-{i}" for i in range(len(PLAN))]
    assert all(h.sys_flag & TRANSACTION_MASK == TransactionType.NOT for h in halves)
    assert all(h.properties["TRAN_MSG"] == "true" and h.properties["PGROUP"] == "TxGroup" for h in halves)
    assert ends == [h.queue_offset for h in halves if h.body.decode() not in OPEN]
    by_offset = {h.phy_offset: h for h in halves}
    assert sorted(m.body.decode() for m in committed) == COMMITTED
    for record in committed:
        assert record.sys_flag & TRANSACTION_MASK == TransactionType.COMMIT
        assert by_offset[record.prepared_transaction_offset].body == record.body


@pytest.fixture(scope="module")
def java_broker(classes: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaBroker]:
    broker = JavaBroker(tmp_path_factory.mktemp("java-tx"), *JAVA_FAST_CHECKS).start()
    try:
        yield broker
    finally:
        broker.stop()


def _property_names(messages: list[dict[str, object]]) -> dict[str, list[str]]:
    return {str(m["body"]): sorted(set(m["properties"]) - VARYING - NOT_KEPT)  # type: ignore[call-overload]
            for m in messages}


def test_serve_answers_the_transaction_producer_as_the_java_broker(classes: Path, java_broker: JavaBroker,
                                                                     tmp_path: Path) -> None:
    """Differential: the same plan against both brokers gives the same sends, the same checks with the
    same answers, the same messages to a consumer with the same property names, and the check's message
    carries the same topic, queue and properties."""
    broker = BrokerProcess(create_store(tmp_path / "store"), tmp_path / "serve.log", *FAST_CHECKS).start()
    try:
        ours = transact(classes, broker.namesrv, "TxTopic", PLAN)
        ours_got = consume(broker.namesrv, "TxTopic", "TxConsumer", len(COMMITTED))
    finally:
        broker.stop()
    theirs = transact(classes, java_broker.namesrv, "TxTopic", PLAN)
    theirs_got = consume(java_broker.namesrv, "TxTopic", "TxConsumer", len(COMMITTED))
    assert _sends(ours) == _sends(theirs)
    assert {body: checks(ours)[body] for body in [*CHECKED, *OPEN]} == \
        {body: checks(theirs)[body] for body in [*CHECKED, *OPEN]}
    assert _property_names(ours_got) == _property_names(theirs_got), (ours_got, theirs_got)

    def first_checks(lines: list[dict[str, object]]) -> dict[str, tuple[object, ...]]:
        seen: dict[str, tuple[object, ...]] = {}
        for line in lines:
            if "check" in line:
                props = {k: v for k, v in line["properties"].items()  # type: ignore[attr-defined]
                         if k not in VARYING | {"WAIT", "REAL_QID"}}
                seen.setdefault(str(line["check"]), (line["topic"], props))
        return seen

    # left out: WAIT (the Java broker's check carries the copy it appends at each check, WAIT=false; serve
    # the half message as the producer sent it) and REAL_QID (the producer picks a queue at random)
    assert first_checks(ours) == first_checks(theirs)


def _half(client: RemotingClient, body: bytes, group: str = "G1") -> RemotingCommand:
    props = f"TAGS\x01TagT\x02TRAN_MSG\x01true\x02PGROUP\x01{group}\x02UNIQ_KEY\x01U-{body.decode()}"
    return client.request(RequestCode.SEND_MESSAGE, {
        "producerGroup": group, "topic": "TxRaw", "defaultTopic": "TBW102", "defaultTopicQueueNums": 4,
        "queueId": 1, "sysFlag": 4, "bornTimestamp": 1, "flag": 0, "properties": props, "reconsumeTimes": 0}, body)


def _end(client: RemotingClient, sent: RemotingCommand, kind: int, group: str = "G1") -> RemotingCommand:
    _, phy_offset = decode_msg_id(sent.ext_fields["msgId"])
    return client.request(RequestCode.END_TRANSACTION, {
        "producerGroup": group, "tranStateTableOffset": sent.ext_fields["queueOffset"],
        "commitLogOffset": phy_offset, "commitOrRollback": kind, "fromTransactionCheck": "false",
        "msgId": "ignored"})


def test_end_transaction_names_its_half_message_by_offsets_and_group(broker: BrokerProcess) -> None:
    """Our own client: a half message is not readable until END_TRANSACTION commits it; a wrong group,
    offsets of no half message or an unknown commitOrRollback are refused with 1 and change nothing; a
    second end writes nothing; a batch with the prepared sys flag is refused with 13, as RocketMQ's store
    refuses it."""
    with RemotingClient(broker.addr) as client:
        sent = _half(client, b"raw-1")
        assert sent.code == ResponseCode.SUCCESS and sent.ext_fields["queueId"] == "1", sent
        assert _pulled(client) == []
        refused = _end(client, sent, 8, group="OtherGroup")
        assert refused.code == ResponseCode.SYSTEM_ERROR and "producer group OtherGroup" in (refused.remark or "")
        assert _end(client, sent, 5).code == ResponseCode.SYSTEM_ERROR
        bogus = client.request(RequestCode.END_TRANSACTION, {
            "producerGroup": "G1", "tranStateTableOffset": 0, "commitLogOffset": 3, "commitOrRollback": 8,
            "msgId": "x"})
        assert bogus.code == ResponseCode.SYSTEM_ERROR and "names no half message" in (bogus.remark or "")
        assert _pulled(client) == []
        assert _end(client, sent, 8).code == ResponseCode.SUCCESS
        assert _end(client, sent, 8).code == ResponseCode.SUCCESS  # already ended: nothing written
        assert _pulled(client) == [b"raw-1"]
        rolled = _half(client, b"raw-2")
        assert _end(client, rolled, 12).code == ResponseCode.SUCCESS
        assert _pulled(client) == [b"raw-1"]
        batch = client.request(RequestCode.SEND_BATCH_MESSAGE, {
            "a": "G1", "b": "TxRaw", "c": "TBW102", "d": 4, "e": 1, "f": 4, "g": 1, "h": 0,
            "i": "TRAN_MSG\x01true\x02PGROUP\x01G1", "j": 0, "m": "true"},
            encode_batch_body([BatchItem(0, b"in a batch", "")]))
        assert batch.code == ResponseCode.MESSAGE_ILLEGAL, batch
        assert _pulled(client) == [b"raw-1"]


def _pulled(client: RemotingClient) -> list[bytes]:
    response = client.request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "RawReader", "topic": "TxRaw", "queueId": 1, "queueOffset": 0, "maxMsgNums": 32,
        "sysFlag": 0, "commitOffset": 0, "suspendTimeoutMillis": 0, "subscription": "*", "subVersion": 0})
    return [m.body for m in decode_records(response.body)] if response.code == ResponseCode.SUCCESS else []
