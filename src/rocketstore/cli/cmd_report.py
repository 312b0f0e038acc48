"""`report` and `demo`: the HTML report on a store, and the demo pipeline (both Spark jobs)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from rocketstore.cli._errors import ProblemsFound, UsageProblem
from rocketstore.cli._output import Column, console, number, show, when
from rocketstore.cli._spark import master_option, show_result, spark_session
from rocketstore.cli._state import check_store_dir, global_options, option, state, store_argument

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _check_html_target(out: Path) -> None:
    """Check the page's file name and the `report` extra, before Spark or anything slow starts."""
    if out.suffix.lower() not in (".html", ".htm"):
        raise UsageProblem(f"the report must be an .html file, got {out}")
    if not out.parent.is_dir():
        raise UsageProblem(f"no such directory: {out.parent}")
    from rocketstore.report.plots import require_matplotlib

    try:
        require_matplotlib()
    except ImportError as exc:
        raise UsageProblem(str(exc)) from exc


@click.command()
@store_argument
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
@master_option
@global_options
def report(store: Path, out: Path, master: str | None) -> None:
    """Write one self-contained HTML page OUT about STORE, a Spark job: messages stored over time per
    topic, record sizes, queue depth, consumer lag, index fill and slot chains, disk use by file kind.
    Needs the `report` extra (matplotlib). (mqadmin has no equivalent.)
    """
    check_store_dir(store)
    _check_html_target(out)
    from rocketstore.report.html import build_report
    from rocketstore.spark.progress import Progress

    with Progress("report") as progress, spark_session("rocketstore-report", master=master,
                                                       debug=state().debug, progress=progress) as spark:
        summary = build_report(spark, store, out, state().store_config(), progress=progress.stage)
    show_result(summary.to_dict(), summary.describe(), title="report")


DEMO_STEPS = {
    "write": "write the store",
    "spark": "start Spark",
    "rebuild": "rebuild queues and index (Spark)",
    "export": "export to Parquet (Spark)",
    "query": "Spark SQL summary",
    "report": "HTML report (Spark)",
}
SUMMARY_COLUMNS = (
    Column("topic", "topic"),
    Column("queue", "queueId", number, "right"),
    Column("messages", "messages", number, "right"),
    Column("offsets", "offsets"),
    Column("bytes", "bytes", number, "right"),
    Column("tags", "tags", number, "right"),
    Column("first stored (UTC)", "first_store_timestamp", when),
    Column("last stored (UTC)", "last_store_timestamp", when),
)


class _DemoProgress:
    """Rich progress bars (on stderr) for the demo's steps."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.tasks: dict[str, TaskID] = {}

    def __call__(self, step: str, done: int, total: int | None) -> None:
        if step not in self.tasks:
            self.tasks[step] = self.progress.add_task(DEMO_STEPS.get(step, step), total=total)
        self.progress.update(self.tasks[step], completed=done, total=total)


@click.command()
@click.argument("directory", required=False, default="demo-store",
                type=click.Path(file_okay=False, path_type=Path))
@option("--count", "messages", aliases=("--messages",), type=click.IntRange(min=1), default=20_000,
        show_default=True, help="Messages to write.")
@click.option("--seed", type=int, default=7, show_default=True, help="Seed of the generated workload.")
@click.option("--export", "export_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the Parquet export goes (default: DIRECTORY.parquet beside it).")
@click.option("--report", "report_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the HTML report of the demo store to this file.")
@master_option
@global_options
def demo(directory: Path, messages: int, seed: int, export_dir: Path | None, report_file: Path | None,
         master: str | None) -> None:
    """The demo pipeline: write a store with a realistic mix of topics, queues, tags and keys into
    DIRECTORY (default ./demo-store; adds to it when it is already a store, refuses any other
    non-empty folder), then run Spark over it: rebuild its queues and index, export it to Parquet,
    and summarise it per topic and queue with Spark SQL. (mqadmin has no equivalent.)
    """
    from rocketstore.cli.demo import DemoRefused, check_target, run_demo

    export_dir = export_dir or directory.with_name(directory.name + ".parquet")
    try:
        check_target(directory, export_dir)
    except DemoRefused as exc:
        raise UsageProblem(str(exc)) from exc
    if report_file is not None:
        _check_html_target(report_file)
    debug = state().debug
    columns = (SpinnerColumn(), TextColumn("{task.description:<36}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=console(stderr=True)) as bars:
        step = _DemoProgress(bars)

        @contextmanager
        def spark_factory() -> Iterator[SparkSession]:
            step("spark", 0, 1)
            with spark_session("rocketstore-demo", master=master, debug=debug) as spark:
                step("spark", 1, 1)
                yield spark

        result = run_demo(spark_factory, directory, export_dir, messages=messages, seed=seed,
                          config=state().store_config(), progress=step, report=report_file)
    rows = [{**row, "offsets": f"[{row['min_offset']}, {row['max_offset']})"} for row in result.summary]
    total = sum(int(row["messages"]) for row in result.summary)
    footer = (f"{result.messages_written} message(s) written to {result.store}; store holds {total}; "
              f"rebuilt {result.rebuild.get('queues', 0)} queue(s) and {result.rebuild.get('index_files', 0)} "
              f"index file(s); {result.exported_rows} row(s) exported to {result.export}"
              + (f"; report in {result.report}" if result.report else ""))
    show(result.to_dict(), rows, SUMMARY_COLUMNS, title="demo summary (Spark SQL, per topic and queue)",
         footer=footer)
    if result.exported_rows != total:
        raise ProblemsFound(f"the Parquet export holds {result.exported_rows} rows, the store {total}")


COMMANDS = (report, demo)
