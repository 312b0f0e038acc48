"""The HTML report: one self-contained page (inline CSS, PNG plots embedded as base64) about a store.

    from rocketstore.report.html import build_report
    summary = build_report(spark, "/data/store", "report.html")

Each plot is a `<section id="<name>">` with one heading (its title, said once) and either a
`<figure id="plot-<name>">` holding one `<img src="data:image/png;base64,...">` or, when there is nothing
to plot (no consumer groups, no index files...), one `<p class="empty">` line saying so. The page can be
mailed or archived as one file; it holds no script. Needs the `report` extra (matplotlib) and Spark.
"""

from __future__ import annotations

import base64
import html
import os
import time
from collections.abc import Callable
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
body { font-family: system-ui, sans-serif; margin: 2rem auto; padding: 0 1rem; max-width: 62rem; color: #222;
       overflow-wrap: anywhere; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; max-width: 100%; }
td, th { padding: .2rem .8rem; border-bottom: 1px solid #ddd; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
td.n, th, table.compact td { overflow-wrap: normal; }
figure { margin: .5rem 0; } figure img { display: block; max-width: 100%; height: auto; border: 1px solid #eee; }
p.empty { color: #555; font-style: italic; }
p.about { color: #333; margin: .3rem 0 0; max-width: 54rem; line-height: 1.4; }
"""


@dataclass(frozen=True)
class ReportSummary:
    """What `build_report` wrote."""

    out: str
    messages: int
    queues: int
    index_files: int
    plots: tuple[str, ...]
    """ids of the sections drawn as a plot (the others say in one line that there was nothing to plot)."""
    html_bytes: int
    store: str = ""
    topics: int = 0
    seconds: float = 0.0
    """Wall time of `build_report`."""

    def to_dict(self) -> dict[str, Any]:
        return {"out": self.out, "messages": self.messages, "queues": self.queues,
                "index_files": self.index_files, "plots": list(self.plots), "html_bytes": self.html_bytes,
                "store": self.store, "topics": self.topics, "seconds": round(self.seconds, 2)}

    def describe(self) -> str:
        """What the page holds and where it is, in a few lines for a reader."""
        from rocketstore._readable import human_bytes, human_seconds

        return (f"wrote the report on {self.store} to {self.out} ({human_bytes(self.html_bytes)}) in "
                f"{human_seconds(self.seconds)}:\n"
                f"  {_count(self.messages, 'message')} in {_count(self.topics, 'topic')} and "
                f"{_count(self.queues, 'queue')}, {_count(self.index_files, 'index file')}, "
                f"{_count(len(self.plots), 'plot')}; open it in a browser")


def _count(n: int, noun: str) -> str:
    return f"{n} {noun if n == 1 else noun + 's'}"


def _cell(value: Any) -> str:
    css = ' class="n"' if isinstance(value, int) else ""
    return f"<td{css}>{html.escape('' if value is None else str(value))}</td>"


def _table(headers: list[str], rows: list[list[Any]], css: str = "") -> str:
    """A table; `css="compact"` for one whose cells are short words that must not break inside."""
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    attr = f' class="{css}"' if css else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclass(frozen=True)
class Section:
    """One rendered plot of the page: its title and PNG, or the line shown instead of an empty plot."""

    title: str
    png: bytes | None = None
    empty: str = ""
    about: str = ""
    """The sentence under the plot."""


def _section(plot_id: str, section: Section) -> str:
    title = html.escape(section.title)
    if section.png is None:
        body = f'<p class="empty">{html.escape(section.empty)}</p>'
    else:
        data = base64.b64encode(section.png).decode("ascii")
        body = f'<figure id="plot-{plot_id}"><img alt="{title}" src="data:image/png;base64,{data}"></figure>'
        if section.about:
            body += f'<p class="about">{html.escape(section.about)}</p>'
    return f'<section id="{plot_id}"><h2>{title}</h2>{body}</section>'


def render_section(plot: plots.Plot) -> Section:
    """The plot rendered to PNG with its sentence, or its empty line."""
    if plot.figure is None:
        return Section(plot.title, empty=plot.empty)
    return Section(plot.title, plots.render_png(plot.figure), about=plot.about)


def render_page(stats: StoreStats, sections: dict[str, Section]) -> str:
    """The whole HTML page for `stats` with its rendered plot `sections` (id -> section), in order."""
    now = datetime.now(tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    queue_rows = [[q.topic, q.queue_id, q.min_offset, q.max_offset, q.depth,
                   ", ".join(f"{g}: {lag}" for g, lag in sorted(q.lags.items()))] for q in stats.queues]
    zone = plots.time_zone()
    index_rows = [[f.name, plots.span_label(f.begin_timestamp, f.end_timestamp, zone) if f.begin_timestamp > 0
                   else "", f"{f.entries} of {f.capacity}", f"{100 * f.fill:.0f} %", f"{f.slots_used} of {f.slots}",
                   max(f.chain_lengths, default=0)] for f in stats.index_files]
    index_note = ""
    if stats.index_files:
        last = stats.index_files[-1]
        index_note = (f'<p class="about">A file holds {last.capacity} keys: the configured maxIndexNum '
                      f"({last.configured}) less entry 0, which RocketMQ never writes (a hash slot holding 0 "
                      f"means empty). Times are local ({html.escape(plots.zone_name(zone))}).</p>")
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f"<title>rocketstore report: {html.escape(stats.store)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>rocketstore report</h1><p>{html.escape(stats.store)}, generated {now}</p>",
        "<h2>Summary</h2>", _table(["", "value"], [[k, v] for k, v in summary_rows(stats)]),
        *(_section(plot_id, section) for plot_id, section in sections.items()),
        "<h2>Queues</h2>", _table(["topic", "queue", "min offset", "max offset", "depth", "lag by group"], queue_rows),
        "<h2>Index files</h2>",
        _table(["file", "entries stored", "keys", "fill", "hash slots used", "longest chain"], index_rows,
               "compact"),
        index_note,
        "</body></html>",
    ]
    return "\n".join(parts)


def build_report(spark: SparkSession, store_path: str | os.PathLike[str], out: str | os.PathLike[str],
                 config: StoreConfig | None = None, *,
                 progress: Callable[[str], None] | None = None) -> ReportSummary:
    """Gather the store's figures with Spark, plot them and write the page to `out`.

    Args:
        spark: a Spark session with the `rocketstore` data source registered.
        store_path: the store root (opened read-only).
        out: the HTML file to write (replaced if it exists).
        config: the store's geometry; None uses the geometry the store recorded.
        progress: called with the name of each step as it starts.

    Raises:
        ImportError: matplotlib (the `report` extra) is missing; checked before anything else is done.
        RocketStoreError: the store cannot be opened with this config.
        OSError: `out` cannot be written.
    """
    plots.require_matplotlib()
    began = time.monotonic()
    stage = progress or (lambda name: None)
    stats = gather(spark, Path(store_path), config, stage)
    sections: dict[str, Section] = {}
    for plot_id, build in plots.PLOTS.items():
        stage(f"drawing the plots ({len(sections) + 1} of {len(plots.PLOTS)})")
        sections[plot_id] = render_section(build(stats))
    stage("writing the page")
    page = render_page(stats, sections)
    target = Path(out)
    temp = target.with_name(f".{target.name}.tmp")
    temp.write_text(page, encoding="utf-8")
    temp.replace(target)
    drawn = tuple(plot_id for plot_id, section in sections.items() if section.png is not None)
    return ReportSummary(str(target), stats.messages, len(stats.queues), len(stats.index_files), drawn,
                         len(page.encode("utf-8")), str(store_path), len({q.topic for q in stats.queues}),
                         time.monotonic() - began)
