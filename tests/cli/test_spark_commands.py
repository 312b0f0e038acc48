"""The Spark commands (`report`, `export`, `rebuild`, `demo`), each a real local Spark job."""

from __future__ import annotations

import base64
import io
import shutil
import struct
from datetime import datetime, timezone
from html.parser import HTMLParser
from pathlib import Path

import pytest

from .cliharness import tree_digest

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
    out = tmp_path / "report.html"
    before = tree_digest(golden_store)
    summary = cli("report", golden_store, out, *golden_flags, "--json", timeout=SPARK_TIMEOUT_S).json()
    assert tree_digest(golden_store) == before
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


def test_export_writes_the_chosen_topics_as_parquet(cli, golden_store, golden_flags, golden_expected,
                                                    tmp_path: Path):
    import pyarrow.parquet as pq

    out = tmp_path / "export"
    expected = {m["msgId"]: m for m in golden_expected["messages_in_commitlog_order"]
                if m["topic"] in ("TopicA", "TopicC")}
    summary = cli("export", golden_store, out, *golden_flags, "--topics", "TopicA,TopicC",
                  "--partition-by", "topic,queueId", "--json", timeout=SPARK_TIMEOUT_S).json()
    assert summary["rows"] == len(expected) and summary["partition_by"] == ["topic", "queueId"]
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


def test_rebuild_reproduces_the_consume_queues_and_index(cli, golden_store, golden_flags):
    original_queues = tree_digest(golden_store / "consumequeue")
    original_index = sorted(p.read_bytes() for p in (golden_store / "index").iterdir())
    shutil.rmtree(golden_store / "consumequeue")
    shutil.rmtree(golden_store / "index")
    report = cli("rebuild", golden_store, *golden_flags, "--json", timeout=SPARK_TIMEOUT_S).json()
    assert report["queues"] == 12 and report["queue_entries"] == 520
    assert tree_digest(golden_store / "consumequeue") == original_queues
    assert sorted(p.read_bytes() for p in (golden_store / "index").iterdir()) == original_index
    assert cli("verify", golden_store, *golden_flags, "--json").json()["ok"]


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

