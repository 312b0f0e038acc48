"""The requests `mqadmin` sends, over blocking remoting connections: to the name server (routes, the
cluster, the topic list) and to each broker it names (topics, groups, offsets, runtime counters, messages).

`AdminClient` answers with plain values decoded from RocketMQ's JSON bodies; a broker that answers other
than SUCCESS raises `RequestFailedError` (with its code and remark), one that cannot be reached
`BrokerUnreachableError`. Works against `rocketstore serve` and RocketMQ's own name server and broker.

    with AdminClient("127.0.0.1:9876") as admin:
        route = admin.route("TopicA")
        for name, addr in route.masters():
            print(name, admin.topic_stats(addr, "TopicA"))
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from rocketstore.errors import RemoteProtocolError
from rocketstore.format.layout import JAVA_LONG_MAX
from rocketstore.format.message import StoredMessage
from rocketstore.format.properties import encode_properties
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode
from rocketstore.protocol.bodies import decode_json_body, encode_json_body
from rocketstore.protocol.client import RemotingClient, RequestFailedError, decode_records
from rocketstore.protocol.codes import PULL_SUBSCRIPTION

MASTER_ID = "0"
AUTO_CREATE_TOPIC = "TBW102"  # the producer's defaultTopic
TOOLS_GROUP = "TOOLS_CONSUMER"  # the group mqadmin pulls with
ADMIN_PRODUCER_GROUP = "PID_SMSC"  # the group mqadmin's sendMessage produces with
RETRY_PREFIX = "%RETRY%"
# Codes of a send that stored the message (with a qualification: not yet flushed or replicated).
SEND_STORED = (ResponseCode.SUCCESS, ResponseCode.FLUSH_DISK_TIMEOUT, ResponseCode.FLUSH_SLAVE_TIMEOUT,
               ResponseCode.SLAVE_NOT_AVAILABLE)

MqKey = tuple[str, str, int]  # topic, broker name, queue id

# A MessageQueue written as a map key by fastjson: {"brokerName":"b","queueId":0,"topic":"T"}: (a JSON
# object where a string should be). Topic and broker names never hold braces or quotes.
_OBJECT_KEY = re.compile(r'(?<=[{,])(\{[^{}"]*(?:"[^"]*"[^{}"]*)*\})(?=:)')


class BrokerUnreachableError(RemoteProtocolError):
    """A name server or broker that could not be connected to or did not answer in time."""


def decode_mq_keyed_body(data: bytes) -> Any:
    """A JSON body whose maps are keyed by MessageQueue objects (TopicStatsTable, ConsumeStats,
    ResetOffsetBody), each such key turned into an `MqKey`-like string ``topic\\x00broker\\x00queueId``
    (`mq_of` reads it back).

    Raises:
        RemoteProtocolError: the body is not JSON even so.
    """
    text = data.decode("utf-8", errors="replace")
    quoted = _OBJECT_KEY.sub(lambda m: json.dumps(_mq_text(m.group(1))), text)
    return decode_json_body(quoted.encode("utf-8"))


def _mq_text(key: str) -> str:
    try:
        mq = json.loads(key)
    except ValueError as exc:
        raise RemoteProtocolError(f"a map key is not a MessageQueue: {key}") from exc
    return f"{mq.get('topic', '')}\x00{mq.get('brokerName', '')}\x00{mq.get('queueId', -1)}"


def mq_of(key: str) -> MqKey:
    """The (topic, broker name, queue id) of a key `decode_mq_keyed_body` wrote."""
    topic, broker, queue_id = key.split("\x00")
    return topic, broker, int(queue_id)


def _table(data: Any, name: str) -> dict[MqKey, Any]:
    """The MessageQueue-keyed map `name` of a decoded body, sorted by topic, broker and queue."""
    if not isinstance(data, dict) or not isinstance(data.get(name, {}), dict):
        raise RemoteProtocolError(f"the answer has no {name} map")
    return dict(sorted((mq_of(k), v) for k, v in data.get(name, {}).items()))


@dataclass(frozen=True)
class BrokerData:
    """One broker set of a route or of the cluster: its name, cluster and addresses by broker id."""

    name: str
    cluster: str
    addrs: dict[str, str]

    @property
    def master(self) -> str | None:
        return self.addrs.get(MASTER_ID)

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> BrokerData:
        addrs = item.get("brokerAddrs") or {}
        return cls(str(item.get("brokerName", "")), str(item.get("cluster", "")),
                   {str(k): str(v) for k, v in sorted(addrs.items(), key=lambda kv: int(kv[0]))})


@dataclass(frozen=True)
class TopicRoute:
    """TopicRouteData: the brokers serving a topic and its queues on each."""

    topic: str
    brokers: list[BrokerData]
    queues: list[dict[str, Any]]
    raw: dict[str, Any] = field(repr=False)

    def masters(self) -> list[tuple[str, str]]:
        """(broker name, master address) of every broker set of the route that has a master."""
        return [(b.name, b.master) for b in self.brokers if b.master is not None]

    def master_of(self, broker_name: str) -> str:
        """The master address of `broker_name`.

        Raises:
            RequestFailedError: the route has no such broker (or it has no master).
        """
        for name, addr in self.masters():
            if name == broker_name:
                return addr
        raise RequestFailedError(f"topic {self.topic} has no broker named {broker_name} "
                                 f"(its brokers: {', '.join(n for n, _ in self.masters()) or 'none'})",
                                 ResponseCode.SYSTEM_ERROR)


@dataclass(frozen=True)
class ClusterInfo:
    """ClusterInfo: the broker sets the name server knows, by cluster."""

    brokers: list[BrokerData]
    clusters: dict[str, list[str]]

    def masters(self, cluster: str | None = None) -> list[tuple[str, str]]:
        """(broker name, master address) of the cluster's broker sets (every cluster's when None).

        Raises:
            RequestFailedError: no cluster of that name.
        """
        if cluster is not None and cluster not in self.clusters:
            raise RequestFailedError(f"no cluster named {cluster} (known: {', '.join(sorted(self.clusters))})",
                                     ResponseCode.SYSTEM_ERROR)
        names = set(self.clusters[cluster]) if cluster is not None else None
        return [(b.name, b.master) for b in self.brokers
                if b.master is not None and (names is None or b.name in names)]


class AdminClient:
    """Connections to a name server and the brokers it names, opened on first use.

    Every request method raises what `call` raises: `BrokerUnreachableError`, `RequestFailedError` (a
    code other than SUCCESS and the codes the method expects), `RemoteProtocolError` (a body it cannot
    read).

    Args:
        namesrv: ``host:port`` of the name server (several separated by ``;``: the first that answers);
            None when only broker addresses are used.
        timeout_s: connect and answer timeout of every request.
        credentials: (access key, secret key) to sign every request with (brokers run with ACL).
    """

    def __init__(self, namesrv: str | None, timeout_s: float = 5.0,
                 credentials: tuple[str, str] | None = None) -> None:
        self.namesrv = [a.strip() for a in (namesrv or "").split(";") if a.strip()]
        self.timeout_s = timeout_s
        self.credentials = credentials
        self._clients: dict[str, RemotingClient] = {}

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection."""
        for client in self._clients.values():
            client.close()
        self._clients.clear()

    # -- transport -----------------------------------------------------------------------------------

    def call(self, addr: str, code: int, fields: Mapping[str, object] | None = None, body: bytes = b"",
             allowed: tuple[int, ...] = ()) -> RemotingCommand:
        """Send one request to `addr` and return its answer, SUCCESS or one of `allowed`.

        Raises:
            BrokerUnreachableError: no connection, or no answer within the timeout.
            RequestFailedError: any other answer code.
            RemoteProtocolError: the peer closed the connection or sent undecodable bytes.
        """
        try:
            client = self._clients.get(addr)
            if client is None:
                client = RemotingClient(addr, self.timeout_s, self.credentials)
                self._clients[addr] = client
            response = client.request(code, fields, body)
        except OSError as exc:
            self._drop(addr)
            raise BrokerUnreachableError(f"{addr} did not answer: {exc.strerror or exc}") from exc
        except RemoteProtocolError:
            self._drop(addr)
            raise
        if response.code != ResponseCode.SUCCESS and response.code not in allowed:
            raise RequestFailedError(f"{addr} answered {_code_name(response.code)}: {response.remark or ''}".strip(),
                                     response.code)
        return response

    def _drop(self, addr: str) -> None:
        client = self._clients.pop(addr, None)
        if client is not None:
            client.close()

    def _namesrv_call(self, code: int, fields: Mapping[str, object] | None = None) -> RemotingCommand:
        if not self.namesrv:
            raise RequestFailedError("no name server given (-n/--namesrv)", ResponseCode.SYSTEM_ERROR)
        unreachable: BrokerUnreachableError | None = None
        for addr in self.namesrv:
            try:
                return self.call(addr, code, fields)
            except BrokerUnreachableError as exc:
                unreachable = exc
        assert unreachable is not None
        raise unreachable

    # -- name server ---------------------------------------------------------------------------------

    def cluster_info(self) -> ClusterInfo:
        """GET_BROKER_CLUSTER_INFO (106)."""
        data = _json_object(self._namesrv_call(RequestCode.GET_BROKER_CLUSTER_INFO).body)
        brokers = [BrokerData.from_json(item) for _, item in sorted((data.get("brokerAddrTable") or {}).items())]
        clusters = {str(k): sorted(map(str, v)) for k, v in (data.get("clusterAddrTable") or {}).items()}
        return ClusterInfo(brokers, clusters)

    def route(self, topic: str) -> TopicRoute:
        """GET_ROUTEINFO_BY_TOPIC (105)."""
        data = _json_object(self._namesrv_call(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}).body)
        brokers = sorted((BrokerData.from_json(b) for b in data.get("brokerDatas") or []), key=lambda b: b.name)
        queues = sorted((dict(q) for q in data.get("queueDatas") or []), key=lambda q: str(q.get("brokerName")))
        return TopicRoute(topic, brokers, queues, data)

    def topic_list(self) -> list[str]:
        """GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206), sorted."""
        data = _json_object(self._namesrv_call(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER).body)
        return sorted(map(str, data.get("topicList") or []))

    # -- broker: topics and groups -------------------------------------------------------------------

    def create_topic(self, addr: str, topic: str, read_queues: int, write_queues: int, perm: int,
                     attributes: Mapping[str, str] | None = None) -> None:
        """UPDATE_AND_CREATE_TOPIC (17); `attributes` go as RocketMQ 5 sends them (``+message.type=FIFO``)."""
        fields: dict[str, object] = {"topic": topic, "defaultTopic": AUTO_CREATE_TOPIC,
                                     "readQueueNums": read_queues, "writeQueueNums": write_queues, "perm": perm,
                                     "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": "false"}
        if attributes:
            fields["attributes"] = ",".join(f"+{k}={v}" for k, v in attributes.items())
        self.call(addr, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)

    def delete_topic(self, addr: str, topic: str) -> None:
        """DELETE_TOPIC_IN_BROKER (215)."""
        self.call(addr, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": topic})

    def delete_topic_route(self, namesrv_addr: str, topic: str) -> None:
        """DELETE_TOPIC_IN_NAMESRV (216) to one name server."""
        self.call(namesrv_addr, RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic})

    def topic_stats(self, addr: str, topic: str) -> dict[MqKey, dict[str, Any]]:
        """GET_TOPIC_STATS_INFO (202): minOffset, maxOffset, lastUpdateTimestamp of each queue."""
        response = self.call(addr, RequestCode.GET_TOPIC_STATS_INFO, {"topic": topic})
        return _table(decode_mq_keyed_body(response.body), "offsetTable")

    def update_group(self, addr: str, config: Mapping[str, Any]) -> None:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200) with a SubscriptionGroupConfig body."""
        self.call(addr, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=encode_json_body(dict(config)))

    def delete_group(self, addr: str, group: str) -> None:
        """DELETE_SUBSCRIPTIONGROUP (207)."""
        self.call(addr, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": group})

    def consume_stats(self, addr: str, group: str, topic: str | None = None) -> tuple[float, dict[MqKey, Any]]:
        """GET_CONSUME_STATS (208): (consume TPS, brokerOffset / consumerOffset / lastTimestamp per queue)."""
        fields = {"consumerGroup": group, **({"topic": topic} if topic else {})}
        data = decode_mq_keyed_body(self.call(addr, RequestCode.GET_CONSUME_STATS, fields).body)
        table = _table(data, "offsetTable")
        return float(data.get("consumeTps") or 0.0), table

    def reset_offset(self, addr: str, topic: str, group: str, timestamp_ms: int,
                     force: bool) -> dict[MqKey, int] | None:
        """INVOKE_BROKER_TO_RESET_OFFSET (222): the offsets the broker told the group's online consumers;
        None when none is online (CONSUMER_NOT_ONLINE)."""
        response = self.call(addr, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                             {"topic": topic, "group": group, "timestamp": timestamp_ms,
                              "isForce": str(force).lower(), "isC": "false"},
                             allowed=(ResponseCode.CONSUMER_NOT_ONLINE,))
        if response.code == ResponseCode.CONSUMER_NOT_ONLINE:
            return None
        if not response.body:
            return {}
        return {mq: int(offset) for mq, offset in _table(decode_mq_keyed_body(response.body), "offsetTable").items()}

    def search_offset(self, addr: str, topic: str, queue_id: int, timestamp_ms: int) -> int:
        """SEARCH_OFFSET_BY_TIMESTAMP (29)."""
        response = self.call(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP,
                             {"topic": topic, "queueId": queue_id, "timestamp": timestamp_ms})
        return _int_field(response, "offset")

    def max_offset(self, addr: str, topic: str, queue_id: int) -> int:
        """GET_MAX_OFFSET (30)."""
        return _int_field(self.call(addr, RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": queue_id}),
                          "offset")

    def commit_offset(self, addr: str, group: str, topic: str, queue_id: int, offset: int) -> None:
        """UPDATE_CONSUMER_OFFSET (15)."""
        self.call(addr, RequestCode.UPDATE_CONSUMER_OFFSET,
                  {"consumerGroup": group, "topic": topic, "queueId": queue_id, "commitOffset": offset})

    def runtime_info(self, addr: str) -> dict[str, str]:
        """GET_BROKER_RUNTIME_INFO (28): the broker's KVTable of counters."""
        data = _json_object(self.call(addr, RequestCode.GET_BROKER_RUNTIME_INFO).body)
        return {str(k): str(v) for k, v in (data.get("table") or {}).items()}

    # -- broker: messages ----------------------------------------------------------------------------

    def query_by_key(self, addr: str, topic: str, key: str, max_num: int = 64) -> list[StoredMessage]:
        """QUERY_MESSAGE (12): messages of `topic` with `key` among their keys; [] when none."""
        response = self.call(addr, RequestCode.QUERY_MESSAGE,
                             {"topic": topic, "key": key, "maxNum": max_num, "beginTimestamp": 0,
                              "endTimestamp": JAVA_LONG_MAX, "_UNIQUE_KEY_QUERY": "false"},
                             allowed=(ResponseCode.QUERY_NOT_FOUND,))
        return [] if response.code == ResponseCode.QUERY_NOT_FOUND else decode_records(response.body)

    def view_message(self, addr: str, phy_offset: int) -> StoredMessage:
        """VIEW_MESSAGE_BY_ID (33): the record at `phy_offset` of the broker at `addr`."""
        records = decode_records(self.call(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": phy_offset}).body)
        if not records:
            raise RemoteProtocolError(f"{addr} answered no message at offset {phy_offset}")
        return records[0]

    def pull_one(self, addr: str, topic: str, queue_id: int, offset: int) -> StoredMessage | None:
        """PULL_MESSAGE (11) of the message at `offset` (as mqadmin's pull consumer, group TOOLS_CONSUMER,
        without committing); None when the queue has no message there."""
        response = self.call(addr, RequestCode.PULL_MESSAGE, {
            "consumerGroup": TOOLS_GROUP, "topic": topic, "queueId": queue_id, "queueOffset": offset,
            "maxMsgNums": 1, "sysFlag": PULL_SUBSCRIPTION, "commitOffset": 0, "suspendTimeoutMillis": 0,
            "subscription": "*", "subVersion": 0, "expressionType": "TAG"},
            allowed=(ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_OFFSET_MOVED,
                     ResponseCode.PULL_RETRY_IMMEDIATELY))
        if response.code != ResponseCode.SUCCESS:
            return None
        records = decode_records(response.body)
        return records[0] if records else None

    def send(self, addr: str, topic: str, queue_id: int, body: bytes, *, tags: str | None = None,
             keys: str | None = None, group: str = ADMIN_PRODUCER_GROUP) -> SendResult:
        """SEND_MESSAGE (10) of one message to queue `queue_id` of `topic` on the broker at `addr`."""
        uniq_key = uuid.uuid4().hex.upper()
        props = [*((("KEYS", keys),) if keys else ()), *((("TAGS", tags),) if tags else ()),
                 ("WAIT", "true"), ("UNIQ_KEY", uniq_key)]
        response = self.call(addr, RequestCode.SEND_MESSAGE, {
            "producerGroup": group, "topic": topic, "defaultTopic": AUTO_CREATE_TOPIC, "defaultTopicQueueNums": 4,
            "queueId": queue_id, "sysFlag": 0, "bornTimestamp": int(time.time() * 1000), "flag": 0,
            "properties": encode_properties(props), "reconsumeTimes": 0, "unitMode": "false", "batch": "false"},
            body, allowed=SEND_STORED[1:])
        status = "SEND_OK" if response.code == ResponseCode.SUCCESS else _code_name(response.code)
        return SendResult(status, uniq_key, response.ext_fields.get("msgId", ""),
                          int(response.ext_fields.get("queueId", queue_id)),
                          int(response.ext_fields.get("queueOffset", -1)))


@dataclass(frozen=True)
class SendResult:
    """What a broker answered a send: the status (SEND_OK, FLUSH_DISK_TIMEOUT...), the message's unique
    key (RocketMQ's client message id), its offset message id, queue and queue offset."""

    status: str
    uniq_key: str
    offset_msg_id: str
    queue_id: int
    queue_offset: int


def _code_name(code: int) -> str:
    try:
        return ResponseCode(code).name
    except ValueError:
        return f"code {code}"


def _json_object(body: bytes) -> dict[str, Any]:
    data = decode_json_body(body) if body else {}
    if not isinstance(data, dict):
        raise RemoteProtocolError(f"the answer is not a JSON object: {body[:80]!r}")
    return data


def _int_field(response: RemotingCommand, name: str) -> int:
    value = response.ext_fields.get(name)
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise RemoteProtocolError(f"the answer's field {name!r} is not a number: {value!r}") from None
