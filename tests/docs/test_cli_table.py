"""docs/cli.md's command table and the command line agree: every command the table names exists (the
commands loaded on first use included, and loadable), with every option the table names, and every
command of `rocketstore` has its row."""

from __future__ import annotations

import re

import click
import pytest

from rocketstore.cli.main import LAZY_COMMANDS, cli
from tests.conftest import REPO_ROOT

CLI_DOC = REPO_ROOT / "docs" / "cli.md"
_HEADER = re.compile(r"^\|\s*command\s*\|")
_OPTION = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


def table_rows(markdown: str) -> list[str]:
    """The first cell (its code span) of every row of the table whose first column is `command`."""
    rows: list[str] = []
    in_table = False
    for line in markdown.splitlines():
        if _HEADER.match(line):
            in_table = True
            continue
        if in_table:
            if not line.startswith("|"):
                break
            if set(line) <= set("|-: "):
                continue
            cell = re.split(r"(?<!\\)\|", line)[1]
            span = re.search(r"`([^`]+)`", cell)
            assert span, f"a row of the command table without a command in its first cell: {line}"
            rows.append(span.group(1).replace("\\|", "|"))
    assert rows, f"no command table (a table whose first column is `command`) in {CLI_DOC}"
    return rows


def _context() -> click.Context:
    return click.Context(cli, info_name="rocketstore")


def row_problems(row: str) -> list[str]:
    """What is wrong with one row's command cell: a word that is no command (descending into groups by
    the words that follow), a command that could not be loaded, an option the command does not have."""
    command: click.Command = cli
    path: list[str] = []
    for word in row.split():
        if not isinstance(command, click.Group) or not re.fullmatch(r"[a-z][a-z0-9-]*", word):
            break
        found = command.get_command(_context(), word)
        name = " ".join([*path, word])
        if found is None:
            return [f"`rocketstore {name}` is no command"]
        if (found.help or "").startswith("(unavailable:"):
            return [f"`rocketstore {name}` could not be loaded {found.help}"]
        command, path = found, [*path, word]
    if not path:
        return [f"`{row}` names no command"]
    options = _option_names(command)
    if isinstance(command, click.Group):  # `admin COMMAND -n ...`: an option every one of its commands takes
        subcommands = [command.get_command(_context(), name) for name in command.list_commands(_context())]
        options |= set.intersection(*(_option_names(sub) for sub in subcommands if sub is not None))
    return [f"`rocketstore {' '.join(path)}` has no option {option}"
            for option in sorted(set(_OPTION.findall(row)) - options)]


def _option_names(command: click.Command) -> set[str]:
    return {name for param in command.params for name in (*param.opts, *param.secondary_opts)} | {"--help", "-h"}


def test_the_table_names_only_commands_and_options_that_exist() -> None:
    problems = [f"{problem} (docs/cli.md: `{row}`)" for row in table_rows(CLI_DOC.read_text(encoding="utf-8"))
                for problem in row_problems(row)]
    assert problems == []


def test_every_command_has_its_row() -> None:
    in_table = {row.split()[0] for row in table_rows(CLI_DOC.read_text(encoding="utf-8"))}
    commands = set(cli.list_commands(_context()))
    assert set(LAZY_COMMANDS) <= commands
    assert sorted(commands - in_table) == [], "commands without a row in docs/cli.md's command table"


@pytest.mark.parametrize("markdown, expected", [
    ("| command | what |\n|---|---|\n| `get STORE --topic T` | read |\n| `a \\| b` | x |\n\nafter\n| `x` | y |",
     ["get STORE --topic T", "a | b"]),
])
def test_table_rows_reads_the_command_cells(markdown: str, expected: list[str]) -> None:
    assert table_rows(markdown) == expected


@pytest.mark.parametrize("row, expected", [
    ("demo [DIR] [--count N] [--report OUT.html]", []),
    ("demo [DIR] [--cuont N]", ["`rocketstore demo` has no option --cuont"]),
    ("get STORE --topic T --queue N -f", []),
    ("nosuch STORE", ["`rocketstore nosuch` is no command"]),
    ("STORE --topic T", ["`STORE --topic T` names no command"]),
    ("admin COMMAND -n NAMESRV", []),
    ("admin topic-list -n NAMESRV --nope", ["`rocketstore admin topic-list` has no option --nope"]),
])
def test_row_problems_names_what_does_not_exist(row: str, expected: list[str]) -> None:
    assert row_problems(row) == expected
