"""`topics` and `progress`: what a store holds and how far its consumers are (mqadmin topicStatus /
consumerProgress)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rocketstore.cli._errors import UsageProblem
from rocketstore.cli._output import Column, number, show, when
from rocketstore.cli._state import global_options, open_store, require_queue, store_argument

if TYPE_CHECKING:
    from rocketstore import MessageStore


TOPIC_COLUMNS = (
    Column("topic", "topic"),
    Column("queue", "queue_id", number, "right"),
    Column("min offset", "min_offset", number, "right"),
    Column("max offset", "max_offset", number, "right"),
    Column("messages", "message_count", number, "right"),
    Column("first stored (UTC)", "first_store_timestamp", when),
    Column("last stored (UTC)", "last_store_timestamp", when),
)
PROGRESS_COLUMNS = (
    Column("group", "group"),
    Column("topic", "topic"),
    Column("queue", "queue_id", number, "right"),
    Column("committed", "committed_offset", number, "right"),
    Column("max offset", "max_offset", number, "right"),
    Column("lag", "lag", number, "right"),
)


def _store_time(store: MessageStore, topic: str, queue_id: int, queue_offset: int) -> int | None:
    message = next(iter(store.iter_queue(topic, queue_id, queue_offset, queue_offset + 1)), None)
    return None if message is None else message.store_timestamp


def queue_status(store: MessageStore, topic: str, queue_id: int) -> dict[str, Any]:
    """One queue's min/max offsets, message count and first/last store time."""
    low, high = store.min_offset(topic, queue_id), store.max_offset(topic, queue_id)
    return {
        "topic": topic,
        "queue_id": queue_id,
        "min_offset": low,
        "max_offset": high,
        "message_count": high - low,
        "first_store_timestamp": _store_time(store, topic, queue_id, low) if high > low else None,
        "last_store_timestamp": _store_time(store, topic, queue_id, high - 1) if high > low else None,
    }


@click.command()
@store_argument
@click.option("--topic", default=None, help="Only this topic.")
@global_options
def topics(store: Path, topic: str | None) -> None:
    """Topics and queues: min/max offsets, message counts, first/last store time (mqadmin topicStatus)."""
    with open_store(store) as opened:
        if topic is not None:
            require_queue(opened, topic)
        queues = opened.queues()
        rows = [queue_status(opened, name, queue_id)
                for name in sorted(queues) if topic in (None, name)
                for queue_id in sorted(queues[name])]
        low, high = opened.min_phy_offset, opened.max_phy_offset
    total = sum(r["message_count"] for r in rows)
    document = {"min_phy_offset": low, "max_phy_offset": high, "message_count": total, "queues": rows}
    footer = f"{len({r['topic'] for r in rows})} topic(s), {len(rows)} queue(s), {total} message(s); " \
             f"commitlog [{low}, {high})"
    show(document, rows, TOPIC_COLUMNS, footer=footer, empty="no topics")


@click.command()
@store_argument
@click.option("--group", default=None, help="Only this consumer group.")
@global_options
def progress(store: Path, group: str | None) -> None:
    """Committed offsets and lag per consumer group and queue (mqadmin consumerProgress)."""
    with open_store(store) as opened:
        offsets = opened.consumer_offsets()
        if group is not None and group not in offsets:
            known = ", ".join(sorted(offsets)) or "none"
            raise UsageProblem(f"unknown consumer group {group!r} (groups in this store: {known})")
        queues = opened.queues()
        rows: list[dict[str, Any]] = []
        lag = 0
        for name in sorted(offsets):
            if group not in (None, name):
                continue
            for (topic, queue_id), committed in sorted(offsets[name].items()):
                high = opened.max_offset(topic, queue_id) if queue_id in queues.get(topic, ()) else 0
                rows.append({"group": name, "topic": topic, "queue_id": queue_id,
                             "committed_offset": committed, "max_offset": high,
                             "lag": max(high - committed, 0)})
                lag += max(high - committed, 0)
    document = {"groups": rows, "total_lag": lag}
    show(document, rows, PROGRESS_COLUMNS, footer=f"total lag {document['total_lag']}",
         empty="no committed consumer offsets")


COMMANDS = (topics, progress)
