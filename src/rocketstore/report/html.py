"""The HTML report: one self-contained page (inline CSS, PNG plots embedded as base64) about a store.

    from rocketstore.report.html import build_report
    summary = build_report(spark, "/data/store", "report.html")

Each plot is a `<figure id="plot-<name>">` holding one `<img src="data:image/png;base64,...">`, so
the page can be mailed or archived as one file. Needs the `report` extra (matplotlib) and Spark.
"""

from __future__ import annotations

import base64
import html
import os
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocketstore.report import plots
from rocketstore.report.stats import StoreStats, gather, summary_rows

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from rocketstore import StoreConfig

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 62rem; color: #222; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; } td, th { padding: .2rem .8rem; border-bottom: 1px solid #ddd; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: .9rem; }
"""


@dataclass(frozen=True)
class ReportSummary:
    """What `build_report` wrote."""

    out: str
    messages: int
    queues: int
    index_files: int
    plots: tuple[str, ...]
    html_bytes: int

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.out, "messages": self.messages, "queues": self.queues,
                "index_files": self.index_files, "plots": list(self.plots), "html_bytes": self.html_bytes}


def _cell(value: Any) -> str:
    css = ' class="n"' if isinstance(value, int) else ""
    return f"<td{css}>{html.escape('' if value is None else str(value))}</td>"


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(plot_id: str, caption: str, png: bytes) -> str:
    data = base64.b64encode(png).decode("ascii")
    return (f'<figure id="plot-{plot_id}"><img alt="{html.escape(caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{html.escape(caption)}</figcaption></figure>')


def render_page(stats: StoreStats, figures: dict[str, tuple[str, bytes]]) -> str:
    """The whole HTML page for `stats` with the rendered `figures` (id -> (caption, PNG))."""
    now = datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    queue_rows = [[q.topic, q.queue_id, q.min_offset, q.max_offset, q.depth,
                   ", ".join(f"{g}: {lag}" for g, lag in sorted(q.lags.items()))] for q in stats.queues]
    index_rows = [[f.name, f.entries, f.capacity, f"{100 * f.fill:.1f} %", f.slots_used, f.slots,
                   max(f.chain_lengths, default=0)] for f in stats.index_files]
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>rocketstore report: {html.escape(stats.store)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>rocketstore report</h1><p>{html.escape(stats.store)}, generated {now}</p>",
        "<h2>Summary</h2>", _table(["", "value"], [[k, v] for k, v in summary_rows(stats)]),
        *(f"<h2>{html.escape(caption)}</h2>" + _figure(pid, caption, png) for pid, (caption, png) in figures.items()),
        "<h2>Queues</h2>", _table(["topic", "queue", "min offset", "max offset", "depth", "lag by group"], queue_rows),
        "<h2>Index files</h2>",
        _table(["file", "entries", "capacity", "fill", "slots used", "slots", "longest chain"], index_rows),
        "</body></html>",
    ]
    return "\n".join(parts)


def build_report(spark: SparkSession, store_path: str | os.PathLike[str], out: str | os.PathLike[str],
                 config: StoreConfig | None = None) -> ReportSummary:
    """Gather the store's figures with Spark, plot them and write the page to `out`.

    Args:
        spark: a session with the `rocketstore` data source registered.
        store_path: the store root (opened read-only).
        out: the HTML file to write (replaced if it exists).
        config: the store's geometry; None uses the geometry the store recorded.

    Raises:
        RocketStoreError: the store cannot be opened with this config.
        OSError: `out` cannot be written.
    """
    stats = gather(spark, Path(store_path), config)
    figures: dict[str, tuple[str, bytes]] = {}
    for plot_id, (caption, build) in plots.PLOTS.items():
        figures[plot_id] = (caption, plots.render_png(build(stats)))
    page = render_page(stats, figures)
    target = Path(out)
    temp = target.with_name(f".{target.name}.tmp")
    temp.write_text(page, encoding="utf-8")
    temp.replace(target)
    return ReportSummary(str(target), stats.messages, len(stats.queues), len(stats.index_files),
                         tuple(figures), len(page.encode("utf-8")))
