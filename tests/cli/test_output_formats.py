"""Output that fits a pipe: TSV with one header line when stdout is not a terminal, JSON Lines for
commands that list messages or records, one flag name per idea (older names kept, hidden)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from .cliharness import BOX_CHARACTERS, ORDERS_LINES

LISTING_COMMANDS = [  # (arguments after STORE, expected records)
    (["get", "--topic", "Orders", "--queue", "0", "--count", "100"], 20),
    (["query-key", "--topic", "Orders", "--key", "orders", "--count", "100"], 40),
    (["dump", "consumequeue/Orders/1/00000000000000000000", "--count", "20"], 20),
]


@pytest.mark.parametrize("args,count", LISTING_COMMANDS, ids=[a[0] for a, _ in LISTING_COMMANDS])
def test_listing_commands_print_tsv_in_a_pipe(cli, small_store: Path, args, count):
    result = cli(args[0], small_store, *args[1:])
    assert result.code == 0, result.err
    assert not set(result.out) & BOX_CHARACTERS
    header, *rows = result.out.splitlines()
    names = header.split("\t")
    assert len(rows) == count and ("pos" in names or "offset" in names)
    assert all(len(row.split("\t")) == len(names) for row in rows), "one record a line, one cell a column"
    assert all(cell == cell.strip() for row in rows for cell in row.split("\t")), "no padding"


def test_tsv_cells_are_whole_and_escaped(cli, small_store: Path):
    body = 'tab\there, new\nline, back\\slash and a long tail ' + "x" * 80
    assert cli("put", small_store, "--topic", "Notes", "--body", body).code == 0
    (row,) = cli("get", small_store, "--topic", "Notes", "--queue", "0").tsv()
    assert row["body"] == body.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n"), "not shortened"
    assert row["offset"] == "0" and row["queue"] == "0"


@pytest.mark.parametrize("args", [a for a, _ in LISTING_COMMANDS], ids=[a[0] for a, _ in LISTING_COMMANDS])
def test_listing_commands_stream_json_lines(cli, small_store: Path, args):
    result = cli(args[0], small_store, *args[1:], "--json")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    assert len(lines) >= 20
    records = [json.loads(line) for line in lines]  # each line parses alone
    assert all(isinstance(record, dict) for record in records)


def test_put_lines_streams_one_result_a_line(cli, small_store: Path):
    lines = "".join(f"n{n}\n" for n in range(600))  # more than one batch of 256
    result = cli("put", small_store, "--topic", "Orders", "--queue", "0", "--lines", "--json", stdin=lines)
    records = result.json_lines()
    assert [r["queue_offset"] for r in records] == list(range(20, 620))
    assert {r["status"] for r in records} == {"PUT_OK"} and "600 message(s) put" in result.err
    table = cli("put", small_store, "--topic", "Orders", "--queue", "0", "--lines", stdin="a\nb\n").tsv()
    assert [(r["status"], r["offset"]) for r in table] == [("PUT_OK", "620"), ("PUT_OK", "621")]


def test_commands_that_answer_one_object_print_one_document(cli, small_store: Path):
    put = cli("put", small_store, "--topic", "Audit", "--body", "one", "--json").json()
    assert put["status"] == "PUT_OK"
    found = cli("query-id", small_store, put["msg_id"], "--json").json()
    assert found["body"] == "one"
    fields = cli("query-id", small_store, put["msg_id"]).tsv()
    assert {"field": "body", "value": "one"} in fields


def test_get_footer_goes_to_stderr_beside_the_data(cli, small_store: Path):
    result = cli("get", small_store, "--topic", "Orders", "--queue", "1", "--count", "3", "--json")
    assert [m["body"] for m in result.json_lines()] == ORDERS_LINES[1:7:2]
    assert re.search(r"status FOUND, next offset 3, queue offsets \[0, 20\)", result.err)


HIDDEN_ALIASES = [("query-key", "--max", "--count"), ("export", "--topics", "--topic")]


@pytest.mark.parametrize("command,old,new", HIDDEN_ALIASES)
def test_renamed_flags_are_hidden_from_help(cli, command, old, new):
    shown = cli(command, "--help")
    assert shown.code == 0
    assert re.search(rf"^\s+{new}\b", shown.out, re.MULTILINE), shown.out
    assert old not in shown.out


def test_a_hidden_alias_still_works(cli, small_store: Path):
    by_alias = cli("query-key", small_store, "--topic", "Orders", "--key", "orders", "--max", "5", "--json")
    by_name = cli("query-key", small_store, "--topic", "Orders", "--key", "orders", "--count", "5", "--json")
    assert by_alias.json_lines() == by_name.json_lines() and len(by_name.json_lines()) == 5
    bad = cli("query-key", small_store, "--topic", "Orders", "--key", "orders", "--max", "0")
    assert bad.code == 2 and "'--count'" in bad.err and "--max" not in bad.err.replace("--max-", "")
