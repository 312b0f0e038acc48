"""`rocketstore admin` message commands: query-msg-by-key, query-msg-by-id, query-msg-by-offset and
send-message (mqadmin's queryMsgByKey, queryMsgById, queryMsgByOffset, sendMessage)."""

from __future__ import annotations

import random
from typing import Any

import click

from rocketstore.cli._errors import ProblemsFound, UsageProblem
from rocketstore.cli._output import MESSAGE_COLUMNS, Column, message_record, show, show_fields
from rocketstore.cli.admin_common import admin_command, need_namesrv, topic_option
from rocketstore.errors import FormatError
from rocketstore.format.layout import JAVA_INT_MAX
from rocketstore.format.message import StoredMessage
from rocketstore.format.msgid import decode_msg_id
from rocketstore.protocol.admin_client import AdminClient, TopicRoute

PERM_WRITE = 2
broker_name_option = click.option("-b", "--broker", "broker_name", metavar="NAME",
                                  help="Broker name (default: the topic's only broker, or any).")


@click.command("query-msg-by-key")
@topic_option
@click.option("-k", "--key", required=True, help="Message key (a KEYS token or the client's unique key).")
@click.option("--max", "max_num", type=click.IntRange(1, JAVA_INT_MAX), default=64, show_default=True,
              help="At most this many messages from each broker.")
@admin_command
def query_msg_by_key(admin: AdminClient, topic: str, key: str, max_num: int) -> None:
    """Messages of a topic carrying a key, from every broker of its route (mqadmin queryMsgByKey)."""
    need_namesrv(admin, "query-msg-by-key")
    records = []
    for name, addr in admin.route(topic).masters():
        records += [{"broker_name": name, **message_record(m)} for m in admin.query_by_key(addr, topic, key, max_num)]
    show(records, records, (Column("broker", "broker_name"), *MESSAGE_COLUMNS), lines=True,
         empty=f"no message of {topic} has key {key}", footer=f"{len(records)} message(s)")


@click.command("query-msg-by-id")
@click.option("-i", "--msg-id", required=True, help="Offset message id (or, with --topic, the client's unique id).")
@click.option("-t", "--topic", help="Look the id up as a unique key (UNIQ_KEY) in this topic first.")
@click.option("-b", "--broker", metavar="HOST:PORT", help="Broker address to read from (default: the one in the id).")
@admin_command
def query_msg_by_id(admin: AdminClient, msg_id: str, topic: str | None, broker: str | None) -> None:
    """The message an id names (mqadmin queryMsgById): an offset id is read from the broker it names;
    with --topic a client's unique id is looked up first."""
    message = _by_unique_key(admin, topic, msg_id) if topic else None
    if message is None:
        try:
            host, phy_offset = decode_msg_id(msg_id)
        except FormatError as exc:
            if topic:
                raise ProblemsFound(f"no message of {topic} has unique key {msg_id}") from exc
            raise UsageProblem(f"{msg_id!r} is not an offset message id ({exc}); give --topic to look up a "
                               "unique key") from exc
        message = admin.view_message(broker or host, phy_offset)
    show_fields(message_record(message), title=f"message {msg_id}")


def _by_unique_key(admin: AdminClient, topic: str, key: str) -> StoredMessage | None:
    need_namesrv(admin, "query-msg-by-id --topic")
    for _name, addr in admin.route(topic).masters():
        for message in admin.query_by_key(addr, topic, key):
            if message.uniq_key == key:
                return message
    return None


def _pick_broker(route: TopicRoute, broker_name: str | None, *, writable: bool = False) -> tuple[str, str]:
    if broker_name is not None:
        return broker_name, route.master_of(broker_name)
    usable = {str(q.get("brokerName")) for q in route.queues if not writable or int(q.get("perm", 0)) & PERM_WRITE}
    masters = [(name, addr) for name, addr in route.masters() if name in usable]
    if not masters:
        raise ProblemsFound(f"topic {route.topic} has no {'writable ' if writable else ''}broker")
    return masters[0]


@click.command("query-msg-by-offset")
@topic_option
@broker_name_option
@click.option("-i", "--queue-id", type=click.IntRange(0, 65535), required=True, help="Queue id.")
@click.option("-o", "--offset", type=click.IntRange(0), required=True, help="Queue offset.")
@admin_command
def query_msg_by_offset(admin: AdminClient, topic: str, broker_name: str | None, queue_id: int, offset: int) -> None:
    """The message at an offset of a queue (mqadmin queryMsgByOffset), pulled without committing."""
    need_namesrv(admin, "query-msg-by-offset")
    name, addr = _pick_broker(admin.route(topic), broker_name)
    message = admin.pull_one(addr, topic, queue_id, offset)
    if message is None:
        raise ProblemsFound(f"no message at offset {offset} of queue {queue_id} of {topic} on {name}")
    show_fields({"broker_name": name, **message_record(message)}, title=f"{topic} queue {queue_id} offset {offset}")


@click.command("send-message")
@topic_option
@click.option("-p", "--body", required=True, help="Message body (UTF-8 text).")
@click.option("-k", "--keys", help="Message keys (space-separated).")
@click.option("-c", "--tags", help="Message tag.")
@broker_name_option
@click.option("-i", "--queue-id", type=click.IntRange(0, 65535), help="Queue id (default: one at random).")
@admin_command
def send_message(admin: AdminClient, topic: str, body: str, keys: str | None, tags: str | None,
                 broker_name: str | None, queue_id: int | None) -> None:
    """Send one message to a topic (mqadmin sendMessage)."""
    need_namesrv(admin, "send-message")
    route = admin.route(topic)
    name, addr = _pick_broker(route, broker_name, writable=True)
    if queue_id is None:
        writes = next((int(q.get("writeQueueNums", 1)) for q in route.queues if q.get("brokerName") == name), 1)
        queue_id = random.randrange(max(writes, 1))
    result = admin.send(addr, topic, queue_id, body.encode("utf-8"), tags=tags, keys=keys)
    record: dict[str, Any] = {"broker_name": name, "queue_id": result.queue_id, "queue_offset": result.queue_offset,
                              "status": result.status, "msg_id": result.uniq_key,
                              "offset_msg_id": result.offset_msg_id}
    show_fields(record, title=f"sent to {topic}")


COMMANDS = (query_msg_by_key, query_msg_by_id, query_msg_by_offset, send_message)
