"""A RocketMQ broker for any test suite: `rocketmq_broker()` runs `rocketstore serve` over a temporary store.

    from rocketstore.testing import rocketmq_broker

    with rocketmq_broker(topics=["orders:4:FIFO", "jobs"]) as broker:
        broker.namesrv_addr     # "127.0.0.1:port": legacy (remoting) clients
        broker.grpc_endpoint    # "127.0.0.1:port": RocketMQ 5 clients

With pytest the `rocketmq_broker` fixture (rocketstore.testing.pytest_plugin, loaded through the
`pytest11` entry point) gives one such broker for the session (docs/testing.md). `ServeProcess` is the
broker process itself, over a store of the caller's, for tests that stop, kill and restart it.
"""

from rocketstore.testing._broker import BrokerError, RunningBroker, ServeProcess, rocketmq_broker

__all__ = ["BrokerError", "RunningBroker", "ServeProcess", "rocketmq_broker"]
