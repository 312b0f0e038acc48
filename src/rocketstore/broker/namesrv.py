"""The NameServer role: routes of the one broker this process runs (GET_ROUTEINFO_BY_TOPIC 105,
GET_BROKER_CLUSTER_INFO 106, GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206, DELETE_TOPIC_IN_NAMESRV 216) and
its settings (GET_NAMESRV_CONFIG 319) and KV config (PUT_KV_CONFIG 100, GET_KV_CONFIG 101,
DELETE_KV_CONFIG 102)."""

from __future__ import annotations

import logging
from pathlib import Path

from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.kv_config import KvConfig
from rocketstore.broker.server import Connection, Handler
from rocketstore.broker.topics import PERM_WRITE, TopicTable
from rocketstore.format.topics import RETRY_PREFIX, SCHEDULE_TOPIC, TRANS_HALF_TOPIC
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode
from rocketstore.protocol.bodies import encode_json_body, topic_route_body

log = logging.getLogger("rocketstore.broker")

# Topics RocketMQ's broker creates for itself (TopicValidator, MixAll.REPLY_TOPIC_POSTFIX).
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
BENCHMARK_TOPIC = "BenchmarkTest"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
REPLY_TOPIC_SUFFIX = "_REPLY_TOPIC"


class NameServerHandlers:
    """Answers route queries from the broker's topic table.

    Args:
        config: the broker's settings (name, cluster, address).
        topics: the broker's topics.
        read_only: the broker serves a read-only store: routes give its queues without write permission
            (as RocketMQ routes a broker whose brokerPermission is read-only), so producers do not pick it.
    """

    def __init__(self, config: BrokerConfig, topics: TopicTable, *, read_only: bool = False,
                 kv: KvConfig | None = None) -> None:
        self.config = config
        self.topics = topics
        self.read_only = read_only
        self.kv = kv if kv is not None else KvConfig(Path(), read_only=True)

    def table(self) -> dict[int, Handler]:
        """Request code -> handler."""
        return {RequestCode.GET_ROUTEINFO_BY_TOPIC: self.route,
                RequestCode.GET_BROKER_CLUSTER_INFO: self.cluster_info,
                RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self.topic_list,
                RequestCode.DELETE_TOPIC_IN_NAMESRV: self.delete_topic,
                RequestCode.GET_NAMESRV_CONFIG: self.namesrv_config,
                RequestCode.PUT_KV_CONFIG: self.put_kv, RequestCode.GET_KV_CONFIG: self.get_kv,
                RequestCode.DELETE_KV_CONFIG: self.delete_kv,
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

    def system_topics(self) -> list[str]:
        """The topics a RocketMQ 4.9.8 broker registers for itself (TopicConfigManager at start: its
        cluster's and its own name, the self-test, benchmark, offset-moved, delay and reply topics; the
        transaction check, a minute after start: the half-message topic)."""
        return [SELF_TEST_TOPIC, BENCHMARK_TOPIC, self.config.cluster, self.config.broker_name,
                OFFSET_MOVED_EVENT, SCHEDULE_TOPIC, self.config.cluster + REPLY_TOPIC_SUFFIX, TRANS_HALF_TOPIC]

    async def topic_list(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER: the broker's topics and the system topics RocketMQ's broker
        registers for itself."""
        names = sorted(set(self.topics.topics) | set(self.system_topics()))
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body({"topicList": names}))

    async def delete_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV: the topic's route goes (mqadmin deleteTopic sends it after the
        broker's DELETE_TOPIC_IN_BROKER); SUCCESS for an unknown topic too, as RocketMQ answers."""
        topic = cmd.ext_fields.get("topic")
        if topic is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, "request header field 'topic' is missing")
        if self.read_only:
            return cmd.response(ResponseCode.NO_PERMISSION, "the name server serves a read-only store")
        self.topics.topics.pop(topic, None)
        return cmd.response(ResponseCode.SUCCESS)

    async def namesrv_config(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_NAMESRV_CONFIG: the name server's settings as a properties text (NamesrvConfig and
        NettyServerConfig names)."""
        _host, _, port = (self.config.namesrv or self.config.listen).rpartition(":")
        props = {"listenPort": port, "kvConfigPath": str(self.kv.path), "productEnvName": "center",
                 "clusterTest": "false",
                 "orderMessageEnable": "false",
                 "serverChannelMaxIdleTimeSeconds": str(int(self.config.limits.idle_timeout_s))}
        text = "".join(f"{key}={value}\n" for key, value in props.items())
        return cmd.response(ResponseCode.SUCCESS, body=text.encode("utf-8"))

    def _kv_fields(self, cmd: RemotingCommand) -> tuple[str, str]:
        namespace, key = cmd.ext_fields.get("namespace"), cmd.ext_fields.get("key")
        if namespace is None or key is None:
            raise ValueError("request header fields 'namespace' and 'key' are required")
        return namespace, key

    async def put_kv(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """PUT_KV_CONFIG."""
        try:
            namespace, key = self._kv_fields(cmd)
            value = cmd.ext_fields.get("value")
            if value is None:
                raise ValueError("request header field 'value' is missing")
            self.kv.put(namespace, key, value)
        except (ValueError, OSError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        log.info("KV config %s %s set by %s", namespace, key, conn.peer)
        return cmd.response(ResponseCode.SUCCESS)

    async def get_kv(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_KV_CONFIG: the value in `value`; QUERY_NOT_FOUND when there is none."""
        try:
            namespace, key = self._kv_fields(cmd)
        except ValueError as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        value = self.kv.get(namespace, key)
        if value is None:
            return cmd.response(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}")
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"value": value})

    async def delete_kv(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """DELETE_KV_CONFIG; SUCCESS for an unknown key too, as RocketMQ answers."""
        try:
            namespace, key = self._kv_fields(cmd)
            self.kv.delete(namespace, key)
        except (ValueError, OSError) as exc:
            return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
        return cmd.response(ResponseCode.SUCCESS)

    async def register_broker(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """REGISTER_BROKER / UNREGISTER_BROKER from other brokers: not supported (one broker per name server)."""
        return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                            "this name server only serves the broker of its own process")
