"""`rocketstore admin` consumer-group commands: update-sub-group, delete-sub-group, consumer-progress,
reset-offset-by-time (mqadmin's updateSubGroup, deleteSubGroup, consumerProgress, resetOffsetByTime)."""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any

import click

from rocketstore.cli._output import Column, number, show, text, when
from rocketstore.cli.admin_common import (
    admin_command,
    broker_addr_option,
    cluster_option,
    group_option,
    need_namesrv,
    target_brokers,
    topic_option,
)
from rocketstore.format.layout import JAVA_INT_MAX
from rocketstore.format.times import parse_time_ms
from rocketstore.protocol import ResponseCode
from rocketstore.protocol.admin_client import RETRY_PREFIX, AdminClient, MqKey
from rocketstore.protocol.client import RequestFailedError

MQADMIN_TIME = "%Y-%m-%d#%H:%M:%S:%f"  # mqadmin's -s format, yyyy-MM-dd#HH:mm:ss:SSS


@click.command("update-sub-group")
@group_option
@broker_addr_option
@cluster_option
@click.option("-r", "--retry-max-times", type=click.IntRange(0, JAVA_INT_MAX), default=16, show_default=True,
              help="Times a message is retried before it goes to the dead-letter queue.")
@click.option("-q", "--retry-queues", type=click.IntRange(1, 65535), default=1, show_default=True,
              help="Queues of the group's retry topic.")
@click.option("--consume-enable/--no-consume-enable", default=True, show_default=True,
              help="Whether the group may consume.")
@click.option("-d", "--broadcast/--no-broadcast", default=False, show_default=True,
              help="Broadcast consumption allowed.")
@click.option("-m", "--from-min/--no-from-min", default=False, show_default=True,
              help="A new consumer starts from the queues' first message.")
@click.option("-i", "--broker-id", type=click.IntRange(0, JAVA_INT_MAX), default=0, show_default=True,
              help="Broker id the group consumes from.")
@click.option("-w", "--slow-broker-id", type=click.IntRange(0, JAVA_INT_MAX), default=1, show_default=True,
              help="Broker id the group consumes from when it is slow.")
@admin_command
def update_sub_group(admin: AdminClient, group: str, broker: str | None, cluster: str | None,
                     retry_max_times: int, retry_queues: int, consume_enable: bool, broadcast: bool,
                     from_min: bool, broker_id: int, slow_broker_id: int) -> None:
    """Create a subscription group or update its settings (mqadmin updateSubGroup)."""
    config = {"groupName": group, "consumeEnable": consume_enable, "consumeFromMinEnable": from_min,
              "consumeBroadcastEnable": broadcast, "retryQueueNums": retry_queues, "retryMaxTimes": retry_max_times,
              "brokerId": broker_id, "whichBrokerWhenConsumeSlowly": slow_broker_id,
              "notifyConsumerIdsChangedEnable": True}
    records = []
    for name, addr in target_brokers(admin, broker, cluster):
        admin.update_group(addr, config)
        records.append({"broker_name": name, "broker_addr": addr, "group": group, "retry_max_times": retry_max_times,
                        "retry_queues": retry_queues, "consume_enable": consume_enable, "broadcast": broadcast})
    columns = (Column("broker", "broker_name"), Column("address", "broker_addr"), Column("group", "group"),
               Column("retry max times", "retry_max_times", number, "right"),
               Column("retry queues", "retry_queues", number, "right"),
               Column("consume enable", "consume_enable", _flag), Column("broadcast", "broadcast", _flag))
    show(records, records, columns, lines=True, footer=f"group {group} created or updated on {len(records)} "
                                                       "broker(s)")


def _flag(value: Any) -> str:
    return "" if value is None else str(bool(value)).lower()


@click.command("delete-sub-group")
@group_option
@broker_addr_option
@cluster_option
@admin_command
def delete_sub_group(admin: AdminClient, group: str, broker: str | None, cluster: str | None) -> None:
    """Delete a subscription group from brokers (mqadmin deleteSubGroup)."""
    records = []
    for name, addr in target_brokers(admin, broker, cluster):
        admin.delete_group(addr, group)
        records.append({"broker_name": name, "broker_addr": addr, "group": group})
    columns = (Column("broker", "broker_name"), Column("address", "broker_addr"), Column("group", "group"))
    show(records, records, columns, lines=True, footer=f"group {group} deleted from {len(records)} broker(s)")


def _group_brokers(admin: AdminClient, group: str) -> list[tuple[str, str]]:
    """The masters of the group's retry topic's route (as mqadmin looks them up), else every master."""
    try:
        return admin.route(RETRY_PREFIX + group).masters()
    except RequestFailedError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        return admin.cluster_info().masters()


PROGRESS_COLUMNS = (
    Column("topic", "topic"), Column("broker", "broker_name"), Column("queue", "queue_id", number, "right"),
    Column("broker offset", "broker_offset", number, "right"),
    Column("consumer offset", "consumer_offset", number, "right"), Column("diff", "diff", number, "right"),
    Column("last consumed (UTC)", "last_timestamp", lambda v: when(v) if isinstance(v, int) and v > 0 else ""),
)


