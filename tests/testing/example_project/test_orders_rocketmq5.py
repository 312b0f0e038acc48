"""Send to and receive from a FIFO topic with the RocketMQ 5 Python client (pip install rocketmq-python-client).

The `rocketmq_broker` fixture comes with rocketstore (pip install rocketstore): a broker for the session,
which creates the topic of this module's marker at start.
"""

import time

import pytest
from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.consumer import SimpleConsumer
from rocketmq.v5.model import FilterExpression, Message
from rocketmq.v5.producer import Producer

pytestmark = pytest.mark.rocketmq_topics("orders:4:FIFO")


def test_the_steps_of_an_order_arrive_in_order(rocketmq_broker):
    config = ClientConfiguration(rocketmq_broker.grpc_endpoint, Credentials(), request_timeout=10)
    producer = Producer(config, ("orders",))
    producer.startup()
    try:
        for step in ("created", "paid", "shipped"):
            message = Message()
            message.topic = "orders"
            message.tag = "web"
            message.keys = "order-42"
            message.message_group = "customer-7"  # FIFO: in order within one message group
            message.body = step.encode()
            producer.send(message)
    finally:
        producer.shutdown()

    consumer = SimpleConsumer(config, "billing", {"orders": FilterExpression("web")}, await_duration=5)
    consumer.startup()
    received = []
    try:
        deadline = time.monotonic() + 30
        while len(received) < 3 and time.monotonic() < deadline:
            for message in consumer.receive(16, 15):  # up to 16 messages, invisible to others for 15 s
                received.append((message.message_group, message.body.decode()))
                consumer.ack(message)
    finally:
        consumer.shutdown()
    assert received == [("customer-7", "created"), ("customer-7", "paid"), ("customer-7", "shipped")]
