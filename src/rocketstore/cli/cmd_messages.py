"""`put` and `get`: feed a store from the shell and read a queue (mqadmin sendMessage / consumeMessage)."""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rocketstore.cli._errors import ProblemsFound, UsageProblem
from rocketstore.cli._output import (
    MESSAGE_COLUMNS,
    Column,
    console,
    json_line,
    message_record,
    note,
    number,
    piped,
    show,
    tsv_header,
    tsv_row,
)
from rocketstore.cli._state import global_options, open_store, require_queue, state, store_argument

if TYPE_CHECKING:
    from rocketstore import Message, MessageStore, PutResult

_LINE_BATCH = 256  # messages per put_batch call for --lines

PUT_COLUMNS = (
    Column("status", "status"),
    Column("topic", "topic"),
    Column("queue", "queue_id", number, "right"),
    Column("offset", "queue_offset", number, "right"),
    Column("phy offset", "phy_offset", number, "right"),
    Column("size", "size", number, "right"),
    Column("msg id", "msg_id"),
)


def _parse_properties(pairs: Sequence[str]) -> dict[str, str]:
    properties: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageProblem(f"--property wants NAME=VALUE, got {pair!r}")
        properties[name] = value
    return properties


def _split_keys(keys: str | None) -> tuple[str, ...]:
    return tuple(k.strip() for k in keys.split(",") if k.strip()) if keys else ()


def _read_body(body: str | None, file: Path | None) -> bytes:
    if body is not None:
        return body.encode("utf-8")
    assert file is not None
    if str(file) == "-":
        return sys.stdin.buffer.read()
    try:
        return file.read_bytes()
    except OSError as exc:
        raise UsageProblem(f"cannot read --file {file}: {exc.strerror}") from exc


def _precheck(store: Path, message: Message) -> None:
    """Reject an invalid message before the store is opened for writing (a writable open runs recovery
    and records the store's geometry: bad input must not write a byte).

    Raises:
        InvalidMessageError: the store would refuse the message.
        UsageProblem: the options' geometry does not fit the store's files.
    """
    from rocketstore import MessageStore
    from rocketstore.cli._geometry import geometry_for

    config = geometry_for(store, read_only=False)  # refuses a geometry the store's files contradict
    with tempfile.TemporaryDirectory(prefix="rocketstore-check-") as empty:
        where = store if (store / "commitlog").is_dir() else Path(empty)
        with MessageStore.open(where, config, read_only=True) as reader:
            reader.check_message(message)


def _result_record(message: Message, result: PutResult) -> dict[str, Any]:
    return {
        "status": result.status.name,
        "topic": message.topic,
        "queue_id": message.queue_id,
        "queue_offset": result.queue_offset,
        "phy_offset": result.phy_offset,
        "size": result.size,
        "msg_id": result.msg_id,
        "store_timestamp": result.store_timestamp,
    }


def _stdin_lines() -> Iterator[bytes]:
    """The non-empty lines of standard input, without their line ends."""
    for line in sys.stdin.buffer:
        line = line.rstrip(b"\r\n")
        if line:
            yield line


