"""Transactional messages from the official RocketMQ 5 Python client: commit and rollback by the producer,
the server's check of a transaction left open (across a restart of the broker), giving up after the last
check, and forged transaction ids; the records on disk are the ones RocketMQ 4.9.8's broker writes."""

from __future__ import annotations

import time

import pytest

from rocketstore import MessageStore
from rocketstore.broker.grpc.protos import pb
from rocketstore.broker.transactions import PROGRESS_GROUP
from rocketstore.format.sysflag import TRANSACTION_MASK, TransactionType
from rocketstore.format.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_TOPIC
from tests.broker.broker_support import finish
from tests.grpc.grpc_support import GrpcBroker, call

pytestmark = pytest.mark.broker

FAST_CHECKS = ("--transaction-timeout", "1", "--transaction-check-interval", "1")


def _messages(lines: list[dict]) -> list[dict]:
    return [line for line in lines if "body" in line and "checked" not in line and "sent" not in line]


def _sent(lines: list[dict]) -> list[dict]:
    return [line for line in lines if "sent" in line]


def test_committed_messages_are_delivered_on_both_protocols_rolled_back_never(grpc_broker: GrpcBroker, client5,
                                                                              real_client, store_dir):
    grpc_broker.create_topic("TxTopic")
    committed = _sent(client5.run("transact", "--endpoint", grpc_broker.endpoint, "--topic", "TxTopic",
                                  "--count", "2", "--end", "commit", "--key-prefix", "c-"))
    rolled_back = _sent(client5.run("transact", "--endpoint", grpc_broker.endpoint, "--topic", "TxTopic",
                                    "--count", "2", "--end", "rollback", "--key-prefix", "r-"))
    assert [(s.get("error"), s["ended"]) for s in committed + rolled_back] == [(None, True)] * 4
    assert all(len(s["transaction_id"]) == 32 for s in committed + rolled_back)

    got = _messages(client5.run("consume", "--endpoint", grpc_broker.endpoint, "--topic", "TxTopic",
                                "--group", "GTx", "--expect", "3", "--timeout", "8"))
    assert sorted((m["body"], m["tag"], m["message_id"]) for m in got) == sorted(
        (s["body"], "TxTag", s["message_id"]) for s in committed)
    pulled = [m for m in real_client.run("pull", "--namesrv", grpc_broker.namesrv, "--topic", "TxTopic",
                                         "--group", "PullTx") if "body" in m]
    assert sorted(m["body"] for m in pulled) == ["c-body-0-commit", "c-body-1-commit"]
    assert grpc_broker.stop() == 0

    with MessageStore.open(store_dir, read_only=True) as store:
        halves = list(store.iter_queue(TRANS_HALF_TOPIC, 0))
        ends = list(store.iter_queue(TRANS_OP_TOPIC, 0))
        records = [m for q in store.queues()["TxTopic"] for m in store.iter_queue("TxTopic", q)]
        progress = store.committed_offset(PROGRESS_GROUP, TRANS_HALF_TOPIC, 0)
    assert [h.body.decode() for h in halves] == [s["body"] for s in committed + rolled_back]
    for half in halves:
        assert half.sys_flag & TRANSACTION_MASK == TransactionType.NOT
        assert half.properties["TRAN_MSG"] == "true" and half.properties["REAL_TOPIC"] == "TxTopic"
        assert int(half.properties["REAL_QID"]) in range(4)
    assert sorted(e.body for e in ends) == [b"0", b"1", b"2", b"3"] and {e.tags for e in ends} == {"d"}
    assert progress == 4
    by_body = {h.body: h for h in halves}
    assert len(records) == 2
    for record in records:
        half = by_body[record.body]
        assert record.sys_flag & TRANSACTION_MASK == TransactionType.COMMIT
        assert record.prepared_transaction_offset == half.phy_offset
        assert record.queue_id == int(half.properties["REAL_QID"])
        assert record.properties == half.properties  # REAL_TOPIC, REAL_QID, TRAN_MSG kept, as RocketMQ keeps them
        assert record.properties["UNIQ_KEY"] == half.properties["UNIQ_KEY"]


