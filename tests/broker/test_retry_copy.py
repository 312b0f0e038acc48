"""The copy a consumer gets back after RECONSUME_LATER (CONSUMER_SEND_MSG_BACK, 36, then the delayed
delivery from SCHEDULE_TOPIC_XXXX to %RETRY%<group>) carries the properties the Java broker's copy
carries, DELAY and WAIT among them: one scenario (tests/broker/differential.py) against serve and the
real RocketMQ 4.9.8 broker, the Java client on both."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

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
        mine = retried_copy(ours.namesrv, "RetryTopic", "RetryGroup")
    finally:
        ours.stop()
    theirs = retried_copy(java_broker.namesrv, "RetryTopic", "RetryGroup")
    assert set(mine) == set(theirs), (mine, theirs)
    assert {k: v for k, v in mine.items() if k not in VARYING} == {k: v for k, v in theirs.items() if k not in VARYING}
    assert mine["DELAY"] == "3" and mine["WAIT"] == "false", mine  # level 3 + reconsumeTimes 0, no disk wait
    assert (mine["RETRY_TOPIC"], mine["REAL_TOPIC"], mine["REAL_QID"]) == ("RetryTopic", "%RETRY%RetryGroup", "0")
