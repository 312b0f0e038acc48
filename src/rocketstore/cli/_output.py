"""Printing results: JSON with `--json`, tables otherwise.

A command builds plain records (dicts with stable snake_case keys) and hands them to `show` with the
columns a table should have; JSON output is those records, unchanged. Messages become records with the
`StoredMessage` field names (`message_record`).

* On a terminal, tables are drawn with rich; on a pipe they are tab-separated text with one header
  line and nothing else (values whole, tabs and newlines escaped as \\t and \\n), as `sqlite3 -tabs`
  prints them; a title, a footer or "nothing found" go to stderr then.
* `--json` prints one JSON document for a command that answers one object, and JSON Lines (one
  record per line, nothing else on stdout) for a command that lists messages or records (`stream`);
  what describes the list (a get's status and next offset, a dump's file header) is one line of JSON
  on stderr, after `rocketstore: `.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from rocketstore.cli._state import state
from rocketstore.cli._timeparse import format_time_ms

if TYPE_CHECKING:
    from rocketstore import StoredMessage

_PIPE_WIDTH = 200  # rich would wrap at 80 columns when stdout is not a terminal
_FLEXIBLE_MIN_WIDTH = 12

# The StoredMessage fields a message record carries, in this order (`raw` is left out: it repeats
# every other field as bytes).
MESSAGE_FIELDS = (
    "topic", "queue_id", "queue_offset", "phy_offset", "size", "msg_id", "uniq_key", "tags", "keys",
    "properties", "body", "body_encoding", "body_crc", "flag", "sys_flag", "born_timestamp", "born_host",
    "store_timestamp", "store_host", "reconsume_times", "prepared_transaction_offset", "magic",
)


def console(*, stderr: bool = False) -> Console:
    """A rich console on stdout (or stderr) that does not wrap tables when piped."""
    out = Console(highlight=False, stderr=stderr)
    if not out.is_terminal and not os.environ.get("COLUMNS", "").isdigit():
        out = Console(highlight=False, stderr=stderr, width=_PIPE_WIDTH)
    return out


def to_jsonable(value: Any) -> Any:
    """Plain JSON values for enums, bytes, tuples and mappings found in library results."""
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    return value


def emit_json(document: Any) -> None:
    click.echo(json.dumps(to_jsonable(document), indent=2, ensure_ascii=False))


def emit_json_line(record: Any) -> None:
    """One record as one line of JSON (JSON Lines)."""
    click.echo(json.dumps(to_jsonable(record), ensure_ascii=False, separators=(",", ":")))


def note(text: str) -> None:
    """A line for the person at the terminal, on stderr (never mixed into the data on stdout)."""
    click.echo(text, err=True)


def _tsv_cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


def tsv(records: Iterable[Mapping[str, Any]], columns: Sequence[Column]) -> None:
    """`records` as tab-separated lines under a header line; whole values (no preview cut)."""
    click.echo("\t".join(column.key for column in columns))
    for record in records:
        cells = []
        for column in columns:
            value = record.get(column.key)
            text = ("" if value is None else str(value)) if column.render is preview else column.render(value)
            cells.append(_tsv_cell(text))
        click.echo("\t".join(cells))


def decode_body(body: bytes) -> tuple[str, str]:
    """(text, encoding): the body as UTF-8 text when it is valid UTF-8, else base64."""
    try:
        return body.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        return base64.b64encode(body).decode("ascii"), "base64"


def message_record(message: StoredMessage) -> dict[str, Any]:
    """A message as a JSON-ready dict keyed by the StoredMessage field names."""
    body, encoding = decode_body(bytes(message.body))
    values = {"body": body, "body_encoding": encoding}
    record: dict[str, Any] = {}
    for name in MESSAGE_FIELDS:
        value = values[name] if name in values else getattr(message, name, None)
        record[name] = to_jsonable(value)
    return record


@dataclass(frozen=True)
class Column:
    """One table column: its header, the record key it shows, and how to print the value."""

    header: str
    key: str
    render: Callable[[Any], str] = lambda value: "" if value is None else str(value)
    justify: str = "left"
    flexible: bool = False
    """Shrinks (with an ellipsis) when the table is too wide; other columns keep their full width."""


def when(timestamp_ms: Any) -> str:
    return format_time_ms(timestamp_ms) if isinstance(timestamp_ms, int) else ""


def preview(text: Any, limit: int = 40) -> str:
    text = "" if text is None else str(text)
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def joined(values: Any) -> str:
    return ",".join(str(v) for v in values) if values else ""


def number(value: Any) -> str:
    return "" if value is None else str(value)


MESSAGE_COLUMNS = (
    Column("queue", "queue_id", number, "right"),
    Column("offset", "queue_offset", number, "right"),
    Column("phy offset", "phy_offset", number, "right"),
    Column("size", "size", number, "right"),
    Column("stored (UTC)", "store_timestamp", when),
    Column("tags", "tags", number),
    Column("keys", "keys", joined, flexible=True),
    Column("msg id", "msg_id", number),
    Column("body", "body", preview, flexible=True),
)


def table(records: Iterable[Mapping[str, Any]], columns: Sequence[Column], title: str | None = None) -> Table:
    rows = [[column.render(record.get(column.key)) for column in columns] for record in records]
    out = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for i, column in enumerate(columns):
        widest = max([len(column.header), *(len(row[i]) for row in rows)])
        out.add_column(column.header, justify=column.justify,  # type: ignore[arg-type]
                       no_wrap=True, overflow="ellipsis",
                       min_width=min(widest, _FLEXIBLE_MIN_WIDTH) if column.flexible else widest)
    for row in rows:
        out.add_row(*row)
    return out


def show(document: Any, records: Sequence[Mapping[str, Any]], columns: Sequence[Column], *,
         title: str | None = None, footer: str | None = None, empty: str = "nothing found",
         stream: bool = False) -> None:
    """Print `document` as JSON with --json (`records` as JSON Lines with `stream`), else `records` as a
    table (and a footer line)."""
    if state().json_output:
        if not stream:
            emit_json(document)
            return
        for record in records:
            emit_json_line(record)
        if isinstance(document, Mapping):  # what describes the list (status, next offset...), on stderr
            about = {k: v for k, v in document.items() if v is not records}
            note(f"rocketstore: {json.dumps(to_jsonable(about), ensure_ascii=False, separators=(',', ':'))}")
        return
    out = console()
    if not out.is_terminal:
        tsv(records, columns)
        if not records:
            note(f"rocketstore: ({empty})")
        if footer:
            note(f"rocketstore: {footer}")
        return
    if records:
        out.print(table(records, columns, title))
    else:
        out.print(f"({empty})" if title is None else f"{title}: ({empty})")
    if footer:
        out.print(footer)


def fields_table(document: Mapping[str, Any], *, title: str | None = None) -> Table:
    """A two-column field/value table; times shown as ISO 8601 UTC with the epoch ms."""
    out = Table(title=title, title_justify="left", show_header=False, show_edge=False, pad_edge=False)
    out.add_column(style="bold")
    out.add_column()
    for key, value in document.items():
        if isinstance(value, int) and not isinstance(value, bool) and key.endswith(("timestamp", "_ms")):
            text = f"{when(value)} ({value})"
        elif isinstance(value, float):
            text = f"{value:.2f}"
        elif isinstance(value, (dict, list, tuple)):
            text = json.dumps(to_jsonable(value), ensure_ascii=False)
        else:
            text = "" if value is None else str(to_jsonable(value))
        out.add_row(key, text)
    return out


def show_fields(document: Mapping[str, Any], *, title: str | None = None) -> None:
    """Print one record as JSON with --json, else as a field/value table (tab-separated on a pipe)."""
    if state().json_output:
        emit_json(document)
        return
    out = console()
    if not out.is_terminal:
        rows = [{"field": key, "value": json.dumps(to_jsonable(value), ensure_ascii=False)
                 if isinstance(value, (dict, list, tuple)) else "" if value is None else str(to_jsonable(value))}
                for key, value in document.items()]
        tsv(rows, (Column("field", "field"), Column("value", "value")))
        return
    out.print(fields_table(document, title=title))
