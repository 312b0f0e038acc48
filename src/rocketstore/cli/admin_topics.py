"""`rocketstore admin` topic commands: update-topic, delete-topic, topic-list, topic-route, topic-status
(mqadmin's updateTopic, deleteTopic, topicList, topicRoute, topicStatus)."""

from __future__ import annotations

from typing import Any

import click

from rocketstore.cli._output import Column, number, show, text, when
from rocketstore.cli.admin_common import (
    admin_command,
    broker_addr_option,
    cluster_option,
    need_namesrv,
    target_brokers,
    topic_option,
)
from rocketstore.protocol.admin_client import AdminClient

MESSAGE_TYPE_ATTRIBUTE = "message.type"  # RocketMQ 5's TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE
MESSAGE_TYPES = ("NORMAL", "FIFO", "DELAY", "TRANSACTION")
PERM_NAMES = {2: "W", 4: "R", 6: "RW", 0: "-"}


def perm_text(perm: Any) -> str:
    return PERM_NAMES.get(perm, str(perm)) if isinstance(perm, int) else text(perm)


@click.command("update-topic")
@topic_option
@broker_addr_option
@cluster_option
@click.option("-r", "--read-queues", type=click.IntRange(1, 65535), default=8, show_default=True,
              help="Read queues.")
@click.option("-w", "--write-queues", type=click.IntRange(1, 65535), default=8, show_default=True,
              help="Write queues.")
@click.option("-p", "--perm", type=click.IntRange(0, 7), default=6, show_default=True,
              help="Permission: 2 write, 4 read, 6 read and write.")
@click.option("--type", "message_type", type=click.Choice(MESSAGE_TYPES, case_sensitive=False),
              help="RocketMQ 5's message type of the topic (attribute message.type).")
@admin_command
def update_topic(admin: AdminClient, topic: str, broker: str | None, cluster: str | None, read_queues: int,
                 write_queues: int, perm: int, message_type: str | None) -> None:
    """Create a topic or update its queues and permission (mqadmin updateTopic)."""
    attributes = {MESSAGE_TYPE_ATTRIBUTE: message_type.upper()} if message_type else {}
    records = []
    for name, addr in target_brokers(admin, broker, cluster):
        admin.create_topic(addr, topic, read_queues, write_queues, perm, attributes)
        records.append({"broker_name": name, "broker_addr": addr, "topic": topic, "read_queues": read_queues,
                        "write_queues": write_queues, "perm": perm,
                        "message_type": attributes.get(MESSAGE_TYPE_ATTRIBUTE)})
    show(records, records, TOPIC_UPDATE_COLUMNS, lines=True,
         footer=f"topic {topic} created or updated on {len(records)} broker(s)")


TOPIC_UPDATE_COLUMNS = (
    Column("broker", "broker_name"), Column("address", "broker_addr"), Column("topic", "topic"),
    Column("read queues", "read_queues", number, "right"), Column("write queues", "write_queues", number, "right"),
    Column("perm", "perm", perm_text), Column("message type", "message_type", text),
)


@click.command("delete-topic")
@topic_option
@cluster_option
@admin_command
def delete_topic(admin: AdminClient, topic: str, cluster: str | None) -> None:
    """Delete a topic from the cluster's master brokers, then its route from the name server (mqadmin
    deleteTopic)."""
    need_namesrv(admin, "delete-topic")
    records: list[dict[str, Any]] = []
    for name, addr in admin.cluster_info().masters(cluster):
        admin.delete_topic(addr, topic)
        records.append({"from": "broker", "name": name, "addr": addr, "topic": topic})
    for addr in admin.namesrv:
        admin.delete_topic_route(addr, topic)
        records.append({"from": "name server", "name": "", "addr": addr, "topic": topic})
    columns = (Column("deleted from", "from"), Column("name", "name"), Column("address", "addr"),
               Column("topic", "topic"))
    show(records, records, columns, lines=True, footer=f"topic {topic} deleted")


@click.command("topic-list")
@admin_command
def topic_list(admin: AdminClient) -> None:
    """Every topic the name server knows, system topics included (mqadmin topicList)."""
    need_namesrv(admin, "topic-list")
    records = [{"topic": name} for name in admin.topic_list()]
    show(records, records, (Column("topic", "topic"),), lines=True, footer=f"{len(records)} topics")


@click.command("topic-route")
@topic_option
@admin_command
def topic_route(admin: AdminClient, topic: str) -> None:
    """The brokers serving a topic and its queues on each (mqadmin topicRoute)."""
    need_namesrv(admin, "topic-route")
    route = admin.route(topic)
    masters = dict(route.masters())
    records = [{"broker_name": q.get("brokerName"), "broker_addr": masters.get(str(q.get("brokerName"))),
                "read_queues": q.get("readQueueNums"), "write_queues": q.get("writeQueueNums"),
                "perm": q.get("perm"), "topic_sys_flag": q.get("topicSysFlag", 0)} for q in route.queues]
    columns = (Column("broker", "broker_name", text), Column("address", "broker_addr", text),
               Column("read queues", "read_queues", number, "right"),
               Column("write queues", "write_queues", number, "right"), Column("perm", "perm", perm_text),
               Column("sys flag", "topic_sys_flag", number, "right"))
    show(records, records, columns, lines=True, footer=f"topic {topic}: {len(route.brokers)} broker(s)")


@click.command("topic-status")
@topic_option
@admin_command
def topic_status(admin: AdminClient, topic: str) -> None:
    """Min and max offset and last store time of each queue of a topic (mqadmin topicStatus)."""
    need_namesrv(admin, "topic-status")
    records = []
    for _name, addr in admin.route(topic).masters():
        for (_topic, broker_name, queue_id), stats in admin.topic_stats(addr, topic).items():
            records.append({"broker_name": broker_name, "queue_id": queue_id, "min_offset": stats.get("minOffset"),
                            "max_offset": stats.get("maxOffset"),
                            "last_update_timestamp": stats.get("lastUpdateTimestamp")})
    columns = (Column("broker", "broker_name"), Column("queue", "queue_id", number, "right"),
               Column("min offset", "min_offset", number, "right"),
               Column("max offset", "max_offset", number, "right"),
               Column("last updated (UTC)", "last_update_timestamp", _last_update))
    total = sum(int(r["max_offset"] or 0) - int(r["min_offset"] or 0) for r in records)
    show(records, records, columns, lines=True, footer=f"{len(records)} queues, {total} messages")


def _last_update(value: Any) -> str:
    return when(value) if isinstance(value, int) and value > 0 else ""


COMMANDS = (update_topic, delete_topic, topic_list, topic_route, topic_status)
