"""Exit codes and the one place where exceptions become one line on standard error.

    0  ok
    1  problems found (verify found damage, recovery moved bytes aside, a put was not stored cleanly)
       or the store could not do what was asked (locked, read-only, I/O error)
    2  usage error: bad option, missing store, unknown topic, malformed id, bad time

A command raises `UsageProblem` for bad input and `ProblemsFound` to report findings; `run_guarded`
turns those, click's own errors and the library's exceptions into a single line and an exit code. A
traceback is printed only with `--debug`.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from enum import IntEnum
from typing import NoReturn

import click

PROG = "rocketstore"


class ExitCode(IntEnum):
    OK = 0
    PROBLEMS = 1
    USAGE = 2
    INTERRUPTED = 130


class CliError(Exception):
    """An error the command line reports as one line and an exit code."""

    exit_code: ExitCode = ExitCode.PROBLEMS

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageProblem(CliError):
    """Bad input: the command was not run (exit 2)."""

    exit_code = ExitCode.USAGE


class ProblemsFound(CliError):
    """The command ran and found problems it has already reported (exit 1)."""

    exit_code = ExitCode.PROBLEMS


def _library_error_code(exc: BaseException) -> ExitCode | None:
    """Exit code for an exception of the store library, None when it is not one of ours."""
    try:
        from rocketstore import errors
    except ImportError:  # the library itself is broken; report it as a problem
        return None
    if isinstance(exc, (errors.InvalidMessageError, errors.StoreLayoutError)):
        return ExitCode.USAGE
    if isinstance(exc, errors.RocketStoreError):
        return ExitCode.PROBLEMS
    return None


def _is_layout_error(exc: BaseException) -> bool:
    from rocketstore import errors

    return isinstance(exc, errors.StoreLayoutError)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())  # one line, whatever the exception's message looks like


def fail(message: str, code: ExitCode, *, debug: bool) -> NoReturn:
    """Print `rocketstore: error: message` (and the traceback when debugging) and exit."""
    if debug and sys.exc_info()[0] is not None:
        traceback.print_exc(file=sys.stderr)
    click.echo(f"{PROG}: error: {' '.join(message.split())}", err=True)
    sys.exit(int(code))


def run_guarded(invoke: Callable[[], object], *, debug: Callable[[], bool]) -> NoReturn:
    """Run the command line and exit with its code; every failure becomes one line."""
    try:
        result = invoke()
    except CliError as exc:
        fail(exc.message, exc.exit_code, debug=debug())
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.Abort:
        fail("aborted", ExitCode.INTERRUPTED, debug=debug())
    except click.UsageError as exc:
        hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
        fail(exc.format_message() + hint, ExitCode.USAGE, debug=debug())
    except click.ClickException as exc:
        fail(exc.format_message(), ExitCode.USAGE, debug=debug())
    except KeyboardInterrupt:
        fail("interrupted", ExitCode.INTERRUPTED, debug=debug())
    except BrokenPipeError:
        sys.stderr.close()  # the reader went away (`| head`): nothing left to say
        sys.exit(int(ExitCode.OK))
    except Exception as exc:  # the one boundary where anything becomes a line and a code
        code = _library_error_code(exc)
        if code is None:
            message = f"{type(exc).__name__}: {_describe(exc)}"
            if isinstance(exc, OSError) and exc.filename:
                message = f"{exc.strerror or _describe(exc)}: {exc.filename}"
            fail(message, ExitCode.PROBLEMS, debug=debug())
        message = _describe(exc)
        if _is_layout_error(exc) and "rocketstore recover" not in message and "geometry" not in message:
            message += " (a store RocketMQ wrote needs its geometry: --config or --commitlog-file-size ...)"
        fail(message, code, debug=debug())
    sys.exit(int(result) if isinstance(result, int) else int(ExitCode.OK))
