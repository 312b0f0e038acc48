"""Send and pull with a legacy remoting client: the C++ client's Python binding (pip install rocketmq==0.4.4).

The `rocketmq_broker` fixture comes with rocketstore (pip install rocketstore): a broker for the session,
which creates the topics of pytest.ini's rocketmq_topics at start.
"""

from rocketmq.client import Message, Producer, PullConsumer, SendStatus

from rocketstore.protocol.client import RemotingClient


def test_payments_are_stored_and_pulled(rocketmq_broker):
    producer = Producer("payments-producer")
    producer.set_namesrv_addr(rocketmq_broker.namesrv_addr)
    producer.start()
    try:
        for i in range(3):
            message = Message("payments")
            message.set_keys(f"payment-{i}")
            message.set_tags("EUR")
            message.set_body(f"payment {i}".encode())
            assert producer.send_sync(message).status == SendStatus.OK
    finally:
        producer.shutdown()

    consumer = PullConsumer("payments-audit")
    consumer.set_namesrv_addr(rocketmq_broker.namesrv_addr)
    consumer.start()
    try:  # every queue of the topic (2, from pytest.ini) up to its end
        pulled = [(message.keys.decode(), message.body.decode()) for message in consumer.pull("payments", "EUR")]
    finally:
        consumer.shutdown()
    assert sorted(pulled) == [("payment-0", "payment 0"), ("payment-1", "payment 1"), ("payment-2", "payment 2")]

    with RemotingClient(rocketmq_broker.broker_addr) as client:  # rocketstore's own client: look up by key
        [found] = client.query_message("payments", "payment-1")
    assert found.body == b"payment 1"
