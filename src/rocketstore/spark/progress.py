"""What a Spark command shows while it runs: its stage and Spark's task progress on one updating line of
stderr, and a quiet JVM.

    with Progress("rebuild") as progress:
        progress.stage("starting Spark")
        spark = ...
        progress.watch(spark)          # Spark's task counts from the SparkContext's status tracker
        rebuild(spark, store, progress=progress.stage)
        progress.unwatch()             # before spark.stop()

The line is drawn only when stderr is a terminal (`ROCKETSTORE_PROGRESS=1` draws it anyway, `=0` never):
redirected to a file or a pipe, a command prints nothing while it runs. A background thread redraws the
line four times a second with the tasks of the Spark stages running at that moment, and the line is erased
when the command ends, so that the summary that follows stands alone.

`quiet_jvm_options` and `quiet_jvm_launch` cut the JVM's own console output (log lines below ERROR, the
shell's "Setting default log level" notice, the JDK's incubator-module warning) where this project
starts the JVM itself; a JVM started by spark-submit keeps the logging it was given.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from rocketstore._readable import human_seconds

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "PROGRESS_ENV",
    "Progress",
    "StageCallback",
    "progress_wanted",
    "quiet_jvm_launch",
    "quiet_jvm_options",
]

PROGRESS_ENV = "ROCKETSTORE_PROGRESS"
"""`1` draws the progress line even when stderr is not a terminal, `0` never draws it."""
REDRAW_S = 0.25

StageCallback = Callable[[str], None]
"""What a job calls with the name of each step it starts (`"writing consume queues"`)."""

QUIET_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
# Spark prints "Setting default log level to ..." when the logger of the class that sets up logging for
# a Python session is left at its default level; these are that class in each version.
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
logger.submit.name = org.apache.spark.deploy.SparkSubmit
logger.submit.level = error
"""
# Lines the JVM writes on stderr whatever its logging says (the launcher adds --add-modules for Spark's
# vectorised code, and the JDK warns about it at every start).
JVM_NOISE = ("WARNING: Using incubator modules:",)
_TRUE, _FALSE = ("1", "yes", "true", "on", "always"), ("0", "no", "false", "off", "never")


def progress_wanted(stream: IO[str]) -> bool:
    """Whether to draw the progress line on `stream`: `ROCKETSTORE_PROGRESS` when set, else whether
    `stream` is a terminal."""
    forced = os.environ.get(PROGRESS_ENV, "").strip().lower()
    if forced in _TRUE:
        return True
    if forced in _FALSE:
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


