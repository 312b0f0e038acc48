"""Bad input: one line on stderr, exit 2, no traceback, and not a byte written anywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

from .cliharness import assert_one_line_error, tree_digest

STORE = "{store}"
GEO = "{geometry}"

# (case, argv with {store}/{geometry} placeholders, words the error line must contain)
CASES = [
    ("missing store", ["topics", "{missing}", GEO], "no store at"),
    ("folder that is not a store", ["topics", "{not_a_store}", GEO], "not a store directory"),
    ("geometry flag the files contradict", ["topics", STORE, "--commitlog-file-size", "131072"], "geometry"),
    ("unknown topic (get)", ["get", STORE, GEO, "--topic", "Nope", "--queue", "0"], "unknown topic 'Nope'"),
    ("unknown topic (query-key)", ["query-key", STORE, GEO, "--topic", "Nope", "--key", "hot"], "unknown topic"),
    ("unknown topic (topics)", ["topics", STORE, GEO, "--topic", "Nope"], "unknown topic"),
    ("unknown topic (offset-by-time)",
     ["offset-by-time", STORE, GEO, "--topic", "Nope", "--queue", "0", "--time", "0"], "unknown topic"),
    ("unknown queue", ["get", STORE, GEO, "--topic", "TopicA", "--queue", "9"], "has no queue 9"),
    ("negative queue", ["get", STORE, GEO, "--topic", "TopicA", "--queue", "-1"], "--queue"),
    ("missing --topic", ["get", STORE, GEO, "--queue", "0"], "--topic"),
    ("malformed id (short)", ["query-id", STORE, GEO, "7F00"], "malformed message id"),
    ("malformed id (not hex)", ["query-id", STORE, GEO, "Z" * 32], "malformed message id"),
    ("id of no record", ["query-id", STORE, GEO, "7F00000100002A9F00000000000000D2"], "no message with id"),
    ("offset of no record", ["query-offset", STORE, GEO, "210"], "no message record starts at"),
    ("offset past the end", ["query-offset", STORE, GEO, "999999999"], "outside the commitlog"),
    ("bad time", ["offset-by-time", STORE, GEO, "--topic", "TopicA", "--queue", "0", "--time", "yesterday"],
     "is not a time"),
    ("bad ISO time", ["query-key", STORE, GEO, "--topic", "TopicA", "--key", "hot", "--begin", "2026-13-45"],
     "is not a time"),
    ("end before begin", ["query-key", STORE, GEO, "--topic", "TopicA", "--key", "hot", "--begin", "2000",
                          "--end", "1000"], "--end is before --begin"),
    ("unknown group", ["progress", STORE, GEO, "--group", "nobody"], "unknown consumer group 'nobody'"),
    ("unknown command", ["frobnicate", STORE], "No such command"),
    ("missing config file", ["--config", "{missing}.conf", "topics", STORE], "cannot read config file"),
    ("dump of a file that is no store file", ["dump", STORE, GEO, "config/delayOffset.json"], "is not a"),
    ("dump of a missing file", ["dump", STORE, GEO, "commitlog/00000000000000999999"], "no such file"),
    ("dump past the end of the file",
     ["dump", STORE, GEO, "commitlog/00000000000000000000", "--at", "70000"], "outside"),
    ("dump at a position inside a queue entry",
     ["dump", STORE, GEO, "consumequeue/TopicA/0/00000000000000000000", "--at", "7"], "not a multiple"),
    ("put without a body", ["put", STORE, GEO, "--topic", "TopicA"], "exactly one of"),
    ("put with two bodies", ["put", STORE, GEO, "--topic", "TopicA", "--body", "x", "--file", "{missing}"],
     "exactly one of"),
    ("put of an invalid message", ["put", STORE, GEO, "--topic", "T" * 200, "--body", "x"], "topic"),
    ("put with a malformed property", ["put", STORE, GEO, "--topic", "TopicA", "--body", "x", "--property", "novalue"],
     "NAME=VALUE"),
    ("put into a folder that is not a store", ["put", "{not_a_store}", "--topic", "T", "--body", "x"],
     "not a store directory"),
    ("put into a file", ["put", "{not_a_store}/notes.txt", "--topic", "T", "--body", "x"], "is a file"),
    ("report to a non-HTML file", ["report", STORE, GEO, "{tmp}/report.txt"], ".html"),
    ("export over an existing folder", ["export", STORE, GEO, "{not_a_store}"], "exists"),
    ("demo into a folder that is not a store", ["demo", "{not_a_store}"], "is not a store"),
]


@pytest.mark.parametrize("argv,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(cli, golden_store, golden_flags, tmp_path: Path,
                                                         argv: list[str], words: str):
    not_a_store = tmp_path / "not-a-store"
    not_a_store.mkdir()
    (not_a_store / "notes.txt").write_text("keep me")
    places = {"{store}": str(golden_store), "{missing}": str(tmp_path / "missing"),
              "{not_a_store}": str(not_a_store), "{tmp}": str(tmp_path)}
    args: list[str] = []
    for arg in argv:
        if arg == GEO:
            args += golden_flags
            continue
        for placeholder, value in places.items():
            arg = arg.replace(placeholder, value)
        args.append(arg)
    before = tree_digest(tmp_path)
    line = assert_one_line_error(cli(*args))
    assert words in line
    assert tree_digest(tmp_path) == before


def test_debug_shows_the_traceback(cli, tmp_path: Path):
    result = cli("--debug", "query-id", tmp_path, "7F00")
    assert result.code == 2
    assert "Traceback" in result.err
    assert result.err.strip().splitlines()[-1].startswith("rocketstore: error: ")
