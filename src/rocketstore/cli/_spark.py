"""A local SparkSession for the Spark commands (`rebuild`, `export`, `report`, `demo`), and how they end.

`SPARK_LOCAL_IP` and `PYSPARK_PYTHON` default to 127.0.0.1 and this interpreter; the master comes from
`--master` or `ROCKETSTORE_SPARK_MASTER` (default `local[*]`). The JVM's console output is cut to errors
and Spark's own progress bar is off unless `--debug` is given; the command's progress line
(`rocketstore.spark.progress`) shows the stage and Spark's tasks instead, and `show_result` prints the
summary at the end.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from rocketstore.cli._errors import UsageProblem
from rocketstore.cli._output import emit_json, piped, show_fields
from rocketstore.cli._state import state

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from rocketstore.spark.progress import Progress

DEFAULT_MASTER = "local[*]"
master_option = click.option("--master", default=None,
                             help="Spark master (default: local[*] or $ROCKETSTORE_SPARK_MASTER).")
def _import_pyspark() -> type[SparkSession]:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise UsageProblem(f"this command runs on Spark: pip install 'rocketstore[spark]' ({exc})") from exc
    return SparkSession


@contextmanager
def spark_session(app_name: str, *, master: str | None = None, debug: bool = False,
                  progress: Progress | None = None) -> Iterator[SparkSession]:
    """A SparkSession with the `rocketstore` data source registered; stopped on exit. With `progress`,
    its line says "starting Spark" while the JVM starts and then counts the session's tasks.

    Raises:
        UsageProblem: pyspark is not installed.
    """
    session_class = _import_pyspark()
    from rocketstore.spark.progress import quiet_jvm_launch, quiet_jvm_options

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    with tempfile.TemporaryDirectory(prefix="rocketstore-spark-") as scratch:
        builder = (
            session_class.builder.appName(app_name)
            .master(master or os.environ.get("ROCKETSTORE_SPARK_MASTER", DEFAULT_MASTER))
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", str(max(os.cpu_count() or 1, 2)))
            .config("spark.local.dir", scratch)
            .config("spark.sql.warehouse.dir", str(Path(scratch) / "warehouse"))
            .config("spark.sql.python.filterPushdown.enabled", "true")  # the source's option filterPushdown
        )
        if progress is not None:
            progress.stage("starting Spark")
        if debug:
            spark = builder.getOrCreate()
        else:
            quiet_jvm_options(Path(scratch))
            with quiet_jvm_launch():
                spark = builder.getOrCreate()
        try:
            if not debug:
                spark.sparkContext.setLogLevel("ERROR")
            from rocketstore.spark import register

            register(spark)
            if progress is not None:
                progress.watch(spark)
            yield spark
        finally:
            if progress is not None:
                progress.unwatch()
            spark.stop()


def show_result(document: dict[str, Any], summary: str, *, title: str) -> None:
    """The end of a Spark command: with --json `document` alone; in a pipe `document` as
    `field<TAB>value` lines on stdout and `summary` on stderr; on a terminal `summary` alone, the
    sentences a reader wants (what was done, how much, where, how long)."""
    if state().json_output:
        emit_json(document)
    elif piped():
        show_fields(document, title=title)
        click.echo(summary, err=True)
    else:
        click.echo(summary)
