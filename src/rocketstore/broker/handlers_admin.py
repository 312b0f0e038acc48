"""Admin requests `mqadmin` sends a broker, answered as RocketMQ 4.9.8's AdminBrokerProcessor answers them
(same codes, same body JSON, same answers when no client is online):

GET_BROKER_CONFIG (26), GET_BROKER_RUNTIME_INFO (28), UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200),
GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201), GET_TOPIC_STATS_INFO (202), DELETE_SUBSCRIPTIONGROUP (207),
GET_CONSUME_STATS (208), DELETE_TOPIC_IN_BROKER (215), INVOKE_BROKER_TO_RESET_OFFSET (222),
QUERY_TOPIC_CONSUME_BY_WHO (300), GET_CONSUMER_CONNECTION_LIST (203), GET_PRODUCER_CONNECTION_LIST (204),
GET_BROKER_CONSUME_STATS (317), QUERY_CONSUME_QUEUE (321) and VIEW_BROKER_STATS_DATA (315).
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from rocketstore.broker.context import BrokerContext, RequestError, field_bool, field_int, field_str
from rocketstore.broker.server import Connection, Handler
from rocketstore.broker.stats import GROUP_GET_NUMS
from rocketstore.broker.topics import PERM_READ, PERM_WRITE, valid_topic
from rocketstore.errors import RemoteProtocolError, RocketStoreError
from rocketstore.format.layout import JAVA_INT_MAX
from rocketstore.format.topics import is_system_topic
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode
from rocketstore.protocol.bodies import MqKey, decode_json_body, encode_json_body, encode_mq_keyed_body
from rocketstore.protocol.codes import OUR_VERSION, OUR_VERSION_DESC
from rocketstore.store.files import group_config

log = logging.getLogger("rocketstore.broker")

MAX_TIMESTAMP_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z: a reset to a later time is refused


def _human_bytes(size: int) -> str:
    """RocketMQ's MixAll.humanReadableByteCount(size, false): 3.7 KiB."""
    if size < 1024:
        return f"{size} B"
    exp = 0
    value = float(size)
    while value >= 1024 and exp < 6:
        value /= 1024
        exp += 1
    return f"{value:.1f} {'KMGTPE'[exp - 1]}iB"


