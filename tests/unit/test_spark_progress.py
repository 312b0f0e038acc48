"""The Spark commands' progress line and summaries, without Spark: a fake status tracker stands in for the
SparkContext's."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field

import pytest

pytest.importorskip("pyspark")

from rocketstore._readable import human_bytes, human_seconds
from rocketstore.spark.jobs import ExportReport, RebuildReport
from rocketstore.spark.progress import (
    JVM_NOISE,
    PROGRESS_ENV,
    Progress,
    progress_wanted,
)


@dataclass
class _StageInfo:  # the field names of pyspark's SparkStageInfo
    numTasks: int
    numActiveTasks: int
    numCompletedTasks: int


@dataclass
class _Tracker:
    stages: dict[int, _StageInfo] = field(default_factory=dict)
    broken: bool = False

    def getActiveStageIds(self) -> list[int]:
        if self.broken:
            raise RuntimeError("SparkContext was shut down")
        return list(self.stages)

    def getStageInfo(self, stage_id: int) -> _StageInfo | None:
        return self.stages.get(stage_id)


class _Spark:
    def __init__(self, tracker: _Tracker) -> None:
        self.sparkContext = self
        self._tracker = tracker

    def statusTracker(self) -> _Tracker:
        return self._tracker


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_names_the_stage_and_counts_the_tasks_of_the_running_stages():
    tracker = _Tracker({3: _StageInfo(8, 2, 5), 4: _StageInfo(4, 1, 0)})
    progress = Progress("rebuild", stream=io.StringIO(), enabled=True)
    progress.watch(_Spark(tracker))
    progress.stage("writing consume queues")
    line = progress.line()
    assert line.startswith("rebuild: writing consume queues | Spark tasks 5/12 done, 3 running | ")
    assert line.endswith(" s")
    tracker.stages.clear()  # between Spark jobs: the stage alone
    assert progress.line().startswith("rebuild: writing consume queues | 0.")
    tracker.broken = True  # the session stopped: no error, the stage alone from then on
    assert " tasks " not in progress.line()
    assert progress.tasks() is None


def test_on_a_terminal_the_line_is_redrawn_in_place_and_erased_at_the_end(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # the whole line fits (pytest-xdist's workers say 80)
    terminal = _Terminal()
    tracker = _Tracker({0: _StageInfo(4, 4, 0)})
    with Progress("export", stream=terminal) as progress:
        assert progress.enabled
        progress.watch(_Spark(tracker))
        progress.stage("reading messages and writing parquet files")
        time.sleep(0.7)  # at least one redraw by the thread
        tracker.stages[0] = _StageInfo(4, 0, 4)
        progress.stage("counting the rows written")
    drawn = terminal.getvalue()
    assert "\n" not in drawn  # one line, rewritten
    frames = drawn.split("\r")
    assert frames[0] == "" and frames[-1] == "\x1b[K"  # ends erased
    assert any("export: reading messages and writing parquet files | Spark tasks 0/4 done, 4 running" in f
               for f in frames)
    assert any("export: counting the rows written | Spark tasks 4/4 done" in f for f in frames)
    assert len(frames) >= 4  # the two stages, a redraw, the erase


def test_off_a_terminal_nothing_is_written(monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    stream = io.StringIO()
    with Progress("rebuild", stream=stream) as progress:
        assert not progress.enabled
        progress.watch(_Spark(_Tracker({0: _StageInfo(1, 1, 0)})))
        progress.stage("writing index files")
        time.sleep(0.6)
    assert stream.getvalue() == ""


@pytest.mark.parametrize(("value", "terminal", "wanted"), [
    (None, True, True), (None, False, False), ("1", False, True), ("always", False, True),
    ("0", True, False), ("never", True, False), ("", True, True),
])
def test_the_environment_forces_the_line_on_or_off(monkeypatch, value, terminal, wanted):
    if value is None:
        monkeypatch.delenv(PROGRESS_ENV, raising=False)
    else:
        monkeypatch.setenv(PROGRESS_ENV, value)
    assert progress_wanted(_Terminal() if terminal else io.StringIO()) is wanted


def test_a_long_line_is_cut_to_the_terminal_width(monkeypatch):
    monkeypatch.setenv("COLUMNS", "40")
    terminal = _Terminal()
    progress = Progress("report", stream=terminal, enabled=True)
    progress.stage("reading messages (counts, sizes, store times) " * 3)
    progress.close()
    frame = terminal.getvalue().split("\r")[1]
    assert frame.endswith("…\x1b[K") and len(frame) == 39 + len("\x1b[K")


@pytest.mark.parametrize(("count", "text"), [(0, "0 B"), (1023, "1023 B"), (1024, "1.0 KiB"),
                                             (10_444, "10.2 KiB"), (3 << 20, "3.0 MiB"), (5 << 40, "5120.0 GiB")])
def test_bytes_read_in_binary_units(count, text):
    assert human_bytes(count) == text


@pytest.mark.parametrize(("seconds", "text"), [(0.42, "0.4 s"), (9.94, "9.9 s"), (38.4, "38 s"),
                                               (125.2, "2 min 05 s")])
def test_durations_read_in_seconds_and_minutes(seconds, text):
    assert human_seconds(seconds) == text


def test_the_rebuild_summary_says_what_how_much_where_and_how_long():
    report = RebuildReport(ranges=1, queues=12, queue_entries=520, index_files=5, index_keys=1626, seconds=9.74,
                           store="/data/g", commitlog_bytes=223_647, queue_files=12, queue_bytes=10_400,
                           index_bytes=5 * 42_440)
    assert report.describe() == (
        "rebuilt /data/g from its commitlog (218.4 KiB read as 1 range) in 9.7 s:\n"
        "  consume queues: 12 queues, 520 entries in 12 files (10.2 KiB) under /data/g/consumequeue\n"
        "  index: 1626 keys in 5 files (207.2 KiB) under /data/g/index")
    assert report.to_dict()["queue_bytes"] == 10_400


def test_the_export_summary_says_what_how_much_where_and_how_long():
    report = ExportReport(store="/data/g", out="/lake/g", format="parquet", partition_by=("topic", "queueId"),
                          rows=520, files=12, bytes=90_112, partitions=12, seconds=41.3)
    assert report.describe() == (
        "exported 520 messages of /data/g in 41 s:\n"
        "  12 parquet files (88.0 KiB, 12 partitions by topic, queueId) under /lake/g")
    assert report.to_dict()["partition_by"] == ["topic", "queueId"]
    single = ExportReport("/s", "/o", "json", (), 1, 1, 10, 0, 2.0)
    assert single.describe() == "exported 1 message of /s in 2.0 s:\n  1 json file (10 B) under /o"


# Starts a child the way pyspark starts the JVM (inheriting fd 2) inside quiet_jvm_launch, after a line of
# this process's own.
_LAUNCH = """\
import subprocess, sys, time
from rocketstore.spark.progress import quiet_jvm_launch
with quiet_jvm_launch():
    child = subprocess.Popen([sys.executable, "-c", sys.argv[1]])
