"""The NameServer role: routes of the one broker this process runs (GET_ROUTEINFO_BY_TOPIC 105,
GET_BROKER_CLUSTER_INFO 106, GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206)."""

from __future__ import annotations

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.server import Connection, Handler
from rocketstore.broker.topics import PERM_WRITE, TopicTable
from rocketstore.format.topics import RETRY_PREFIX
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode
from rocketstore.protocol.bodies import encode_json_body, topic_route_body


class NameServerHandlers:
    """Answers route queries from the broker's topic table.

    Args:
        config: the broker's settings (name, cluster, address).
        topics: the broker's topics.
        read_only: the broker serves a read-only store: routes give its queues without write permission
            (as RocketMQ routes a broker whose brokerPermission is read-only), so producers do not pick it.
    """

    def __init__(self, config: BrokerConfig, topics: TopicTable, *, read_only: bool = False) -> None:
        self.config = config
        self.topics = topics
        self.read_only = read_only

    def table(self) -> dict[int, Handler]:
        """Request code -> handler."""
        return {RequestCode.GET_ROUTEINFO_BY_TOPIC: self.route,
                RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
                RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.topic_list,
                RequestCode.REGISTER_BROKER: self.register_broker,
                RequestCode.UNREGISTER_BROKER: self.register_broker}

    async def route(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_ROUTEINFO_BY_TOPIC; a retry topic resolves even before its group's first heartbeat."""
        topic = cmd.ext_fields.get("topic", "")
        config = self.topics.get(topic)
        if config is None and topic.startswith(RETRY_PREFIX):
            config = self.topics.ensure(topic, 1)
        if config is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: "
                                f"{topic}")
        return cmd.response(ResponseCode.SUCCESS, body=topic_route_body(
            config.write_queue_nums, self.config.broker_name, self.config.cluster, self.config.broker_addr,
            config.perm & ~PERM_WRITE if self.read_only else config.perm))

    async def cluster_info(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_BROKER_CLUSTER_INFO."""
        name = self.config.broker_name
        body = {"brokerAddrTable": {name: {"brokerAddrs": {"0": self.config.broker_addr}, "brokerName": name,
                                           "cluster": self.config.cluster}},
                "clusterAddrTable": {self.config.cluster: [name]}}
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body(body))

    async def topic_list(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER."""
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body({"topicList": sorted(self.topics.topics)}))

    async def register_broker(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """REGISTER_BROKER / UNREGISTER_BROKER from other brokers: not supported (one broker per name server)."""
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            "this name server only serves the broker of its own process")
