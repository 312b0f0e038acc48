"""The copy a consumer gets back after RECONSUME_LATER (CONSUMER_SEND_MSG_BACK, 36, then the delayed
delivery from SCHEDULE_TOPIC_XXXX to %RETRY%<group>) carries the properties the Java broker's copy
carries, DELAY and WAIT among them, and the message as first delivered those of the Java broker's record
(without the WAIT=true the client sends): one scenario (tests/broker/differential.py) against serve and
the real RocketMQ 4.9.8 broker, the Java client on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from rocketstore.broker.handlers_send import drop_default_wait
from tests.broker.broker_support import FAST_DELAY_LEVELS, BrokerProcess, create_store
from tests.broker.differential import JavaBroker, require_java_broker, retried_copy

# Properties whose values differ between two brokers or two runs by nature: ids made of addresses or
# clocks, and the offsets and times the client adds on receipt.
VARYING = {"UNIQ_KEY", "ORIGIN_MESSAGE_ID", "CONSUME_START_TIME", "MIN_OFFSET", "MAX_OFFSET"}


@pytest.fixture(scope="module")
def java_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaBroker]:
    require_java_broker()
    broker = JavaBroker(tmp_path_factory.mktemp("java-retry"), f"messageDelayLevel={FAST_DELAY_LEVELS}").start()
    try:
        yield broker
    finally:
        broker.stop()


def test_the_retried_copy_carries_the_java_brokers_properties(java_broker: JavaBroker, tmp_path: Path) -> None:
    ours = BrokerProcess(create_store(tmp_path / "store"), tmp_path / "serve.log").start()
    try:
        sent_mine, mine = retried_copy(ours.namesrv, "RetryTopic", "RetryGroup")
    finally:
        ours.stop()
    sent_theirs, theirs = retried_copy(java_broker.namesrv, "RetryTopic", "RetryGroup")
    # the record of the send: WAIT=true, which the client sends, is left out by both brokers
    assert set(sent_mine) == set(sent_theirs) and "WAIT" not in sent_mine, (sent_mine, sent_theirs)
    assert set(mine) == set(theirs), (mine, theirs)
    assert {k: v for k, v in mine.items() if k not in VARYING} == {k: v for k, v in theirs.items() if k not in VARYING}
    assert mine["DELAY"] == "3" and mine["WAIT"] == "false", mine  # level 3 + reconsumeTimes 0, no disk wait
    assert (mine["RETRY_TOPIC"], mine["REAL_TOPIC"], mine["REAL_QID"]) == ("RetryTopic", "%RETRY%RetryGroup", "0")


@pytest.mark.parametrize(("sent", "stored"), [
    ({"WAIT": "true", "TAGS": "A"}, {"TAGS": "A"}),                              # a plain send: left out
    ({"WAIT": "false", "TAGS": "A"}, {"WAIT": "false", "TAGS": "A"}),            # kept for the store to read
    ({"WAIT": "true", "DELAY": "2"}, {"WAIT": "true", "DELAY": "2"}),            # parked: rebuilt, kept
    ({"WAIT": "true", "DELAY": "0"}, {"DELAY": "0"}),                            # level 0 is no delay
    ({"WAIT": "true", "TRAN_MSG": "true"}, {"WAIT": "true", "TRAN_MSG": "true"}),  # a half message keeps it
])
def test_which_sends_keep_wait_in_their_record(sent: dict[str, str], stored: dict[str, str]) -> None:
    props = dict(sent)
    drop_default_wait(props)
    assert props == stored
