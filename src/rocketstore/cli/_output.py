r"""Printing results: tables for a terminal, tab-separated text for a pipe, JSON with `--json`.

A command builds plain records (dicts with stable snake_case keys) and hands them to `show` with the
columns a table should have; JSON output is those records, unchanged. Messages become records with the
`StoredMessage` field names (`message_record`).

| stdout          | records (`show`)                        | one record (`show_fields`)        |
|-----------------|-----------------------------------------|-----------------------------------|
| a terminal      | a rich table, title above, footer below | a field/value table               |
| a pipe or file  | TSV: one header line, one line a record | TSV: `field<TAB>value` lines      |
| `--json`        | JSON Lines (`lines=True`) or a document | one JSON document                 |

In a pipe and with JSON Lines, stdout carries only data: the title is left out and the footer (counts,
where to go on) goes to stderr. A TSV cell escapes backslash, tab, newline and carriage return as `\\`,
`\t`, `\n`, `\r` (the text format of PostgreSQL's COPY), so every record stays one line.
"""

from __future__ import annotations

import base64
import json
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

import click
from rich.console import Console
from rich.table import Table

from rocketstore.cli._state import state
from rocketstore.format.times import format_time_ms

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


def json_line(record: Any) -> str:
    """One record as one line of JSON (JSON Lines)."""
    return json.dumps(to_jsonable(record), ensure_ascii=False)


def emit_json_lines(records: Iterable[Any]) -> None:
    """Each record as one line of JSON, flushed as it goes."""
    for record in records:
        click.echo(json_line(record))
    sys.stdout.flush()


def piped() -> bool:
    """True when stdout is not a terminal: tables print as tab-separated text."""
    return not sys.stdout.isatty()


_TSV_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def tsv_line(cells: Iterable[str]) -> str:
    """Cells joined by tabs, each escaped so that the line holds exactly one record."""
    return "\t".join(cell.translate(_TSV_ESCAPES) for cell in cells)


def tsv_header(columns: Sequence[Column]) -> str:
    return tsv_line(column.header for column in columns)


def tsv_row(record: Mapping[str, Any], columns: Sequence[Column]) -> str:
    return tsv_line(column.plain(record.get(column.key)) for column in columns)


def note(text: str | None) -> None:
    """A line beside the data (a footer, a count, where to go on): stderr when stdout carries data for
    a program (a pipe, JSON Lines), else stdout."""
    if text:
        click.echo(text, err=piped() or state().json_output)


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
    full: Callable[[Any], str] | None = None
    """How the value prints in tab-separated text when `render` shortens it (default: `render`)."""

    def plain(self, value: Any) -> str:
        """The value as a TSV cell: never shortened."""
        return (self.full or self.render)(value)


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


def text(value: Any) -> str:
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
    Column("body", "body", preview, flexible=True, full=text),
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
         lines: bool = False) -> None:
    """Print `records` as a table (TSV in a pipe) with a footer line; with --json, `document` as one JSON
    document, or with `lines` the records as JSON Lines (the footer then goes to stderr)."""
    if state().json_output:
        if lines:
            emit_json_lines(records)
            note(footer)
        else:
            emit_json(document)
        return
    if piped():
        click.echo(tsv_header(columns))
        for record in records:
            click.echo(tsv_row(record, columns))
        note(footer if records else f"({empty})" + (f"; {footer}" if footer else ""))
        return
    out = console()
    if records:
        out.print(table(records, columns, title))
    else:
        out.print(f"({empty})" if title is None else f"{title}: ({empty})")
    if footer:
        out.print(footer)


def field_text(key: str, value: Any) -> str:
    """A field's value as a field/value table shows it; times as ISO 8601 UTC with the epoch ms."""
    if isinstance(value, int) and not isinstance(value, bool) and key.endswith(("timestamp", "_ms")):
        return f"{when(value)} ({value})"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(to_jsonable(value), ensure_ascii=False)
    return "" if value is None else str(to_jsonable(value))


FIELD_COLUMNS = (Column("field", "field"), Column("value", "value"))


def fields_table(document: Mapping[str, Any], *, title: str | None = None) -> Table:
    """A two-column field/value table; times shown as ISO 8601 UTC with the epoch ms."""
    out = Table(title=title, title_justify="left", show_header=False, show_edge=False, pad_edge=False)
    out.add_column(style="bold")
    out.add_column()
    for key, value in document.items():
        out.add_row(key, field_text(key, value))
    return out


def show_fields(document: Mapping[str, Any], *, title: str | None = None) -> None:
    """Print one record as JSON with --json, else as a field/value table (TSV `field<TAB>value` lines,
    under a header line, in a pipe)."""
    if state().json_output:
        emit_json(document)
        return
    if piped():
        click.echo(tsv_header(FIELD_COLUMNS))
        for key, value in document.items():
            click.echo(tsv_line((key, field_text(key, value))))
        return
    console().print(fields_table(document, title=title))
