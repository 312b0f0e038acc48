"""`rocketstore sql STORE "SELECT ..."`: SQL over the table `messages` of one store or a glob of stores,
run by DuckDB (`rocketstore.sql`)."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

import click

from rocketstore.cli._errors import UsageProblem
from rocketstore.cli._output import Column, preview, show
from rocketstore.cli._state import global_options, state

# StoreConfig geometry field -> the read option that gives it.
_GEOMETRY_OPTION = {
    "commitlog_file_size": "commitlogFileSize",
    "consume_queue_file_entries": "consumeQueueFileEntries",
    "index_hash_slots": "indexHashSlots",
    "index_max_entries": "indexMaxEntries",
}


def _options(pairs: tuple[str, ...]) -> dict[str, str]:
    """`-o NAME=VALUE` pairs and the global geometry flags as read options."""
    options = {_GEOMETRY_OPTION[name]: str(value) for name, (value, _) in state().explicit_geometry().items()}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise UsageProblem(f"--option takes NAME=VALUE (a read option, e.g. topics=TopicA), got {pair!r}")
        options[name.strip()] = value
    return options


def _cell(value: Any) -> Any:
    """A result value as JSON takes it: maps as objects, bytes as UTF-8 text when they are, else base64."""
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, list):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):
            return {str(k): _cell(v) for k, v in value}  # an Arrow map
        return [_cell(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _cell(v) for k, v in value.items()}
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


@click.command("sql")
@click.argument("store")
@click.argument("query")
@click.option("-o", "--option", "pairs", multiple=True, metavar="NAME=VALUE",
              help="A read option of the table (as rocketstore.arrow.read and Spark's source take them: "
                   "topics, scan, startingTimestamp, ...); repeatable.")
@click.option("--explain", is_flag=True,
              help="After the rows, say on stderr what each scan of the stores was given by DuckDB and what "
                   "it pushed into the read.")
@global_options
def sql(store: str, query: str, pairs: tuple[str, ...], explain: bool) -> None:
    """Run QUERY (DuckDB's SQL) over the table `messages`: the messages of STORE (a store directory,
    comma-separated directories or a glob of them, quoted), one row per message with the columns of
    the Spark source. Needs the `sql` extra (pip install 'rocketstore[sql]')."""
    import rocketstore.sql as engine
    from rocketstore.errors import InvalidArgumentError

    options = _options(pairs)
    try:
        dataset = engine.MessagesDataset(store, options)
    except InvalidArgumentError as exc:
        raise UsageProblem(str(exc)) from exc
    duckdb = engine.duckdb_module()
    con = duckdb.connect()
    try:
        con.register(engine.TABLE, dataset)
        try:
            result = con.sql(query)
            table = None if result is None else result.to_arrow_table()
        except duckdb.Error as exc:
            raise UsageProblem(f"SQL: {' '.join(str(exc).split())}") from exc
    finally:
        con.close()
    names = [] if table is None else table.column_names
    records = [] if table is None else [{k: _cell(v) for k, v in row.items()} for row in table.to_pylist()]
    columns = [Column(name, name, lambda v: preview(_text(v), 60), flexible=True, full=_text) for name in names]
    show({"rows": records}, records, columns, footer=f"{len(records)} row(s)", empty="no rows", lines=True)
    if explain:
        for i, scan in enumerate(dataset.scans, 1):
            wanted = "every column" if scan.columns is None else ", ".join(scan.columns)
            click.echo(f"scan {i}: columns {wanted}; DuckDB's filter: {scan.filter or 'none'}; "
                       f"pushed into the read: {engine.describe(scan.pushed)}", err=True)