class Progress:
    """One updating line on stderr: the command, its stage, Spark's running tasks and the time so far.

    Args:
        command: what runs (`rebuild`), the line's first word.
        stream: where the line goes (default: stderr).
        enabled: draw it (default: `progress_wanted(stream)`); when False every method does nothing.
    """

    def __init__(self, command: str, *, stream: IO[str] | None = None, enabled: bool | None = None) -> None:
        self.command = command
        self.enabled = progress_wanted(stream or sys.stderr) if enabled is None else enabled
        self._owned = _own_stderr() if stream is None and self.enabled else None
        self.stream: IO[str] = stream or self._owned or sys.stderr
        self.began = time.monotonic()
        self._stage = "starting"
        self._tracker: Any = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._drawn = False

    def __enter__(self) -> Progress:
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rocketstore-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.close()

    def stage(self, name: str) -> None:
        """The step the command is at now (`"writing consume queues"`); redraws the line."""
        self._stage = name
        self._draw()

    def watch(self, spark: SparkSession) -> None:
        """Show the task counts of `spark`'s running stages (not for a Spark Connect session, which
        has no status tracker)."""
        if not self.enabled:
            return
        try:
            self._tracker = spark.sparkContext.statusTracker()
        except Exception:  # Spark Connect: no SparkContext, the line shows the stage only
            self._tracker = None

    def unwatch(self) -> None:
        """Stop asking the status tracker (call before the session stops)."""
        with self._lock:
            self._tracker = None

    def close(self) -> None:
        """Stop redrawing and erase the line."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            self._tracker = None
            if self._drawn:
                self._write("\r\x1b[K")
                self._drawn = False
            if self._owned is not None:
                self._owned.close()
                self._owned = None
                self.enabled = False

    def tasks(self) -> tuple[int, int, int] | None:
        """(completed, running, total) tasks of the Spark stages running now; None when none runs or
        nothing is watched."""
        tracker = self._tracker
        if tracker is None:
            return None
        try:
            infos = [tracker.getStageInfo(stage_id) for stage_id in tracker.getActiveStageIds()]
        except Exception:  # the session is stopping: show the stage only from now on
            self._tracker = None
            return None
        infos = [info for info in infos if info is not None]
        if not infos:
            return None
        return (sum(i.numCompletedTasks for i in infos), sum(i.numActiveTasks for i in infos),
                sum(i.numTasks for i in infos))

    def line(self) -> str:
        """The line as drawn now (without the carriage return)."""
        parts = [f"{self.command}: {self._stage}"]
        counts = self.tasks()
        if counts is not None:
            done, running, total = counts
            parts.append(f"Spark tasks {done}/{total} done" + (f", {running} running" if running else ""))
        parts.append(human_seconds(time.monotonic() - self.began))
        return " | ".join(parts)

    def _run(self) -> None:
        while not self._stop.wait(REDRAW_S):
            self._draw()

    def _draw(self) -> None:
        if not self.enabled or self._stop.is_set():
            return
        with self._lock:
            width = max(shutil.get_terminal_size((100, 24)).columns - 1, 20)
            text = self.line()
            if len(text) > width:
                text = text[:width - 1] + "…"
            self._write(f"\r{text}\x1b[K")
            self._drawn = True

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # stderr closed under us: stop drawing
            self.enabled = False


def _own_stderr() -> IO[str] | None:
    """A stream on a copy of stderr's file descriptor: the line keeps going to the terminal while the
    JVM starts with fd 2 pointed at `quiet_jvm_launch`'s pipe. None when stderr has no descriptor."""
    try:
        sys.stderr.flush()
        return os.fdopen(os.dup(sys.stderr.fileno()), "w", encoding="utf-8", errors="replace")
    except (OSError, ValueError, AttributeError):
        return None


def quiet_jvm_options(scratch: Path) -> None:
    """Point the JVM that pyspark is about to start at a log configuration that prints errors only
    (written into `scratch`), unless SPARK_SUBMIT_OPTS is already set."""
    if "SPARK_SUBMIT_OPTS" in os.environ:
        return
    log_config = scratch / "log4j2.properties"
    log_config.write_text(QUIET_LOG4J2, encoding="utf-8")
    # The driver JVM is started by spark-submit, which adds SPARK_SUBMIT_OPTS to its command line.
    os.environ["SPARK_SUBMIT_OPTS"] = f"-Dlog4j2.configurationFile=file:{log_config}"


@contextmanager
def quiet_jvm_launch() -> Iterator[None]:
    """Around the call that starts the JVM (`SparkSession.builder.getOrCreate()`): the JVM inherits a
    stderr that passes every line on to this process's stderr but the `JVM_NOISE` ones. Does nothing
    when a JVM is already running (spark-submit) or stderr has no file descriptor."""
    from pyspark import SparkContext

    if os.environ.get("PYSPARK_GATEWAY_PORT") or SparkContext._active_spark_context is not None:
        yield
        return
    try:
        sys.stderr.flush()
        original = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    read_end, write_end = os.pipe()
    forward = threading.Thread(target=_forward_lines, args=(read_end, original), name="rocketstore-jvm-stderr",
                               daemon=True)
    forward.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)  # this process writes to its stderr again; the JVM keeps the pipe


def _forward_lines(read_end: int, target: int) -> None:
    """Copy lines from the JVM's stderr pipe to `target` (a dup of the original stderr), dropping the
    `JVM_NOISE` lines, until the JVM exits."""
    with os.fdopen(read_end, "rb", buffering=0) as source, os.fdopen(target, "wb", buffering=0) as sink:
        pending = b""
        while chunk := source.read(65536):
            pending += chunk
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if not line.decode("utf-8", "replace").startswith(JVM_NOISE):
                    sink.write(line + b"\n")
        if pending:
            sink.write(pending)
