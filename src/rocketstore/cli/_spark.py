"""A local SparkSession for the Spark commands (`rebuild`, `export`, `report`, `demo`).

`SPARK_LOCAL_IP` and `PYSPARK_PYTHON` default to 127.0.0.1 and this interpreter; the master comes from
`--master` or `ROCKETSTORE_SPARK_MASTER` (default `local[*]`). The JVM's log is cut to errors unless
`--debug` is given.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import click

from rocketstore.cli._errors import UsageProblem

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
master_option = click.option("--master", default=None,
                             help="Spark master (default: local[*] or $ROCKETSTORE_SPARK_MASTER).")
_QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


def _import_pyspark() -> type[SparkSession]:
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise UsageProblem(f"this command runs on Spark: pip install 'rocketstore[spark]' ({exc})") from exc
    return SparkSession


@contextmanager
def spark_session(app_name: str, *, master: str | None = None, debug: bool = False) -> Iterator[SparkSession]:
    """A SparkSession with the `rocketstore` data source registered; stopped on exit.

    Raises:
        UsageProblem: pyspark is not installed.
    """
    session_class = _import_pyspark()
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
        )
        if not debug and "SPARK_SUBMIT_OPTS" not in os.environ:
            # The driver JVM is started by spark-submit, which adds SPARK_SUBMIT_OPTS to its command line.
            log_config = Path(scratch) / "log4j2.properties"
            log_config.write_text(_QUIET_LOG4J2, encoding="utf-8")
            os.environ["SPARK_SUBMIT_OPTS"] = f"-Dlog4j2.configurationFile=file:{log_config}"
        spark = builder.getOrCreate()
        try:
            if not debug:
                spark.sparkContext.setLogLevel("ERROR")
            from rocketstore.spark import register

            register(spark)
            yield spark
        finally:
            spark.stop()
