"""Output that fits a pipe: tab-separated tables with one header line, JSON Lines for listings."""

from __future__ import annotations

import json

from .cliharness import ORDERS_LINES

BOX = set("│┃━─╇┼┏┓┗┛╭╮╰╯")


def test_a_table_on_a_pipe_is_tab_separated_under_one_header(cli, small_store):
    result = cli("get", small_store, "--topic", "Orders", "--queue", "1")
    assert result.code == 0, result.err
    lines = result.out.splitlines()
    header = lines[0].split("\t")
    assert header[:4] == ["queue_id", "queue_offset", "phy_offset", "size"] and "body" in header
    rows = [line.split("\t") for line in lines[1:]]
    assert len(rows) == 20 and all(len(row) == len(header) for row in rows)
    assert [row[header.index("body")] for row in rows] == ORDERS_LINES[1::2]  # whole values, no preview cut
    assert not BOX & set(result.out) and "  " not in result.out
    assert "status FOUND" in result.err  # the footer goes to stderr


def test_a_field_table_on_a_pipe_is_field_tab_value(cli, small_store):
    result = cli("query-offset", small_store, "0")
    assert result.code == 0, result.err
    lines = [line.split("\t") for line in result.out.splitlines()]
    assert lines[0] == ["field", "value"] and all(len(line) == 2 for line in lines)
    assert dict(lines[1:])["topic"] == "Orders"


def test_listings_print_json_lines_and_single_answers_one_document(cli, small_store):
    got = cli("get", small_store, "--topic", "Orders", "--queue", "0", "--count", "5", "--json")
    records = [json.loads(line) for line in got.out.splitlines()]
    assert [r["queue_offset"] for r in records] == [0, 1, 2, 3, 4]
    about = json.loads(got.err.strip().splitlines()[-1].removeprefix("rocketstore: "))
    assert (about["status"], about["next_offset"]) == ("FOUND", 5)
    found = cli("query-key", small_store, "--topic", "Orders", "--key", "orders", "--count", "3", "--json")
    assert len(found.json_lines()) == 3
    one = cli("query-offset", small_store, "0", "--json").json()
    assert one["topic"] == "Orders"
    put = cli("put", small_store, "--topic", "Orders", "--lines", "--json", stdin="a\nb\n").json_lines()
    assert [r["status"] for r in put] == ["PUT_OK", "PUT_OK"]
