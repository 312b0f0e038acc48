"""Topics with a meaning of their own in RocketMQ (its TopicValidator), declared once.

The store writes some of them itself: a delayed message is parked in SCHEDULE_TOPIC_XXXX until it is
due, and a broker's transactional half messages live in RMQ_SYS_TRANS_HALF_TOPIC. RocketMQ refuses a
producer's send to those (`TopicValidator.isNotAllowedSendTopic`); so does rocketstore, for every way a
message comes in (the store API, the CLI, the broker), and delayed delivery never moves a record into
one of them. Anything starting with `rmq_sys_` is a system topic too.
"""

from __future__ import annotations

SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
"""Where delayed messages wait (queue L-1 for delay level L)."""
AUTO_CREATE_TOPIC = "TBW102"
"""The template topic a broker creates new topics from."""
RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"

TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
"""Where a transactional message waits for its commit or rollback (queue 0)."""
TRANS_OP_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
"""One record per ended transaction: tag "d", body the half message's queue offset."""
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
"""Where a half message goes after its producer was asked about it too many times."""
BROKER_WRITTEN_TOPICS = frozenset({TRANS_HALF_TOPIC, TRANS_OP_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC})
"""The topics `MessageStore.put_broker_records` writes (delayed messages reach SCHEDULE_TOPIC_XXXX by
their DELAY property instead)."""

NOT_ALLOWED_SEND_TOPICS = BROKER_WRITTEN_TOPICS | {SCHEDULE_TOPIC}
"""Topics only the broker writes (RocketMQ 4.9.8's NOT_ALLOWED_SEND_TOPIC_SET)."""

SYSTEM_TOPICS = NOT_ALLOWED_SEND_TOPICS | {
    AUTO_CREATE_TOPIC, "BenchmarkTest", "RMQ_SYS_TRACE_TOPIC", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
}
"""RocketMQ's SYSTEM_TOPIC_SET."""


def is_system_topic(topic: str) -> bool:
    """True for RocketMQ's system topics (its set, or the `rmq_sys_` prefix)."""
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


def refuses_sends(topic: str) -> bool:
    """True for topics a producer may not send to: those only the broker writes, and `rmq_sys_*`."""
    return topic in NOT_ALLOWED_SEND_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)