def test_an_open_transaction_is_checked_with_a_producer_even_after_a_restart(store_dir, tmp_path, client5):
    broker = GrpcBroker(store_dir, tmp_path / "broker.log", *FAST_CHECKS).start()
    try:
        broker.create_topic("TxCheck", queues=2)
        left_open = _sent(client5.run("transact", "--endpoint", broker.endpoint, "--topic", "TxCheck",
                                      "--count", "2", "--end", "none", "--key-prefix", "o-"))
        assert [s.get("error") for s in left_open] == [None, None]
        assert broker.stop() == 0
        broker.start()  # the open transactions are found again in the store
        answering = client5.start("transact", "--endpoint", broker.endpoint, "--topic", "TxCheck",
                                  "--count", "0", "--check-answer", "alternate", "--linger", "8")
        got = _messages(client5.run("consume", "--endpoint", broker.endpoint, "--topic", "TxCheck",
                                    "--group", "GTxCheck", "--expect", "2", "--timeout", "10"))
        checks = [line for line in finish(answering, 30) if "checked" in line]
        assert sorted((c["checked"], c["answer"], c["topic"]) for c in checks) == sorted(
            (s["message_id"], "commit" if s["body"] == "o-body-0-none" else "rollback", "TxCheck")
            for s in left_open)
        assert [m["body"] for m in got] == ["o-body-0-none"]  # the rolled back one never comes
        assert broker.stop() == 0
    finally:
        broker.kill()
    with MessageStore.open(store_dir, read_only=True) as store:
        assert store.committed_offset(PROGRESS_GROUP, TRANS_HALF_TOPIC, 0) == 2


def test_unanswered_transactions_are_given_up_and_forged_ids_refused(store_dir, tmp_path, client5):
    broker = GrpcBroker(store_dir, tmp_path / "broker.log", "--transaction-timeout", "0.5",
                        "--transaction-check-interval", "0.5", "--transaction-check-max", "2").start()
    try:
        broker.create_topic("TxGone", queues=1)
        broker.create_topic("TxOther", queues=1)
        sent = _sent(client5.run("transact", "--endpoint", broker.endpoint, "--topic", "TxGone", "--count", "1",
                                 "--end", "none", "--key-prefix", "g-"))[0]
        txn, msg_id = sent["transaction_id"], sent["message_id"]

        def end(topic: str, transaction_id: str, message_id: str, resolution: int) -> int:
            request = pb.EndTransactionRequest(message_id=message_id, transaction_id=transaction_id,
                                               resolution=resolution)
            request.topic.name = topic
            return call(broker.endpoint, "EndTransaction", request).status.code

        commit = pb.TransactionResolution.COMMIT
        assert end("TxGone", f"{0:016X}{5:016X}", msg_id, commit) == pb.Code.INVALID_TRANSACTION_ID
        assert end("TxGone", f"{1 << 40:016X}{0:016X}", msg_id, commit) == pb.Code.INVALID_TRANSACTION_ID
        assert end("TxGone", "not-an-id", msg_id, commit) == pb.Code.INVALID_TRANSACTION_ID
        assert end("TxOther", txn, msg_id, commit) == pb.Code.INVALID_TRANSACTION_ID
        assert end("TxGone", txn, "0A0B0C", commit) == pb.Code.INVALID_TRANSACTION_ID
        assert end("TxGone", txn, msg_id, pb.TransactionResolution.TRANSACTION_RESOLUTION_UNSPECIFIED) == \
            pb.Code.BAD_REQUEST
        assert end("NoSuchTopic", txn, msg_id, commit) == pb.Code.TOPIC_NOT_FOUND

        deadline = time.monotonic() + 15  # 2 checks nobody answers, then given up
        while time.monotonic() < deadline:
            with MessageStore.open(store_dir, read_only=True) as store:
                if store.max_offset(TRANS_CHECK_MAX_TIME_TOPIC, 0):
                    break
            time.sleep(0.3)
        assert end("TxGone", txn, msg_id, commit) == pb.Code.OK  # already ended: nothing is written
        got = _messages(client5.run("consume", "--endpoint", broker.endpoint, "--topic", "TxGone",
                                    "--group", "GTxGone", "--expect", "1", "--timeout", "6"))
        assert got == []
        assert broker.stop() == 0
    finally:
        broker.kill()
    with MessageStore.open(store_dir, read_only=True) as store:
        given_up = list(store.iter_queue(TRANS_CHECK_MAX_TIME_TOPIC, 0))
        assert [m.body for m in given_up] == [b"g-body-0-none"]
        assert [m.body for m in store.iter_queue(TRANS_OP_TOPIC, 0)] == [b"0"]
        assert store.max_offset("TxGone", 0) == 0
