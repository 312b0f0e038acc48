"""The `rocketstore` command group and its entry point `main()`.

Subcommands live in one small module per group (`cmd_messages`, `cmd_query`, `cmd_inspect`,
`cmd_files`, `cmd_maintenance`, `cmd_report`). `serve` comes from `rocketstore.cli.serve` and is
imported only when asked for, so the rest of the command line works while the broker is missing or
broken.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

import click

from rocketstore.cli import cmd_files, cmd_inspect, cmd_maintenance, cmd_messages, cmd_query, cmd_report
from rocketstore.cli._errors import PROG, ExitCode, run_guarded
from rocketstore.cli._state import CliState, global_options

# Subcommands provided by other packages: name -> "module:attribute" of a click command.
LAZY_COMMANDS: dict[str, str] = {
    "serve": "rocketstore.cli.serve:serve",
    "admin": "rocketstore.cli.admin:admin",
    "sql": "rocketstore.cli.sql:sql",
}


def _unavailable(name: str, target: str, exc: BaseException) -> click.Command:
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())

    @click.command(name=name, help=f"(unavailable: {reason})",
                   context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    def command() -> None:
        raise click.ClickException(f"'{name}' is unavailable: {target} could not be loaded ({reason})")

    return command


def load_lazy_command(name: str) -> click.Command:
    """The click command `LAZY_COMMANDS[name]`, or a stand-in that explains why it cannot run."""
    target = LAZY_COMMANDS[name]
    module_name, _, attribute = target.partition(":")
    try:
        command = getattr(importlib.import_module(module_name), attribute)
    except Exception as exc:  # any failure of another package must not break this command line
        return _unavailable(name, target, exc)
    if not isinstance(command, click.Command):
        return _unavailable(name, target, TypeError(f"{target} is not a click command"))
    return command


class RocketstoreGroup(click.Group):
    """A click group whose plugin commands (`serve`) are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY_COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS and cmd_name not in self.commands:
            return load_lazy_command(cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=RocketstoreGroup, context_settings={"help_option_names": ["-h", "--help"],
                                                     "max_content_width": 110})
@global_options
@click.version_option(package_name="rocketstore", prog_name=PROG)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Query, inspect, verify, rebuild, export and report on a rocketstore or RocketMQ store.

    Commands that only read open the store read-only (no lock, not a byte written), so they are safe
    beside a live broker. Exit codes: 0 ok, 1 problems found, 2 usage error.
    """
    ctx.ensure_object(CliState)


for _module in (cmd_messages, cmd_query, cmd_inspect, cmd_files, cmd_maintenance, cmd_report):
    for _command in _module.COMMANDS:
        cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the `rocketstore` console script; exits with the command's code."""
    args = list(sys.argv[1:] if argv is None else argv)
    run_guarded(
        lambda: cli.main(args=args, prog_name=PROG, standalone_mode=False),
        debug=lambda: "--debug" in args,
    )


__all__ = ["ExitCode", "cli", "main"]
