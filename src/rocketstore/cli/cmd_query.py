"""Point lookups: by key, by message id, by physical offset, and a queue offset by time."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from rocketstore.cli._errors import UsageProblem
from rocketstore.cli._output import MESSAGE_COLUMNS, message_record, show, show_fields
from rocketstore.cli._state import global_options, open_store, option, require_queue, store_argument
from rocketstore.cli._timeparse import TIME

_NOT_FOUND = (LookupError, ValueError)  # what the store raises for an id or offset it has no message for


@click.command("query-key")
@store_argument
@click.option("--topic", required=True, help="Topic of the key.")
@click.option("--key", required=True, help="A KEYS token or a UNIQ_KEY.")
@click.option("--begin", "begin_ms", type=TIME, default=0, help="Stored at or after TIME (epoch ms or ISO 8601).")
@click.option("--end", "end_ms", type=TIME, default=None, help="Stored at or before TIME.")
@option("--count", "max_count", aliases=("--max",), type=click.IntRange(min=1), default=64, show_default=True,
        help="At most this many (the newest), capped by the store's max_query_results.")
@click.option("--as-rocketmq", "as_rocketmq", is_flag=True,
              help="Answer exactly as RocketMQ's queryMessage: every message whose key hash matches "
                   "(collisions included), time bounds checked to the second.")
@global_options
def query_key(store: Path, topic: str, key: str, begin_ms: int, end_ms: int | None, max_count: int,
              as_rocketmq: bool) -> None:
    """Messages carrying KEY (a KEYS token or a UNIQ_KEY), from the index (mqadmin queryMsgByKey,
    queryMsgByUniqueKey)."""
    if end_ms is not None and end_ms < begin_ms:
        raise UsageProblem("--end is before --begin")
    with open_store(store) as opened:
        require_queue(opened, topic)
        if as_rocketmq:
            found = [opened.message_at(phy) for phy in opened.index_lookup(topic, key, max_count=max_count,
                                                                           begin_ms=begin_ms, end_ms=end_ms)]
        else:
            found = opened.query(topic, key, max_count=max_count, begin_ms=begin_ms, end_ms=end_ms)
    document: dict[str, Any] = {
        "topic": topic, "key": key, "begin_ms": begin_ms, "end_ms": end_ms, "max_count": max_count,
        "as_rocketmq": as_rocketmq, "messages": [message_record(m) for m in found],
    }
    show(document, document["messages"], MESSAGE_COLUMNS, title=f"{topic} key {key!r}",
         footer=f"{len(found)} message(s)", empty="no message carries this key", lines=True)


@click.command("query-id")
@store_argument
@click.argument("msg_id")
@global_options
def query_id(store: Path, msg_id: str) -> None:
    """The message with offset message id MSG_ID (mqadmin queryMsgById)."""
    from rocketstore.errors import FormatError
    from rocketstore.format.msgid import decode_msg_id

    text = msg_id.strip().upper()
    try:
        decode_msg_id(text)
    except FormatError as exc:
        raise UsageProblem(f"malformed message id: {exc}") from exc
    with open_store(store) as opened:
        try:
            message = opened.message_by_id(text)
        except _NOT_FOUND as exc:
            raise UsageProblem(f"no message with id {text}: {exc}") from exc
    show_fields(message_record(message), title=f"message {text}")


@click.command("query-offset")
@store_argument
@click.argument("phy_offset", type=click.IntRange(min=0))
@global_options
def query_offset(store: Path, phy_offset: int) -> None:
    """The message whose record starts at commitlog offset PHY_OFFSET (mqadmin queryMsgById, with the
    offset an offset message id holds)."""
    from rocketstore.errors import FormatError

    with open_store(store) as opened:
        low, high = opened.min_phy_offset, opened.max_phy_offset
        if not low <= phy_offset < high:
            raise UsageProblem(f"physical offset {phy_offset} is outside the commitlog [{low}, {high})")
        try:
            message = opened.message_at(phy_offset)
        except (*_NOT_FOUND, FormatError) as exc:
            raise UsageProblem(f"no message record starts at physical offset {phy_offset}: {exc}") from exc
    show_fields(message_record(message), title=f"message at {phy_offset}")


@click.command("offset-by-time")
@store_argument
@click.option("--topic", required=True, help="Topic.")
@click.option("--queue", "queue_id", type=click.IntRange(min=0), required=True, help="Queue id.")
@click.option("--time", "timestamp_ms", type=TIME, required=True, help="Epoch ms or ISO 8601.")
@global_options
def offset_by_time(store: Path, topic: str, queue_id: int, timestamp_ms: int) -> None:
    """The first queue offset stored at or after TIME (the lookup of mqadmin resetOffsetByTime)."""
    with open_store(store) as opened:
        require_queue(opened, topic, queue_id)
        queue_offset = opened.offset_by_time(topic, queue_id, timestamp_ms)
        stored = None
        if opened.min_offset(topic, queue_id) <= queue_offset < opened.max_offset(topic, queue_id):
            stored = next(iter(opened.iter_queue(topic, queue_id, queue_offset, queue_offset + 1)), None)
    show_fields({
        "topic": topic, "queue_id": queue_id, "timestamp_ms": timestamp_ms, "queue_offset": queue_offset,
        "store_timestamp": stored.store_timestamp if stored is not None else None,
    })


COMMANDS = (query_key, query_id, query_offset, offset_by_time)