@click.command("consumer-progress")
@group_option
@click.option("-t", "--topic", help="Only this topic of the group.")
@admin_command
def consumer_progress(admin: AdminClient, group: str, topic: str | None) -> None:
    """Broker offset, committed offset and lag of each queue a group consumes (mqadmin consumerProgress)."""
    need_namesrv(admin, "consumer-progress")
    records: list[dict[str, Any]] = []
    tps = 0.0
    for _name, addr in _group_brokers(admin, group):
        broker_tps, table = admin.consume_stats(addr, group, topic)
        tps += broker_tps
        for (queue_topic, broker_name, queue_id), row in table.items():
            broker_offset, consumer_offset = int(row.get("brokerOffset", 0)), int(row.get("consumerOffset", 0))
            records.append({"topic": queue_topic, "broker_name": broker_name, "queue_id": queue_id,
                            "broker_offset": broker_offset, "consumer_offset": consumer_offset,
                            "diff": broker_offset - consumer_offset, "last_timestamp": row.get("lastTimestamp")})
    records.sort(key=lambda r: (r["topic"], r["broker_name"], r["queue_id"]))
    total = sum(r["diff"] for r in records)
    show(records, records, PROGRESS_COLUMNS, lines=True, empty=f"group {group} has no committed offsets",
         footer=f"consume TPS: {tps:.2f}, diff total: {total}")


class ResetTime(click.ParamType):
    """`now`, epoch milliseconds, ISO 8601, or mqadmin's yyyy-MM-dd#HH:mm:ss:SSS (taken as UTC)."""

    name = "TIME"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        text_value = str(value).strip()
        if text_value.lower() == "now":
            return int(time.time() * 1000)
        if "#" in text_value:
            try:
                moment = datetime.strptime(text_value, MQADMIN_TIME).replace(tzinfo=timezone.utc)
            except ValueError:
                self.fail(f"{text_value!r} is not yyyy-MM-dd#HH:mm:ss:SSS", param, ctx)
            return int(moment.timestamp() * 1000)
        try:
            return parse_time_ms(text_value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


RESET_COLUMNS = (
    Column("broker", "broker_name"), Column("queue", "queue_id", number, "right"),
    Column("broker offset", "broker_offset", number, "right"),
    Column("consumer offset", "consumer_offset", number, "right"),
    Column("timestamp offset", "timestamp_offset", number, "right"),
    Column("reset to", "reset_offset", number, "right"), Column("how", "how", text),
)


@click.command("reset-offset-by-time")
@group_option
@topic_option
@click.option("-s", "--timestamp", "timestamp_ms", type=ResetTime(), required=True,
              help="Time to go back (or forward) to: now, epoch ms, ISO 8601 or yyyy-MM-dd#HH:mm:ss:SSS (UTC).")
@click.option("--force/--no-force", "-f", default=True, show_default=True,
              help="Also move offsets forward (without it, only back).")
@admin_command
def reset_offset_by_time(admin: AdminClient, group: str, topic: str, timestamp_ms: int, force: bool) -> None:
    """Move a group's committed offsets on a topic to those of a time (mqadmin resetOffsetByTime).

    The brokers tell the group's online consumers (INVOKE_BROKER_TO_RESET_OFFSET); where none is online
    the offsets are looked up by time and committed directly, as mqadmin falls back to doing.
    """
    need_namesrv(admin, "reset-offset-by-time")
    route = admin.route(topic)
    records: list[dict[str, Any]] = []
    for broker_name, addr in route.masters():
        told = admin.reset_offset(addr, topic, group, timestamp_ms, force)
        if told is None:
            queues = _read_queues(route.queues, broker_name)
            records += _commit_by_time(admin, addr, broker_name, queues, group, topic, timestamp_ms, force)
        else:
            records += [{"broker_name": mq[1], "queue_id": mq[2], "broker_offset": None, "consumer_offset": None,
                         "timestamp_offset": offset, "reset_offset": offset, "how": "consumers told"}
                        for mq, offset in told.items()]
    show(records, records, RESET_COLUMNS, lines=True,
         footer=f"group {group} on topic {topic} reset to {when(timestamp_ms)} ({timestamp_ms}), force={force}")


def _read_queues(queues: list[dict[str, Any]], broker_name: str) -> int:
    return next((int(q.get("readQueueNums", 0)) for q in queues if q.get("brokerName") == broker_name), 0)


def _commit_by_time(admin: AdminClient, addr: str, broker_name: str, read_queues: int, group: str, topic: str,
                    timestamp_ms: int, force: bool) -> list[dict[str, Any]]:
    """The offline reset of one broker: each queue's offset at the time (its end for -1), committed where
    `force` or it is behind the committed one. A group that committed nothing on the topic starts from
    the queues' first offsets."""
    _tps, table = admin.consume_stats(addr, group, topic)
    offsets: dict[MqKey, tuple[int, int]] = {
        mq: (int(row.get("brokerOffset", 0)), int(row.get("consumerOffset", 0)))
        for mq, row in table.items() if mq[0] == topic}
    if not offsets:
        offsets = {mq: (int(stats.get("maxOffset", 0)), int(stats.get("minOffset", 0)))
                   for mq, stats in admin.topic_stats(addr, topic).items() if mq[2] < read_queues}
    records = []
    for (_topic, name, queue_id), (broker_offset, consumer_offset) in sorted(offsets.items()):
        found = (admin.max_offset(addr, topic, queue_id) if timestamp_ms == -1
                 else admin.search_offset(addr, topic, queue_id, timestamp_ms))
        reset = consumer_offset
        if force or found <= consumer_offset:
            admin.commit_offset(addr, group, topic, queue_id, found)
            reset = found
        records.append({"broker_name": name or broker_name, "queue_id": queue_id, "broker_offset": broker_offset,
                        "consumer_offset": consumer_offset, "timestamp_offset": found, "reset_offset": reset,
                        "how": "offset committed"})
    return records


COMMANDS = (update_sub_group, delete_sub_group, consumer_progress, reset_offset_by_time)
