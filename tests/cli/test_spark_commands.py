"""The Spark commands (`report`, `export`, `rebuild`, `demo`), each a real local Spark job."""

from __future__ import annotations

import base64
import io
import os
import pty
import re
import select
import shutil
import struct
import subprocess
import sys
import time
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from .cliharness import command_env, run_cli, tree_digest

pytestmark = pytest.mark.spark

PLOT_IDS = ("message-rate", "message-sizes", "queue-depth", "consumer-lag", "index-fill", "index-chains", "disk-use")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SPARK_TIMEOUT_S = 600


class _Figures(HTMLParser):
    """Collects `<figure id=...>` ids and the `src` of the image inside each."""

    def __init__(self) -> None:
        super().__init__()
        self.images: dict[str, str] = {}
        self.external: list[str] = []
        self._figure: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "figure":
            self._figure = values.get("id")
        elif tag == "img" and self._figure is not None:
            self.images[self._figure] = values.get("src") or ""
        if tag in ("link", "script") and (values.get("href") or values.get("src")):
            self.external.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "figure":
            self._figure = None


def _png_pixels(png: bytes):
    from matplotlib.image import imread

    return imread(io.BytesIO(png), format="png")


def test_report_writes_one_page_with_every_plot(cli, golden_store, golden_flags, golden_expected,
                                                tmp_path: Path):
    from rocketstore.report import plots

    out = tmp_path / "report.html"
    before = tree_digest(golden_store)
    result = cli("report", golden_store, out, *golden_flags, "--json", timeout=SPARK_TIMEOUT_S)
    summary = result.json()
    assert result.err == ""  # no JVM lines, no progress off a terminal: the JSON document alone
    assert tree_digest(golden_store) == before
    assert summary["topics"] == 3 and summary["store"] == str(golden_store) and summary["seconds"] > 0
    drawn = [plot_id for plot_id in PLOT_IDS if plot_id != "consumer-lag"]  # the golden store has no groups
    assert summary["plots"] == drawn and summary["messages"] == 520
    page = out.read_text(encoding="utf-8")
    figures = _Figures()
    figures.feed(page)
    assert figures.external == []  # self-contained
    assert set(figures.images) == {f"plot-{plot_id}" for plot_id in drawn}
    assert '<section id="consumer-lag"><h2>Consumer lag per group and queue</h2><p class="empty">no consumer groups' \
        in page
    # the store's 5.6 seconds are counted per second (they were once scaled up to 3,000 "per minute")
    assert "<h2>Messages stored per second, per topic</h2>" in page
    times = [m["storeTimestamp"] for m in golden_expected["messages_in_commitlog_order"]]
    for label, stored in (("first", min(times)), ("last", max(times))):
        iso = datetime.fromtimestamp(stored // 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
        assert f"<td>{label} stored (UTC)</td><td>{iso}.{stored % 1000:03d}Z</td>" in page
        assert str(stored) not in page
    for plot_id, src in figures.images.items():
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix), plot_id
        png = base64.b64decode(src[len(prefix):])
        assert png.startswith(PNG_SIGNATURE), plot_id
        width, height = struct.unpack(">II", png[16:24])
        assert width > 100 and height > 100, plot_id
        pixels = _png_pixels(png)
        assert pixels.std() > 0.01, f"{plot_id} is blank"
    for topic in ("TopicA", "TopicB", "TopicC"):
        assert topic in page
    assert all(name in page for name in ("20261122035336573", "20261122035342100"))
    # a sentence under every plot; index files by the store times of their entries, in local time
    assert page.count('<p class="about">') == len(drawn) + 1  # and one under the index table
    assert "A file holds 399 keys: the configured maxIndexNum (400) less entry 0" in page
    assert page.count("<td>399 of 399</td>") == 4 and "<td>30 of 399</td>" in page
    zone = plots.time_zone()
    first_file = plots.span_label(min(times), min(times), zone).split(" – ")[0]  # the first key's store time
    assert f"<td>{first_file} – " in page


def test_export_writes_the_chosen_topics_as_parquet(cli, golden_store, golden_flags, golden_expected,
                                                    tmp_path: Path):
    import pyarrow.parquet as pq

    out = tmp_path / "export"
    expected = {m["msgId"]: m for m in golden_expected["messages_in_commitlog_order"]
                if m["topic"] in ("TopicA", "TopicC")}
    result = cli("export", golden_store, out, *golden_flags, "--topics", "TopicA,TopicC",
                 "--partition-by", "topic,queueId", timeout=SPARK_TIMEOUT_S)
    fields = {row["field"]: row["value"] for row in result.tsv()}  # stdout is a pipe: field<TAB>value lines
    assert fields["rows"] == str(len(expected)) and fields["partition_by"] == '["topic", "queueId"]'
    data_files = [p for p in out.rglob("*") if p.is_file() and not p.name.startswith(("_", "."))]
    assert fields["files"] == str(len(data_files)) and fields["partitions"] == "8"
    assert fields["bytes"] == str(sum(p.stat().st_size for p in data_files))
    # stderr is not a terminal: no progress, no JVM lines, only the summary for a reader
    first, second = result.err.splitlines()
    assert re.fullmatch(rf"exported {len(expected)} messages of {re.escape(str(golden_store))} in "
                        r"([0-9.]+ s|\d+ min \d\d s):", first), first
    assert re.fullmatch(rf"  {len(data_files)} parquet files \([0-9.]+ KiB, 8 partitions by topic, queueId\) "
                        rf"under {re.escape(str(out.absolute()))}", second), second
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["topic=TopicA", "topic=TopicC"]
    assert sorted(p.name for p in (out / "topic=TopicA").iterdir()) == [f"queueId={q}" for q in range(4)]
    table = pq.read_table(out)
    assert table.num_rows == len(expected)
    rows = table.select(["msgId", "queueOffset", "storeTimestamp", "topic", "queueId"]).to_pylist()
    assert {r["msgId"] for r in rows} == set(expected)
    for row in rows:
        want = expected[row["msgId"]]
        assert (row["queueOffset"], row["storeTimestamp"], str(row["topic"]), int(row["queueId"])) == (
            want["queueOffset"], want["storeTimestamp"], want["topic"], want["queueId"])
    again = cli("export", golden_store, out, *golden_flags, "--json")
    assert again.code == 2 and "exists" in again.err


