"""Edges of the remoting protocol where RocketMQ's own brokers answer in a way clients rely on."""

from __future__ import annotations

import json

from rocketstore import MessageStore
from rocketstore.broker.topics import PERM_READ, PERM_WRITE
from rocketstore.protocol import RequestCode, ResponseCode
from rocketstore.protocol.client import RemotingClient
from tests.broker.broker_support import BrokerProcess
from tests.broker.test_broker_requests import send


def test_a_commit_offset_of_minus_one_is_answered_success_and_changes_nothing(broker: BrokerProcess):
    # the npm ali-ons client sends commitOffset=-1 for "no offset"; RocketMQ 4.9.8 answers SUCCESS
    with RemotingClient(broker.addr, timeout_s=10) as client:
        assert send(client, "Offsets", b"m").code == ResponseCode.SUCCESS
        kept = {"consumerGroup": "Kept", "topic": "Offsets", "queueId": 0}
        assert client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**kept, "commitOffset": 1}).code == 0
        none = client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**kept, "commitOffset": -1})
        assert none.code == ResponseCode.SUCCESS, none.remark
        assert client.request(RequestCode.QUERY_CONSUMER_OFFSET, kept).ext_fields["offset"] == "1"
        fresh = {"consumerGroup": "Fresh", "topic": "Offsets", "queueId": 0}
        assert client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**fresh, "commitOffset": "-1"}).code == 0
        answer = client.request(RequestCode.QUERY_CONSUMER_OFFSET, fresh)
        assert (answer.code, answer.ext_fields["offset"]) == (ResponseCode.SUCCESS, "0")  # none: the queue's start
        huge = client.request(RequestCode.UPDATE_CONSUMER_OFFSET, {**fresh, "commitOffset": 2**63})
        assert huge.code == ResponseCode.SYSTEM_ERROR  # what a Java long cannot hold is still refused
    assert broker.stop() == 0
    with MessageStore.open(broker.store, read_only=True) as store:
        assert store.consumer_offsets() == {"Kept": {("Offsets", 0): 1}}


def test_dead_letter_topics_are_created_readable_and_writable(broker: BrokerProcess):
    with RemotingClient(broker.addr, timeout_s=10) as client:
        first = send(client, "Sent", b"back")
        offset = int(first.ext_fields["msgId"][-16:], 16)
        back = client.request(RequestCode.CONSUMER_SEND_MSG_BACK, {
            "offset": offset, "group": "Gone", "delayLevel": -1, "originMsgId": first.ext_fields["msgId"]})
        assert back.code == ResponseCode.SUCCESS
        exhausted = client.request(RequestCode.SEND_MESSAGE, {
            "producerGroup": "P", "topic": "%RETRY%Spent", "defaultTopic": "TBW102", "defaultTopicQueueNums": 1,
            "queueId": 0, "sysFlag": 0, "bornTimestamp": 1, "flag": 0, "properties": "", "reconsumeTimes": 16,
            "maxReconsumeTimes": 16}, b"spent")
        assert exhausted.code == ResponseCode.SUCCESS, exhausted.remark
        table = json.loads(client.request(RequestCode.GET_ALL_TOPIC_CONFIG).body)["topicConfigTable"]
    for dlq in ("%DLQ%Gone", "%DLQ%Spent"):
        assert table[dlq]["perm"] == PERM_READ | PERM_WRITE, (dlq, table[dlq])