def _put_lines(store: MessageStore, make: Callable[[bytes], Message],
               written: Callable[[list[dict[str, Any]]], None]) -> list[dict[str, Any]]:
    """Put one message per line of standard input, in batches, with a progress bar on stderr; each
    batch's results go to `written` as soon as the store answered them."""
    records: list[dict[str, Any]] = []
    columns = (TextColumn("putting"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console(stderr=True), transient=True) as progress:
        task = progress.add_task("put", total=None)
        batch: list[Message] = []

        def put_batch() -> None:
            done = [_result_record(m, r) for m, r in zip(batch, store.put_batch(batch), strict=True)]
            written(done)
            records.extend(done)
            progress.advance(task, len(batch))
            batch.clear()

        for line in _stdin_lines():
            batch.append(make(line))
            if len(batch) == _LINE_BATCH:
                put_batch()
        if batch:
            put_batch()
    return records


@click.command()
@store_argument
@click.option("--topic", required=True, help="Topic to put to.")
@click.option("--queue", "queue_id", type=click.IntRange(min=0), default=0, show_default=True,
              help="Queue id.")
@click.option("--tags", default=None, help="The message's TAGS.")
@click.option("--keys", default=None, help="Comma-separated KEYS (K1,K2).")
@click.option("--property", "properties", multiple=True, metavar="NAME=VALUE",
              help="A user property; repeat for more.")
@click.option("--body", default=None, help="Body text (UTF-8).")
@click.option("--file", type=click.Path(dir_okay=False, allow_dash=True, path_type=Path), default=None,
              help="Read the body from a file ('-' = standard input).")
@click.option("--lines", is_flag=True, help="One message per non-empty line of standard input.")
@global_options
def put(store: Path, topic: str, queue_id: int, tags: str | None, keys: str | None,
        properties: tuple[str, ...], body: str | None, file: Path | None, lines: bool) -> None:
    """Put messages into STORE (mqadmin sendMessage).

    Creates the store when STORE is missing or an empty folder. Exactly one of --body, --file and
    --lines says where the body comes from.
    """
    from rocketstore import Message

    if sum(x is not None and x is not False for x in (body, file, lines)) != 1:
        raise UsageProblem("give exactly one of --body, --file and --lines")
    extra = _parse_properties(properties)

    def make(payload: bytes) -> Message:
        return Message(topic, payload, queue_id=queue_id, tags=tags, keys=_split_keys(keys),
                       properties=dict(extra) or None)

    first = None if lines else make(_read_body(body, file))  # read input before touching the store
    _precheck(store, first or make(b""))
    streamed = lines and (state().json_output or piped())  # JSON Lines, TSV: each batch as it is written
    if streamed and not state().json_output:
        click.echo(tsv_header(PUT_COLUMNS))

    def written(records: list[dict[str, Any]]) -> None:
        if streamed:
            for record in records:
                click.echo(json_line(record) if state().json_output else tsv_row(record, PUT_COLUMNS))
            sys.stdout.flush()

    with open_store(store, read_only=False) as opened:
        if first is None:
            records = _put_lines(opened, make, written)
        else:
            records = [_result_record(first, opened.put(first))]
    if streamed:
        note(f"{len(records)} message(s) put" if records else "(no lines on standard input)")
    else:
        show(records[0] if records and not lines else records, records, PUT_COLUMNS,
             empty="no lines on standard input")
    failed = [r for r in records if r["status"] != "PUT_OK"]
    if failed:
        raise ProblemsFound(f"{len(failed)} of {len(records)} puts returned {failed[0]['status']}")


def _read_queue(store: MessageStore, topic: str, queue_id: int, offset: int, count: int,
                tags: str | None, as_rocketmq: bool) -> dict[str, Any]:
    """Up to `count` messages from `offset`, in as many `get` calls as the store's cap needs (one call
    that stops at a consume-queue file end, as RocketMQ's getMessage, with `as_rocketmq`)."""
    first = result = store.get(topic, queue_id, offset, max_count=count, tags=tags, stop_at_file_end=as_rocketmq)
    messages = list(result.messages)
    while (not as_rocketmq and len(messages) < count and result.next_offset > offset
           and result.next_offset < result.max_offset):
        offset = result.next_offset
        result = store.get(topic, queue_id, offset, max_count=count - len(messages), tags=tags)
        messages += result.messages
    return {
        "topic": topic,
        "queue_id": queue_id,
        "status": first.status.name,
        "next_offset": result.next_offset,
        "min_offset": result.min_offset,
        "max_offset": result.max_offset,
        "messages": [message_record(m) for m in messages],
    }


def _follow(store_path: Path, topic: str, queue_id: int, offset: int, tags: str | None,
            interval_s: float) -> None:
    """Print new messages as they arrive, like `tail -f`, until Ctrl-C (SIGINT); reopens the store
    read-only each poll. Ctrl-C only asks the loop to stop: it is never raised inside the store's code,
    where it could leave a lock taken and the close waiting for it."""
    as_json, as_tsv = state().json_output, piped()
    out = console()
    stopping = False
    if as_tsv and not as_json:
        click.echo(tsv_header(MESSAGE_COLUMNS))

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    previous = signal.signal(signal.SIGINT, stop)
    try:
        while not stopping:
            with open_store(store_path) as store:
                while not stopping:
                    result = store.get(topic, queue_id, offset, tags=tags)
                    for message in result.messages:
                        record = message_record(message)
                        if as_json:
                            click.echo(json_line(record))
                        elif as_tsv:
                            click.echo(tsv_row(record, MESSAGE_COLUMNS))
                        else:
                            out.print(" ".join(c.render(record.get(c.key)) for c in MESSAGE_COLUMNS[1:]))
                    if result.next_offset <= offset:
                        break
                    offset = result.next_offset
            sys.stdout.flush()
            wake = time.monotonic() + interval_s
            while not stopping and (left := wake - time.monotonic()) > 0:
                time.sleep(min(left, 0.1))  # a sleep goes on after the handler (PEP 475): look every 0.1 s
    finally:
        signal.signal(signal.SIGINT, previous)


@click.command()
@store_argument
@click.option("--topic", required=True, help="Topic to read.")
@click.option("--queue", "queue_id", type=click.IntRange(min=0), required=True, help="Queue id.")
@click.option("--offset", type=click.IntRange(min=0), default=None,
              help="First queue offset (default: the queue's min offset; with --follow its max).")
@click.option("--count", type=click.IntRange(min=1), default=32, show_default=True,
              help="At most this many messages.")
@click.option("--tags", default=None, metavar="EXPR", help="Tag filter, e.g. 'TagA || TagB'.")
@click.option("--as-rocketmq", "as_rocketmq", is_flag=True,
              help="Answer exactly as RocketMQ's getMessage: one call, at most 32 messages, stopping at a "
                   "consume-queue file end.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new messages.")
@click.option("--interval", type=click.FloatRange(min=0.01), default=0.5, show_default=True,
              help="Seconds between polls with --follow.")
@global_options
def get(store: Path, topic: str, queue_id: int, offset: int | None, count: int, tags: str | None,
        as_rocketmq: bool, follow: bool, interval: float) -> None:
    """Read messages of one queue from a queue offset (mqadmin queryMsgByOffset, printMsgByQueue)."""
    with open_store(store) as opened:
        require_queue(opened, topic, queue_id)
        if offset is None:
            offset = opened.max_offset(topic, queue_id) if follow else opened.min_offset(topic, queue_id)
        if not follow:
            document = _read_queue(opened, topic, queue_id, offset, count, tags, as_rocketmq)
    if follow:
        _follow(store, topic, queue_id, offset, tags, interval)  # Ctrl-C is how it ends, as with tail -f
        return
    footer = (f"status {document['status']}, next offset {document['next_offset']}, "
              f"queue offsets [{document['min_offset']}, {document['max_offset']})")
    show(document, document["messages"], MESSAGE_COLUMNS, title=f"{topic}/{queue_id}", footer=footer,
         empty="no messages", lines=True)


COMMANDS = (put, get)
