"""The command group: help, version, entry points, and the lazily imported `serve`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from .cliharness import CliResult, assert_one_line_error, command_env

SUBCOMMANDS = ("put", "get", "query-key", "query-id", "query-offset", "offset-by-time", "topics", "progress",
               "verify", "recover", "rebuild", "export", "dump", "report", "demo", "serve")
MQADMIN_NAMES = {"get": "queryMsgByOffset", "query-key": "queryMsgByKey", "query-id": "queryMsgById",
                 "query-offset": "queryMsgById", "offset-by-time": "resetOffsetByTime", "topics": "topicStatus",
                 "progress": "consumerProgress", "put": "sendMessage"}


def test_help_lists_every_subcommand(cli):
    result = cli("--help")
    assert result.code == 0
    for name in SUBCOMMANDS:
        assert f"  {name} " in result.out, name


@pytest.mark.parametrize("name", [n for n in SUBCOMMANDS if n != "serve"])
def test_each_subcommand_has_help_naming_its_mqadmin_equivalent(cli, name):
    result = cli(name, "--help")
    assert result.code == 0, result.err
    assert "Usage: rocketstore " + name in result.out
    text = " ".join(result.out.split())  # help text is wrapped at any space
    assert f"mqadmin {MQADMIN_NAMES[name]}" in text if name in MQADMIN_NAMES else "mqadmin has no equivalent" in text
    for option in ("--json", "--config", "--commitlog-file-size", "--debug"):
        assert option in result.out


def test_version(cli):
    from rocketstore import __version__

    result = cli("--version")
    assert result.code == 0 and __version__ in result.out


def test_console_script_runs_the_same_command():
    script = Path(sys.executable).with_name("rocketstore")
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, env=command_env(), check=False)
    assert proc.returncode == 0 and "query-key" in proc.stdout


def _run_with_broken_serve(*args: str) -> CliResult:
    code = ("import sys, rocketstore.cli.main as m; "
            "m.LAZY_COMMANDS['serve'] = 'rocketstore_missing_module:serve'; m.main(sys.argv[1:])")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                          env=command_env(), check=False)
    return CliResult(args, proc.returncode, proc.stdout, proc.stderr)


def test_a_missing_serve_module_leaves_the_rest_working(golden_store, golden_flags):
    listing = _run_with_broken_serve("--help")
    assert listing.code == 0
    assert "serve" in listing.out and "unavailable" in listing.out
    line = assert_one_line_error(_run_with_broken_serve("serve", str(golden_store)))
    assert "'serve' is unavailable" in line and "rocketstore_missing_module" in line
    topics = _run_with_broken_serve("topics", str(golden_store), *golden_flags, "--json")
    assert topics.code == 0 and '"TopicA"' in topics.out


def test_python_dash_m_and_main_agree(cli, golden_store, golden_flags):
    code = "import sys; from rocketstore.cli.main import main; main(sys.argv[1:])"
    proc = subprocess.run([sys.executable, "-c", code, "topics", str(golden_store), *golden_flags, "--json"],
                          capture_output=True, text=True, env=command_env(), check=False)
    assert proc.returncode == 0
    assert proc.stdout == cli("topics", golden_store, *golden_flags, "--json").out


@pytest.mark.parametrize(("command", "shown", "hidden_alias"), [
    ("query-key", "--count", "--max"), ("export", "--topic", "--topics"), ("demo", "--count", "--messages")])
def test_one_flag_name_per_idea_with_the_earlier_name_kept_hidden(command, shown, hidden_alias):
    from .cliharness import run_cli

    text = run_cli(command, "--help").out
    assert f"{shown} " in text and f"{hidden_alias} " not in text
