"""`report` and `demo --report` without the `report` extra: one line naming the install command, before
Spark (or anything else) starts."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .cliharness import CliResult, assert_one_line_error, command_env, tree_digest

# Runs the command as `python -m rocketstore.cli` does, with `import matplotlib` failing as it does where the
# extra is not installed, and records at exit which Spark modules were imported.
WITHOUT_MATPLOTLIB = """\
import atexit, json, sys
sys.modules["matplotlib"] = None
def _record(path=sys.argv.pop(1)):
    with open(path, "w") as fh:
        json.dump(sorted(m for m in sys.modules if m == "pyspark" or m.startswith("pyspark.")), fh)
atexit.register(_record)
from rocketstore.cli.main import main
main()
"""
NO_SPARK_WITHIN_S = 8  # starting Spark alone takes 10 s or more here


def _run_without_matplotlib(tmp_path: Path, *args: str | Path) -> tuple[CliResult, list[str], float]:
    imported = tmp_path / "spark-modules.json"
    argv = [sys.executable, "-c", WITHOUT_MATPLOTLIB, str(imported), *(str(a) for a in args)]
    started = time.monotonic()
    proc = subprocess.run(argv, capture_output=True, timeout=120, env=command_env(), check=False)
    elapsed = time.monotonic() - started
    result = CliResult(tuple(str(a) for a in args), proc.returncode, proc.stdout.decode(), proc.stderr.decode())
    return result, json.loads(imported.read_text(encoding="utf-8")), elapsed


@pytest.mark.parametrize("command", ["report", "demo"])
def test_a_missing_report_extra_fails_fast_with_the_install_command(command, golden_store, golden_flags,
                                                                    tmp_path: Path):
    page = tmp_path / "report.html"
    before = tree_digest(golden_store)
    args = (["report", golden_store, page, *golden_flags] if command == "report"
            else ["demo", tmp_path / "demo-store", "--messages", "10", "--report", page])
    result, spark_modules, elapsed = _run_without_matplotlib(tmp_path, *args)
    line = assert_one_line_error(result)
    assert "pip install 'rocketstore[report]'" in line and "matplotlib" in line
    assert spark_modules == []  # Spark was never imported, let alone started
    assert elapsed < NO_SPARK_WITHIN_S
    assert not page.exists() and not (tmp_path / "demo-store").exists()
    assert tree_digest(golden_store) == before
