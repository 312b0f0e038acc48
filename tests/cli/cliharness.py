"""Running the real `rocketstore` command in a subprocess, and checking what it did."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class CliResult:
    """Exit code and output of one run of the command."""

    args: tuple[str, ...]
    code: int
    out: str
    err: str

    def json(self, code: int = 0) -> Any:
        """The JSON document on stdout, after checking the exit code."""
        assert self.code == code, f"{self.args}: exit {self.code}: {self.err}"
        return json.loads(self.out)

    def lines(self) -> list[str]:
        return [line for line in self.out.splitlines() if line.strip()]

    def json_lines(self, code: int = 0) -> list[Any]:
        """The JSON Lines on stdout (one JSON value per line, each parsed alone), after checking the
        exit code."""
        assert self.code == code, f"{self.args}: exit {self.code}: {self.err}"
        return [json.loads(line) for line in self.out.splitlines()]

    def tsv(self, code: int = 0) -> list[dict[str, str]]:
        """The rows of the tab-separated table on stdout (what a pipe gets), keyed by the header line's
        names; checks there is exactly one header line and no box drawing or padding."""
        assert self.code == code, f"{self.args}: exit {self.code}: {self.err}"
        assert not set(self.out) & BOX_CHARACTERS, self.out
        header, *rows = self.out.splitlines()
        names = header.split("\t")
        assert all(name == name.strip() and name for name in names), header
        table = [dict(zip(names, row.split("\t"), strict=True)) for row in rows]
        assert all(cell == cell.strip() for row in table for cell in row.values()), "no padding"
        return table


BOX_CHARACTERS = set("┃│━╇─┼┏┓┗┛╭╮╰╯")


def command_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "COLUMNS": "200",
                "PYTHONWARNINGS": "ignore"})
    env.update(extra or {})
    return env


def run_cli(*args: str | Path, stdin: str | bytes | None = None, timeout: float = 120,
            env: dict[str, str] | None = None) -> CliResult:
    """Run `python -m rocketstore.cli ARGS...` and capture everything."""
    argv = [str(a) for a in args]
    data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
    proc = subprocess.run([sys.executable, "-m", "rocketstore.cli", *argv], input=data, capture_output=True,
                          timeout=timeout, env=command_env(env), check=False)
    return CliResult(tuple(argv), proc.returncode, proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8"))


def tree_digest(root: Path, *, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of every file under `root` (and every directory, as a marker), by relative path; names in
    `skip` are left out."""
    digest: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.name in skip:
            continue
        digest[rel] = "dir" if path.is_dir() else hashlib.sha256(path.read_bytes()).hexdigest()
    return digest


def assert_one_line_error(result: CliResult, code: int = 2) -> str:
    """The command failed with `code`, one line on stderr, no traceback, nothing on stdout."""
    assert result.code == code, f"{result.args}: exit {result.code}, stderr: {result.err}"
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("rocketstore: error: "), lines[0]
    assert result.out == ""
    return lines[0]


# Geometry for the stores the tests create: small files, so that a writable open stays fast.
SMALL_GEOMETRY = ["--commitlog-file-size", "1048576", "--consume-queue-file-entries", "1000",
                  "--index-hash-slots", "1000", "--index-max-entries", "4000"]


# The bodies the `small_store` fixture puts into Orders (even lines to queue 0, odd lines to queue 1).
ORDERS_LINES = [f'{{"order": {n}, "item": "book-{n % 7}"}}' for n in range(40)]
