"""The settings a RocketMQ 5 proxy answers a client's Telemetry settings command with
(GrpcClientSettingsManager with ProxyConfig's and SubscriptionGroupConfig's defaults):

| client | what is set |
|---|---|
| producer | backoff: 3 attempts, exponential 10 ms .. 1 s, multiplier 2; publishing: validate message |
|          | type, max body size 4 MiB |
| consumer | subscription: receive batch 32, long polling 20 s, fifo false; backoff: max attempts |
|          | (retryMaxTimes + 1, here `--max-reconsume-times` + 1), customized: the store's delay levels |
| both | metric off; everything else the client sent is echoed |
"""

from __future__ import annotations

from typing import Any

from rocketstore.broker.grpc.protos import pb

PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1000
PRODUCER_BACKOFF_MULTIPLIER = 2
CONSUMER_BATCH = 32
CONSUMER_LONG_POLLING_MS = 20_000


def client_settings(sent: Any, delay_level_millis: list[int], consumer_max_attempts: int,
                    max_body_bytes: int) -> Any:
    """The Settings to answer `sent` with."""
    answer = pb.Settings()
    answer.CopyFrom(sent)
    policy = answer.backoff_policy
    if sent.HasField("publishing"):
        policy.max_attempts = PRODUCER_MAX_ATTEMPTS
        policy.exponential_backoff.initial.FromMilliseconds(PRODUCER_BACKOFF_INITIAL_MS)
        policy.exponential_backoff.max.FromMilliseconds(PRODUCER_BACKOFF_MAX_MS)
        policy.exponential_backoff.multiplier = PRODUCER_BACKOFF_MULTIPLIER
        answer.publishing.validate_message_type = True
        answer.publishing.max_body_size = max_body_bytes
    elif sent.HasField("subscription"):
        sub = answer.subscription
        sub.receive_batch_size = CONSUMER_BATCH
        sub.long_polling_timeout.FromMilliseconds(CONSUMER_LONG_POLLING_MS)
        sub.fifo = False
        policy.max_attempts = consumer_max_attempts
        policy.customized_backoff.Clear()
        for millis in delay_level_millis:
            policy.customized_backoff.next.add().FromMilliseconds(millis)
    answer.metric.on = False
    answer.metric.ClearField("endpoints")
    return answer
