"""`verify` and `dump`: check every byte of a store, or decode one of its files with annotations."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import click

from rocketstore.cli._errors import ProblemsFound, UsageProblem
from rocketstore.cli._output import (
    Column,
    console,
    emit_json_lines,
    field_text,
    fields_table,
    note,
    number,
    piped,
    show,
    show_fields,
    when,
)
from rocketstore.cli._state import check_store_dir, global_options, state, store_argument, store_config_of

PROBLEM_COLUMNS = (Column("file", "file"), Column("pos", "pos", number, "right"), Column("problem", "message"))


@click.command()
@store_argument
@global_options
def verify(store: Path) -> None:
    """Check every commitlog record (CRC, lengths, physical offsets), every consume-queue entry and every
    index entry against the log; list each problem with its file and byte position; exit 1 if any.

    Safe beside a live writer: the store is checked as of the log's end read first; what the writer adds
    meanwhile is counted as newer than the snapshot in the summary, not checked and never a problem.

    mqadmin has no equivalent (RocketMQ checks records only while recovering, and stops at the first bad one).
    """
    from rocketstore.report.verify import verify_store

    check_store_dir(store)
    result = verify_store(store, store_config_of(store))
    document = result.to_dict()
    summary = (f"{result.commitlog_files} commitlog file(s), {result.records} record(s), "
               f"{result.blank_records} blank; commitlog [{result.min_phy_offset}, {result.max_phy_offset}); "
               f"{result.consume_queues} consume queue(s), {result.cq_entries} entries; "
               f"{result.index_files} index file(s), {result.index_entries} entries")
    if result.undispatched:
        summary += (f"; {result.undispatched} record(s) at the end of the log, from {result.undispatched_from}, not "
                    "dispatched yet (in no queue or index: the next writable open dispatches them)")
    if result.log_grew:
        summary += (f"; the log grew past {result.snapshot_end} while verify ran: the records from there on and "
                    "the entries pointing at them are newer than the snapshot, not checked")
    if result.newer:
        summary += (f"; newer than the snapshot (written while verify ran): {result.newer_queue_entries} queue "
                    f"entries, {result.newer_index_entries} index entries")
    show(document, document["problems"], PROBLEM_COLUMNS, title="problems", footer=summary,
         empty="none: the store is consistent")
    if not result.ok:
        raise ProblemsFound(f"{len(result.problems)} problem(s) found in {store}")


def _item_columns(kind: str) -> tuple[Column, ...]:
    pos = Column("pos", "pos", number, "right")
    if kind == "consumequeue":
        return (pos, Column("kind", "kind"), Column("queue offset", "queue_offset", number, "right"),
                Column("phy offset", "phy_offset", number, "right"), Column("size", "size", number, "right"),
                Column("tags code", "tags_code", number, "right"))
    if kind == "index":
        return (pos, Column("kind", "kind"), Column("slot", "slot", number, "right"),
                Column("entry", "entry", number, "right"), Column("key hash", "key_hash", number, "right"),
                Column("phy offset", "phy_offset", number, "right"), Column("time (UTC)", "timestamp", when),
                Column("prev", "prev_entry", number, "right"))
    return (pos, Column("kind", "kind"), Column("size", "size", number, "right"),
            Column("phy offset", "phy_offset", number, "right"), Column("topic", "topic"),
            Column("queue", "queue_id", number, "right"), Column("offset", "queue_offset", number, "right"),
            Column("stored (UTC)", "store_timestamp", when), Column("crc ok", "body_crc_ok", _yes_no),
            Column("notes", "reason", number))


def _yes_no(value: Any) -> str:
    return "" if value is None else ("yes" if value else "NO")


@click.command()
@store_argument
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--at", "at", type=click.IntRange(min=0), default=0, show_default=True,
              help="Byte position in FILE to start decoding at.")
@click.option("--count", type=click.IntRange(min=1), default=50, show_default=True,
              help="At most this many records or entries.")
@click.option("--verbose", "-v", is_flag=True, help="Every field of every commitlog record.")
@global_options
def dump(store: Path, file: Path, at: int, count: int, verbose: bool) -> None:
    """Annotated decode of one store FILE (a commitlog, consume-queue, index or checkpoint file),
    each record or entry with its byte position: the hex dump operators reach for, knowing the layouts
    (mqadmin has no equivalent).

    FILE may be given relative to STORE (commitlog/00000000000000000000).
    """
    from rocketstore.report.dump import DumpError, dump_file

    check_store_dir(store)
    path = file if file.is_absolute() or file.exists() else store / file
    if not path.is_file():
        raise UsageProblem(f"no such file: {file}")
    try:
        document = dump_file(store, path, at=at, count=count,
                             index_hash_slots=store_config_of(store).index_hash_slots)
    except DumpError as exc:
        raise UsageProblem(str(exc)) from exc
    _show_dump(document, verbose)


def _dump_lines(document: dict[str, Any]) -> list[dict[str, Any]]:
    """What `dump --json` streams: the file's header (if it has one) as a record of kind `header` at
    byte 0, then each item."""
    header = [{"kind": "header", "pos": 0, **document["header"]}] if "header" in document else []
    return header + list(document["items"])


def _more(document: dict[str, Any]) -> str | None:
    at = document.get("next_pos")
    return None if at is None else f"more from byte {at} (--at {at})"


def _show_dump(document: dict[str, Any], verbose: bool) -> None:
    if state().json_output:
        emit_json_lines(_dump_lines(document))
        note(_more(document))
        return
    if piped():  # the items (the checkpoint: its fields) as TSV; the header beside them on stderr
        if document["kind"] == "checkpoint":
            show_fields(document["header"])
            return
        for key, value in document.get("header", {}).items():
            click.echo(f"{key}\t{field_text(key, value)}", err=True)
        columns = _item_columns(document["kind"])
        if verbose and document["kind"] == "commitlog":  # every field of every record
            names = dict.fromkeys(key for item in document["items"] for key in item)
            columns = tuple(Column(key, key, functools.partial(field_text, key)) for key in names)
        show(document, document["items"], columns, footer=_more(document))
        return
    out = console()
    if "header" in document:
        title = f"{document['file']} ({document['kind']}, {document['file_size']} bytes)"
        out.print(fields_table(document["header"], title=title))
    if document["kind"] == "checkpoint":
        return
    if verbose and document["kind"] == "commitlog":
        for item in document["items"]:
            out.print(fields_table(item, title=f"@{item['pos']} {item['kind']}"))
    else:
        show(document, document["items"], _item_columns(document["kind"]),
             title=f"{document['file']} from byte {document['at']}")
    if document["next_pos"] is not None:
        out.print(f"more from byte {document['next_pos']} (--at {document['next_pos']})")


COMMANDS = (verify, dump)
