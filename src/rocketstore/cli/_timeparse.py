"""TIME arguments of the command line: epoch milliseconds or ISO 8601 (`format.times`), as a click
parameter type."""

from __future__ import annotations

import click

from rocketstore.format.times import parse_time_ms


class TimeParam(click.ParamType):
    """A click parameter type for TIME: epoch ms or ISO 8601."""

    name = "TIME"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_time_ms(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


TIME = TimeParam()