print("after the launch", file=sys.stderr, flush=True)
child.wait()
time.sleep(0.5)  # the forwarding thread passes the child's last line on
"""
_JVM = """\
import sys, time
print("WARNING: Using incubator modules: jdk.incubator.vector", file=sys.stderr, flush=True)
time.sleep(0.5)
print("12:00:01 ERROR SparkContext: a real error", file=sys.stderr, flush=True)
"""


def test_the_jvm_start_warning_is_dropped_and_its_other_lines_kept():
    done = subprocess.run([sys.executable, "-c", _LAUNCH, _JVM], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYSPARK_GATEWAY_PORT": ""}, check=False)
    assert done.returncode == 0, done.stderr
    assert not any(noise in done.stderr for noise in JVM_NOISE)
    assert done.stderr.splitlines() == ["after the launch", "12:00:01 ERROR SparkContext: a real error"]


def test_the_jobs_summary_prints_an_aligned_table():
    from rocketstore.spark.jobs import _text_table

    rows = [{"topic": "TopicA", "queueId": 0, "messages": 160}, {"topic": "B", "queueId": 11, "messages": 7}]
    assert _text_table(["topic", "queueId", "messages"], rows).splitlines() == [
        "topic   queueId  messages",
        "TopicA        0       160",
        "B            11         7",
    ]
    assert _text_table(["topic"], []) == "topic\n(no messages)"