def _run_with_a_terminal_on_stderr(*args: str | Path) -> tuple[int, str, str]:
    """Run the command with stdout a pipe and stderr a pseudo-terminal: (exit code, stdout, what the
    terminal received)."""
    main, terminal = pty.openpty()
    argv = [sys.executable, "-m", "rocketstore.cli", *(str(a) for a in args)]
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal,
                            env=command_env({"ROCKETSTORE_PROGRESS": ""}))
    os.close(terminal)
    received = bytearray()
    deadline = time.monotonic() + SPARK_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([main], [], [], 1.0)
        if not ready:
            continue
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: every process holding the terminal has exited
            break
        if not chunk:
            break
        received += chunk
    os.close(main)
    out = proc.stdout.read().decode() if proc.stdout else ""
    code = proc.wait(timeout=60)
    return code, out, received.decode("utf-8", "replace").replace("\r\n", "\n")


def test_rebuild_reproduces_the_consume_queues_and_index(golden_store, golden_flags):
    original_queues = tree_digest(golden_store / "consumequeue")
    original_index = sorted(p.read_bytes() for p in (golden_store / "index").iterdir())
    shutil.rmtree(golden_store / "consumequeue")
    shutil.rmtree(golden_store / "index")
    code, out, terminal = _run_with_a_terminal_on_stderr("rebuild", golden_store, *golden_flags)
    assert code == 0, terminal
    fields = dict(line.split("\t") for line in out.splitlines()[1:])
    assert (fields["queues"], fields["queue_entries"], fields["index_files"], fields["index_keys"]) == (
        "12", "520", "5", "1626")
    queue_files = [p for p in (golden_store / "consumequeue").rglob("*") if p.is_file()]
    assert fields["queue_files"] == str(len(queue_files)) == "13"  # TopicA/0's 160 entries fill 2 files
    assert tree_digest(golden_store / "consumequeue") == original_queues
    assert sorted(p.read_bytes() for p in (golden_store / "index").iterdir()) == original_index
    # on the terminal: one line redrawn in place (carriage returns, no newline) through the stages, with
    # Spark's tasks, erased before the summary
    progress, _, summary = terminal.rpartition("\x1b[K")
    frames = [frame.removesuffix("\x1b[K") for frame in progress.split("\r") if frame.strip("\x1b[K")]
    assert frames and "\n" not in progress, terminal
    assert all(frame.startswith("rebuild: ") for frame in frames), frames
    stages = [frame.split(" | ")[0] for frame in frames]
    for stage in ("starting Spark", "reading the commitlog (1 range)", "writing consume queues",
                  "writing index files"):
        assert f"rebuild: {stage}" in stages, stages
    assert any(re.search(r" \| Spark tasks \d+/\d+ done", frame) for frame in frames), frames
    assert "WARNING" not in terminal and "log level" not in terminal
    first, *rest = summary.splitlines()
    assert re.fullmatch(rf"rebuilt {re.escape(str(golden_store))} from its commitlog "
                        rf"\({int(fields['commitlog_bytes']) / 1024:.1f} KiB read as 1 range\) in "
                        r"([0-9.]+ s|\d+ min \d\d s):", first), first
    assert rest == [
        f"  consume queues: 12 queues, 520 entries in 13 files (25.4 KiB) under {golden_store / 'consumequeue'}",
        f"  index: 1626 keys in 5 files (41.2 KiB) under {golden_store / 'index'}",
    ]
    assert run_cli("verify", golden_store, *golden_flags, "--json").json()["ok"]


def test_demo_writes_a_store_and_summarises_it_with_spark(cli, tmp_path: Path):
    store, page = tmp_path / "demo-store", tmp_path / "demo.html"
    result = cli("demo", store, "--messages", "3000", "--report", page, "--json", timeout=SPARK_TIMEOUT_S)
    document = result.json()
    assert "write the store" in result.err and "Spark SQL summary" in result.err  # the progress bars
    assert document["messages_written"] == 3000 and document["exported_rows"] == 3000
    assert Path(document["export"]) == tmp_path / "demo-store.parquet"
    summary = {(row["topic"], row["queueId"]): row for row in document["summary"]}
    topics = cli("topics", store, "--json").json()
    assert {(q["topic"], q["queue_id"]): q["message_count"] for q in topics["queues"]} == {
        key: row["messages"] for key, row in summary.items()}
    assert {topic for topic, _ in summary} == {"Orders", "Payments", "Shipping", "Audit"}
    assert sum(row["messages"] for row in summary.values()) == 3000
    assert document["rebuild"]["queue_entries"] == 3000
    assert cli("verify", store, "--json").json()["ok"]
    groups = {row["group"] for row in cli("progress", store, "--json").json()["groups"]}
    assert groups == {"billing-service", "fulfilment", "audit-archiver"}
    figures = _Figures()
    figures.feed(page.read_text(encoding="utf-8"))
    assert set(figures.images) == {f"plot-{plot_id}" for plot_id in PLOT_IDS}  # with consumer lag