def _disk_used(path: Path) -> tuple[str, str]:
    """RocketMQ's UtilAll.getDiskPartitionSpaceUsedPercent (used over used + usable, rounded up to a
    hundredth) and commitLogDirCapacity text of the partition holding `path`.

    Raises:
        OSError: the partition could not be measured.
    """
    vfs = os.statvfs(path)
    total, free, usable = (vfs.f_blocks * vfs.f_frsize, vfs.f_bfree * vfs.f_frsize, vfs.f_bavail * vfs.f_frsize)
    used = total - free
    entire = used + usable
    ratio = -(-used * 100 // entire) / 100 if total > 0 and entire > 0 else -1.0
    return str(ratio), f"Total : {_human_bytes(total)}, Free : {_human_bytes(usable)}."


def _connection(client_id: str, conn: Connection, language: str, version: int) -> dict[str, object]:
    """A remoting Connection (clientAddr, clientId, language, version)."""
    return {"clientAddr": conn.peer, "clientId": client_id, "language": language, "version": version}


def _runtime(ms: int) -> str:
    seconds = ms // 1000
    return (f"[ {seconds // 86400} days, {seconds // 3600 % 24} hours, {seconds // 60 % 60} minutes, "
            f"{seconds % 60} seconds ]")


class AdminHandlers:
    """Broker-side admin requests (see the module docstring)."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx

    def table(self) -> dict[int, Handler]:
        """Request code -> handler."""
        return {RequestCode.GET_BROKER_CONFIG: self.broker_config,
                RequestCode.GET_BROKER_RUNTIME_INFO: self.runtime_info,
                RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: self.update_group,
                RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: self.all_groups,
                RequestCode.DELETE_SUBSCRIPTIONGROUP: self.delete_group,
                RequestCode.GET_TOPIC_STATS_INFO: self.topic_stats,
                RequestCode.GET_CONSUME_STATS: self.consume_stats,
                RequestCode.DELETE_TOPIC_IN_BROKER: self.delete_topic,
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET: self.reset_offset,
                RequestCode.QUERY_TOPIC_CONSUME_BY_WHO: self.consumed_by_who,
                RequestCode.GET_CONSUMER_CONNECTION_LIST: self.consumer_connection,
                RequestCode.GET_PRODUCER_CONNECTION_LIST: self.producer_connection,
                RequestCode.GET_BROKER_CONSUME_STATS: self.broker_consume_stats,
                RequestCode.QUERY_CONSUME_QUEUE: self.query_consume_queue,
                RequestCode.VIEW_BROKER_STATS_DATA: self.stats_data}

    # -- broker --------------------------------------------------------------------------------------

    def broker_properties(self) -> dict[str, str]:
        """The broker's settings under RocketMQ's BrokerConfig / MessageStoreConfig names (those that mean
        something here; a broker without HA or DLedger, as ours is)."""
        cfg, store = self.ctx.config, self.ctx.store.config
        host, _, port = cfg.broker_addr.rpartition(":")
        path = self.ctx.store.path
        return {
            "brokerClusterName": cfg.cluster, "brokerName": cfg.broker_name, "brokerId": "0",
            "brokerIP1": host, "listenPort": port, "namesrvAddr": cfg.namesrv or "",
            "brokerRole": "ASYNC_MASTER", "brokerPermission": str(PERM_READ if self.ctx.read_only else
                                                                  PERM_READ | PERM_WRITE),
            "flushDiskType": "SYNC_FLUSH" if store.flush_mode.name == "SYNC" else "ASYNC_FLUSH",
            "storePathRootDir": str(path), "storePathCommitLog": str(path / "commitlog"),
            "mappedFileSizeCommitLog": str(store.commitlog_file_size),
            "mappedFileSizeConsumeQueue": str(store.consume_queue_file_entries * 20),
            "maxHashSlotNum": str(store.index_hash_slots), "maxIndexNum": str(store.index_max_entries),
            "maxMessageSize": str(store.max_message_size), "messageDelayLevel": store.delay_levels,
            "deleteWhen": store.delete_when, "fileReservedTime": str(store.file_reserved_hours),
            "diskMaxUsedSpaceRatio": str(round(store.disk_max_used_ratio * 100)),
            "flushIntervalCommitLog": str(store.flush_interval_ms),
            "flushCommitLogLeastPages": str(store.flush_least_pages),
            "flushIntervalConsumeQueue": str(store.flush_consume_queue_interval_ms),
            "syncFlushTimeout": str(store.sync_flush_timeout_ms),
            "checkCRCOnRecover": str(store.check_crc_on_recover).lower(),
            "defaultQueryMaxNum": str(store.max_query_results),
            "maxTransferCountOnMessageInDisk": str(store.max_get_count),
            "defaultTopicQueueNums": str(cfg.default_queue_nums), "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true", "aclEnable": str(cfg.acl_file is not None).lower(),
            "enableDLegerCommitLog": "false", "messageIndexEnable": "true", "longPollingEnable": "true",
            "transactionTimeOut": str(cfg.transactions.timeout_ms),
            "transactionCheckInterval": str(cfg.transactions.check_interval_ms),
        }

    async def broker_config(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_BROKER_CONFIG: the settings as a properties text, the config's data version in `version`."""
        text = "".join(f"{key}={value}\n" for key, value in self.broker_properties().items())
        version = encode_json_body({"counter": 0, "timestamp": self.ctx.stats.boot_ms}).decode("utf-8")
        return cmd.response(ResponseCode.SUCCESS, ext_fields={"version": version}, body=text.encode("utf-8"))

    async def runtime_info(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_BROKER_RUNTIME_INFO: the KVTable of counters clusterList and brokerStatus print."""
        store, stats = self.ctx.store, self.ctx.stats
        now = int(time.time() * 1000)
        try:
            disk, capacity = _disk_used(store.path)
        except OSError:
            disk, capacity = "-1.0", "Total : 0 B, Free : 0 B."
        min_phy, max_phy = store.min_phy_offset, store.max_phy_offset
        earliest = -1
        if max_phy > min_phy:
            try:
                earliest = store.message_at(min_phy).store_timestamp
            except (RocketStoreError, ValueError):
                earliest = -1
        put_total = stats.put_total
        table = {
            "brokerVersionDesc": OUR_VERSION_DESC, "brokerVersion": str(OUR_VERSION),
            "bootTimestamp": str(stats.boot_ms), "runtime": _runtime(now - stats.boot_ms),
            "msgPutTotalYesterdayMorning": str(stats.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(stats.put_today_morning), "msgPutTotalTodayNow": str(put_total),
            "msgGetTotalYesterdayMorning": str(stats.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(stats.get_today_morning), "msgGetTotalTodayNow": str(stats.get_total),
            "putTps": stats.put_tps(), "getTransferedTps": stats.get_tps(), "getTotalTps": stats.get_tps(),
            "getFoundTps": stats.get_tps(), "getMissTps": "0.00 0.00 0.00",
            "putMessageTimesTotal": str(put_total), "putMessageSizeTotal": str(stats.put_size_total),
            "putMessageAverageSize": str(stats.put_size_total / put_total if put_total else 0.0),
            "putMessageFailedTimes": "0",
            "sendThreadPoolQueueSize": "0", "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": "0", "pullThreadPoolQueueCapacity": "100000",
            "queryThreadPoolQueueSize": "0", "queryThreadPoolQueueCapacity": "20000",
            "EndTransactionQueueSize": "0", "EndTransactionThreadPoolQueueCapacity": "100000",
            "sendThreadPoolQueueHeadWaitTimeMills": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "queryThreadPoolQueueHeadWaitTimeMills": "0", "pageCacheLockTimeMills": "0",
            "dispatchBehindBytes": "0", "dispatchMaxBuffer": "0",
            "earliestMessageTimeStamp": str(earliest), "startAcceptSendRequestTimeStamp": "0",
            "commitLogMinOffset": str(min_phy), "commitLogMaxOffset": str(max_phy),
            "commitLogDiskRatio": disk, f"commitLogDiskRatio_{store.path / 'commitlog'}": disk,
            "consumeQueueDiskRatio": disk, "commitLogDirCapacity": capacity,
            "remainHowManyDataToFlush": _human_bytes(max(0, max_phy - store.commitlog.queue.flushed_offset)),
            "remainTransientStoreBufferNumbs": str(JAVA_INT_MAX),
        }
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body({"table": table}))

    # -- subscription groups -------------------------------------------------------------------------

    async def update_group(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: the body is a SubscriptionGroupConfig."""
        try:
            self.ctx.refuse_writes()
            try:
                data = decode_json_body(cmd.body) if cmd.body else None
            except RemoteProtocolError as exc:
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"body is not a SubscriptionGroupConfig: {exc}") \
                    from None
            if data is None:  # RocketMQ does nothing for an empty body
                return cmd.response(ResponseCode.SUCCESS)
            if not isinstance(data, dict):
                raise RequestError(ResponseCode.SYSTEM_ERROR, "body is not a SubscriptionGroupConfig object")
            try:
                config = group_config(data)
                self.ctx.groups.update(config)
            except ValueError as exc:
                raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
            except OSError as exc:
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"subscriptionGroup.json not written: {exc}") \
                    from None
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        log.info("subscription group %s updated by %s", config["groupName"], conn.peer)
        return cmd.response(ResponseCode.SUCCESS)

    async def all_groups(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: the SubscriptionGroupWrapper."""
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body(self.ctx.groups.encode()))

    async def delete_group(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """DELETE_SUBSCRIPTIONGROUP; SUCCESS for an unknown group too, as RocketMQ answers."""
        try:
            self.ctx.refuse_writes()
            name = field_str(cmd, "groupName")
            try:
                self.ctx.groups.delete(name)
            except OSError as exc:
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"subscriptionGroup.json not written: {exc}") \
                    from None
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        log.info("subscription group %s deleted by %s", name, conn.peer)
        return cmd.response(ResponseCode.SUCCESS)

    # -- topics and consumption ----------------------------------------------------------------------

    def _mq(self, topic: str, queue_id: int) -> MqKey:
        return topic, self.ctx.config.broker_name, queue_id

    def _store_time(self, topic: str, queue_id: int, offset: int) -> int:
        return self.ctx.store.store_timestamp_at(topic, queue_id, offset)

    async def topic_stats(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_TOPIC_STATS_INFO: min and max offset and last store time of each write queue."""
        try:
            topic = field_str(cmd, "topic")
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        config = self.ctx.topics.get(topic)
        if config is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        store = self.ctx.store
        rows = []
        for queue_id in range(config.write_queue_nums):
            low, high = max(store.min_offset(topic, queue_id), 0), max(store.max_offset(topic, queue_id), 0)
            last = self._store_time(topic, queue_id, high - 1) if high > 0 else 0
            rows.append((self._mq(topic, queue_id), {"lastUpdateTimestamp": last, "maxOffset": high,
                                                     "minOffset": low}))
        return cmd.response(ResponseCode.SUCCESS, body=encode_mq_keyed_body({}, {"offsetTable": rows}))

    def _group_topics(self, group: str) -> list[str]:
        """Topics `group` committed offsets for (RocketMQ's whichTopicByConsumer)."""
        return sorted({topic for g, topic in self.ctx.offsets.committed_pairs() if g == group})

    def _offset_rows(self, group: str, topic: str, queue_nums: int) -> list[tuple[MqKey, dict[str, int]]]:
        """The OffsetWrapper of each of `queue_nums` queues of `topic` for `group`."""
        rows: list[tuple[MqKey, dict[str, int]]] = []
        for queue_id in range(queue_nums):
            broker_offset = max(self.ctx.store.max_offset(topic, queue_id), 0)
            consumer_offset = self.ctx.offsets.get(group, topic, queue_id)
            consumer_offset = max(consumer_offset if consumer_offset is not None else 0, 0)
            last = self._store_time(topic, queue_id, consumer_offset - 1) if consumer_offset > 0 else 0
            rows.append((self._mq(topic, queue_id), {"brokerOffset": broker_offset,
                                                     "consumerOffset": consumer_offset,
                                                     "lastTimestamp": max(last, 0)}))
        return rows

    def consume_stats_of(self, group: str, topic: str | None) -> tuple[float, list[tuple[MqKey, dict[str, int]]]]:
        """The ConsumeStats of `group` (on `topic`, or every topic it committed offsets for)."""
        rows: list[tuple[MqKey, dict[str, int]]] = []
        tps = 0.0
        subscribed = self.ctx.clients.subscribed_topics(group)
        for name in ([topic] if topic else self._group_topics(group)):
            config = self.ctx.topics.get(name)
            if config is None or (subscribed and name not in subscribed):
                continue  # RocketMQ skips a topic the group's online consumers do not subscribe
            rows += self._offset_rows(group, name, config.read_queue_nums)
            tps += self._get_tps(group, name)
        return tps, rows

    def _get_tps(self, group: str, topic: str) -> float:
        """Messages of `topic` `group` got per second over the last minute (RocketMQ's tpsGroupGetNums)."""
        data = self.ctx.stats.items.snapshot(GROUP_GET_NUMS, f"{topic}@{group}")
        return float(data["statsMinute"]["tps"]) if data is not None else 0.0

    async def broker_consume_stats(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_BROKER_CONSUME_STATS: the ConsumeStats of every subscription group on each topic it committed
        offsets for (RocketMQ's ConsumeStatsList; topics are never ordered here, so isOrder=true lists
        no topic), with the total of broker minus consumer offsets."""
        only_ordered = field_bool(cmd, "isOrder")
        groups: list[str] = []
        total_diff = 0
        for group in self.ctx.groups.encode()["subscriptionGroupTable"]:
            subscribed = self.ctx.clients.subscribed_topics(group)
            stats: list[str] = []
            for name in self._group_topics(group):
                config = self.ctx.topics.get(name)
                if config is None or only_ordered or (subscribed and name not in subscribed):
                    continue
                rows = self._offset_rows(group, name, config.write_queue_nums)
                total_diff += sum(row["brokerOffset"] - row["consumerOffset"] for _mq, row in rows)
                stats.append(encode_mq_keyed_body({"consumeTps": self._get_tps(group, name)},
                                                  {"offsetTable": rows}).decode("utf-8"))
            groups.append("{" + json.dumps(group, ensure_ascii=False) + ":[" + ",".join(stats) + "]}")
        body = (f'{{"brokerAddr":{json.dumps(self.ctx.config.broker_addr)},"consumeStatsList":[{",".join(groups)}],'
                f'"totalDiff":{total_diff}}}')
        return cmd.response(ResponseCode.SUCCESS, body=body.encode("utf-8"))

    async def consume_stats(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_CONSUME_STATS: broker and committed offset of each queue of the group's topics."""
        try:
            group = field_str(cmd, "consumerGroup")
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        tps, rows = self.consume_stats_of(group, cmd.ext_fields.get("topic") or None)
        return cmd.response(ResponseCode.SUCCESS, body=encode_mq_keyed_body({"consumeTps": tps},
                                                                             {"offsetTable": rows}))

    async def delete_topic(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """DELETE_TOPIC_IN_BROKER: the topic's queues and config go (`MessageStore.delete_topic`); its
        records stay in the commitlog until retention."""
        try:
            self.ctx.refuse_writes()
            topic = field_str(cmd, "topic")
            if not valid_topic(topic):  # RocketMQ's TopicValidator.validateTopic
                raise RequestError(ResponseCode.SYSTEM_ERROR, "The specified topic contains illegal characters, "
                                   "allowing only ^[%|a-zA-Z0-9_-]+$")
            if is_system_topic(topic):
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"The topic[{topic}] is conflict with system topic.")
            try:
                self.ctx.store.delete_topic(topic)
            except (RocketStoreError, OSError) as exc:
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"topic {topic} not deleted: {exc}") from None
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        self.ctx.topics.topics.pop(topic, None)
        log.info("topic %s deleted by %s", topic, conn.peer)
        return cmd.response(ResponseCode.SUCCESS)

    async def reset_offset(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """INVOKE_BROKER_TO_RESET_OFFSET (RocketMQ's Broker2Client.resetOffset): the offsets of `group` on
        `topic` at `timestamp` (-1: the queues' ends), told to the group's online consumers with
        RESET_CONSUMER_CLIENT_OFFSET, which commit them; CONSUMER_NOT_ONLINE when none is online (mqadmin
        then commits the offsets itself)."""
        try:
            topic, group = field_str(cmd, "topic"), field_str(cmd, "group")
            timestamp = field_int(cmd, "timestamp")
            if not -1 <= timestamp <= MAX_TIMESTAMP_MS:
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"timestamp {timestamp} is not a time")
            force = field_bool(cmd, "isForce")
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        config = self.ctx.topics.get(topic)
        if config is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}")
        store = self.ctx.store
        table: list[tuple[MqKey, int]] = []
        for queue_id in range(config.write_queue_nums):
            committed = self.ctx.offsets.get(group, topic, queue_id)
            if committed is None:
                return cmd.response(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{group}> not exist")
            target = (store.max_offset(topic, queue_id) if timestamp == -1
                      else store.offset_by_time(topic, queue_id, timestamp))
            target = max(target, 0)
            table.append((self._mq(topic, queue_id), target if force or target < committed else committed))
        members = self.ctx.clients.consumer_connections(group)
        if not members:
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, "Consumer not online, so can not reset offset, "
                                f"Group: {group} Topic: {topic} Timestamp: {timestamp}")
        body = encode_mq_keyed_body({}, {"offsetTable": table})
        for member in members:
            member.send_oneway(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                               {"topic": topic, "group": group, "timestamp": str(timestamp), "isForce": "false"},
                               body)
        log.info("[reset-offset] %s told %d consumers of %s to reset %s to %d", conn.peer, len(members), group,
                 topic, timestamp)
        return cmd.response(ResponseCode.SUCCESS, body=body)

    async def consumer_connection(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_CONSUMER_CONNECTION_LIST: the group's online consumers (ConsumerConnection);
        CONSUMER_NOT_ONLINE when none is."""
        try:
            group = field_str(cmd, "consumerGroup")
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        members = self.ctx.clients.consumers_of(group)
        if not members:
            return cmd.response(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        first = members[0]
        table: dict[str, Any] = {}
        for info in members:
            for topic, data in info.subscription_data.items():
                table.setdefault(topic, data)
        body = {"connectionSet": [_connection(info.client_id, info.conn, info.language, info.version)
                                  for info in members],
                "consumeFromWhere": first.consume_from_where, "consumeType": first.consume_type,
                "messageModel": first.message_model, "subscriptionTable": table}
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body(body))

    async def producer_connection(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """GET_PRODUCER_CONNECTION_LIST: the group's connected producers (ProducerConnection)."""
        try:
            group = field_str(cmd, "producerGroup")
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        members = self.ctx.clients.producers_of(group)
        if not members:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist")
        body = {"connectionSet": [_connection(info.client_id, info.conn, info.language, info.version)
                                  for info in members]}
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body(body))

    async def query_consume_queue(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """QUERY_CONSUME_QUEUE: `count` entries of a consume queue from `index`, up to the end of the file
        holding it (RocketMQ reads one mapped file), with the group's subscription when it is online. `eval`
        is false throughout, as RocketMQ sets it only for entries of a consume-queue extension (none here)."""
        try:
            topic, queue_id = field_str(cmd, "topic"), field_int(cmd, "queueId")
            index, count = field_int(cmd, "index"), field_int(cmd, "count")
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        store = self.ctx.store
        if queue_id not in store.queues().get(topic, ()):
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"{queue_id}@{topic} is not exist!")
        low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
        answer: dict[str, Any] = {"maxQueueIndex": high, "minQueueIndex": low}
        group = cmd.ext_fields.get("consumerGroup")
        if group is not None:
            subscription = next((info.subscription_data[topic] for info in self.ctx.clients.consumers_of(group)
                                 if topic in info.subscription_data), None)
            if subscription is None:
                answer["filterData"] = f"{group}@{topic} is not online!"
            else:
                answer["filterData"], answer["subscriptionData"] = "null", subscription
        if not low <= index < high:
            return cmd.response(ResponseCode.SUCCESS, f"Index {index} of {queue_id}@{topic} is not exist!")
        per_file = store.config.consume_queue_file_entries
        end = min(high, (index // per_file + 1) * per_file, index + max(count, 0))
        answer["queueData"] = [{"eval": False, "physicOffset": unit.phy_offset, "physicSize": unit.size,
                                "tagsCode": unit.tags_code}
                               for unit in store.queue_entries(topic, queue_id, index, end)]
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body(dict(sorted(answer.items()))))

    async def stats_data(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """VIEW_BROKER_STATS_DATA: one counter's BrokerStatsData (TOPIC_PUT_NUMS / TOPIC_PUT_SIZE of a topic,
        GROUP_GET_NUMS / GROUP_GET_SIZE of topic@group) over the last minute, hour and day."""
        name, key = cmd.ext_fields.get("statsName"), cmd.ext_fields.get("statsKey")
        data = self.ctx.stats.items.snapshot(name, key) if name is not None and key is not None else None
        if data is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"The stats <{name}> <{key}> not exist")
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body(data))

    async def consumed_by_who(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand:
        """QUERY_TOPIC_CONSUME_BY_WHO: the groups online on `topic` and those with offsets committed on it."""
        try:
            topic = field_str(cmd, "topic")
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        groups = set(self.ctx.clients.groups_subscribing(topic))
        groups |= {group for group, t in self.ctx.offsets.committed_pairs() if t == topic}
        return cmd.response(ResponseCode.SUCCESS, body=encode_json_body({"groupList": sorted(groups)}))

