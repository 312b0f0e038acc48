"""The report's plots: one matplotlib figure per section of the page, rendered to PNG bytes (no display,
no pyplot state).

Each builder takes the gathered `StoreStats` and returns a `Plot`: the section's title, said once (the
page's heading; figures carry no title or caption of their own), and its figure, or the one line the
page shows instead when there is nothing to plot. Units follow the data: the message rate is counted per
time bucket sized from the store's time span and labelled with that bucket, disk use in B/KiB/MiB/GiB.
Long lists (queues, index files) are horizontal bars, one row per item, the figure growing with the rows
up to `MAX_BARS`. matplotlib (the `report` extra) is imported only when a figure is built.
"""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

    from rocketstore.report.stats import QueueStats, StoreStats

REPORT_EXTRA = "pip install 'rocketstore[report]'"
WIDTH_IN = 9.0
HEIGHT_IN = 3.6
DPI = 100
BAR_ROW_IN = 0.26
"""Height of one row of a horizontal bar chart."""
MAX_BARS = 40
"""Rows of a horizontal bar chart; past this the chart shows the largest (or newest) and says so."""
MAX_LINES = 8
"""Topics drawn as their own line in the message rate; the rest are summed into one line."""
LABEL_CHARS = 32
BYTE_UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
TIME_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000))
# a bucket of exactly one unit reads "per second", not "per 1 s"
RATE_UNIT_NAMES = {1000: "second", 60_000: "minute", 3_600_000: "hour", 86_400_000: "day"}


@dataclass(frozen=True)
class Plot:
    """One section of the report: its title and figure, or the line shown when there is nothing to plot."""

    title: str
    figure: Figure | None = None
    empty: str = ""


def require_matplotlib() -> None:
    """Check that the `report` extra is installed, before any work that needs it.

    Raises:
        ImportError: matplotlib cannot be imported; the message names the install command.
    """
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise ImportError(f"the HTML report needs matplotlib: {REPORT_EXTRA} ({exc})") from exc


def bucket_label(bucket_ms: int) -> str:
    """`5 s`, `15 min`, `6 h`, `2 d` (or `250 ms`): the width of one time bucket."""
    for unit, ms in TIME_UNITS:
        if bucket_ms % ms == 0:
            return f"{bucket_ms // ms} {unit}"
    return f"{bucket_ms} ms"


def rate_unit(bucket_ms: int) -> str:
    """What one bucket of the message rate counts: `second`, `minute`, `hour`, `day` or a bucket label."""
    return RATE_UNIT_NAMES.get(bucket_ms) or bucket_label(bucket_ms)


def byte_unit(largest: float) -> tuple[str, int]:
    """(name, bytes) of the largest unit in which `largest` is at least 1 (bytes below 1 KiB)."""
    for name, size in BYTE_UNITS:
        if largest >= size:
            return name, size
    return BYTE_UNITS[-1]


def shorten(label: str, limit: int = LABEL_CHARS) -> str:
    """`label` cut to `limit` characters, its middle replaced by an ellipsis (ends tell names apart)."""
    if len(label) <= limit:
        return label
    head = (limit - 1) // 2
    return label[:head] + "…" + label[len(label) - (limit - 1 - head):]


def _figure(height_in: float = HEIGHT_IN) -> tuple[Figure, Axes]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(WIDTH_IN, height_in), layout="constrained")
    return fig, fig.subplots()


def _bar_rows(labels: Sequence[str], rows_per_label: float = 1.0) -> tuple[Figure, Axes, list[int]]:
    """A figure for horizontal bars, one row per label top to bottom; returns the row positions."""
    fig, ax = _figure(max(HEIGHT_IN / 2, 0.9 + BAR_ROW_IN * rows_per_label * len(labels)))
    rows = list(range(len(labels)))
    ax.set_yticks(rows, [shorten(label) for label in labels], fontsize="small")
    ax.set_ylim(len(labels) - 0.5, -0.5)  # first label on top
    return fig, ax, rows


def _counts(axis: Axis) -> None:
    """Ticks at whole numbers only: the axis counts messages, slots or entries."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _legend_outside(ax: Axes) -> None:
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)


def _queue_label(queue: QueueStats) -> str:
    return f"{shorten(queue.topic, LABEL_CHARS - 5)}/{queue.queue_id}"


def message_rate(stats: StoreStats) -> Plot:
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter, date2num

    unit = rate_unit(stats.bucket_ms)
    title = f"Messages stored per {unit}, per topic"
    if not stats.per_bucket:
        return Plot(title, empty="no messages")
    first = min(min(buckets) for buckets in stats.per_bucket.values())
    last = max(max(buckets) for buckets in stats.per_bucket.values())
    span = range(first, last + 1)  # buckets without messages are zero, not skipped
    edges = date2num([datetime.fromtimestamp(b * stats.bucket_ms / 1000, tz=timezone.utc)
                      for b in range(first, last + 2)])
    by_size = sorted(stats.per_bucket, key=lambda t: (-sum(stats.per_bucket[t].values()), t))
    lines = {topic: stats.per_bucket[topic] for topic in sorted(by_size[:MAX_LINES])}
    if len(by_size) > MAX_LINES:
        rest: Counter[int] = Counter()
        for topic in by_size[MAX_LINES:]:
            rest.update(stats.per_bucket[topic])
        lines[f"{len(by_size) - MAX_LINES} other topics"] = dict(rest)
    fig, ax = _figure()
    for topic, buckets in lines.items():
        ax.stairs([buckets.get(b, 0) for b in span], edges, label=shorten(topic), linewidth=1.5)
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.set_xlabel("store time (UTC)")
    ax.set_ylabel(f"messages per {unit}")
    ax.set_ylim(bottom=0)
    _counts(ax.yaxis)
    _legend_outside(ax)
    return Plot(title, fig)


def message_sizes(stats: StoreStats) -> Plot:
    title = "Record sizes (storeSize)"
    if not stats.size_counts:
        return Plot(title, empty="no messages")
    fig, ax = _figure()
    edges = stats.size_buckets
    # all records of one size make one bucket of width 0: draw it one byte wide
    widths = [max(b - a, 1.0) for a, b in zip(edges, edges[1:], strict=False)]
    ax.bar(edges[:-1], stats.size_counts, width=widths, align="edge", edgecolor="white", linewidth=0.5)
    ax.set_xlabel("record size (bytes)")
    ax.set_ylabel("messages")
    _counts(ax.yaxis)
    return Plot(title, fig)


def queue_depth(stats: StoreStats) -> Plot:
    title = "Queue depth (max offset - min offset)"
    if not stats.queues:
        return Plot(title, empty="no queues")
    queues = stats.queues
    if len(queues) > MAX_BARS:
        title += f", the {MAX_BARS} deepest of {len(queues)} queues"
        queues = sorted(queues, key=lambda q: (-q.depth, q.topic, q.queue_id))[:MAX_BARS]
    fig, ax, rows = _bar_rows([_queue_label(q) for q in queues])
    ax.bar_label(ax.barh(rows, [q.depth for q in queues], height=0.7), fontsize="x-small", padding=2)
    ax.margins(x=0.08)
    ax.set_xlabel("messages")
    _counts(ax.xaxis)
    return Plot(title, fig)


def consumer_lag(stats: StoreStats) -> Plot:
    title = "Consumer lag per group and queue"
    pairs = sorted(((group, q) for q in stats.queues for group in q.lags), key=lambda p: (p[0], p[1].topic,
                                                                                           p[1].queue_id))
    if not pairs:
        return Plot(title, empty="no consumer groups")
    if len(pairs) > MAX_BARS:
        title += f", the {MAX_BARS} most behind of {len(pairs)} (group, queue) pairs"
        pairs = sorted(pairs, key=lambda p: -p[1].lags[p[0]])[:MAX_BARS]
        pairs.sort(key=lambda p: (p[0], p[1].topic, p[1].queue_id))
    fig, ax, rows = _bar_rows([_queue_label(q) for _, q in pairs])
    for color, group in enumerate(dict.fromkeys(group for group, _ in pairs)):
        mine = [(row, q.lags[group]) for row, (g, q) in zip(rows, pairs, strict=True) if g == group]
        bars = ax.barh([row for row, _ in mine], [lag for _, lag in mine], height=0.7, color=f"C{color}",
                       label=shorten(group))
        ax.bar_label(bars, fontsize="x-small", padding=2)
    ax.margins(x=0.08)
    ax.set_xlabel("messages behind")
    _counts(ax.xaxis)
    _legend_outside(ax)
    return Plot(title, fig)


def index_fill(stats: StoreStats) -> Plot:
    title = "Index file fill (entries / capacity)"
    if not stats.index_files:
        return Plot(title, empty="no index files")
    files = stats.index_files
    if len(files) > MAX_BARS:
        title += f", the {MAX_BARS} newest of {len(files)} files"
        files = files[-MAX_BARS:]
    fig, ax, rows = _bar_rows([f.name for f in files])
    bars = ax.barh(rows, [100 * f.fill for f in files], height=0.7)
    ax.bar_label(bars, [f"{f.entries} of {f.capacity}" for f in files], fontsize="x-small", padding=2)
    ax.set_xlim(0, 115)
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel("% full")
    return Plot(title, fig)


def index_chains(stats: StoreStats) -> Plot:
    title = "Hash-slot chain lengths (all index files)"
    if not stats.index_files:
        return Plot(title, empty="no index files")
    chains: Counter[int] = Counter()
    for f in stats.index_files:
        chains.update(f.chain_lengths)
    if not chains:
        return Plot(title, empty="no index entries")
    fig, ax = _figure()
    lengths = sorted(chains)
    ax.bar(lengths, [chains[n] for n in lengths])
    ax.set_yscale("log")
    ax.set_xlabel("entries chained in one slot")
    _counts(ax.xaxis)
    ax.set_ylabel("slots")
    return Plot(title, fig)


def disk_use(stats: StoreStats) -> Plot:
    title = "Disk use by file kind"
    if not stats.disk_use:
        return Plot(title, empty="no files")
    kinds = list(stats.disk_use)
    unit, size = byte_unit(max(max(use) for use in stats.disk_use.values()))
    fig, ax, rows = _bar_rows(kinds, rows_per_label=1.5)
    ax.barh([r - 0.2 for r in rows], [stats.disk_use[k][0] / size for k in kinds], height=0.4, label="file size")
    ax.barh([r + 0.2 for r in rows], [stats.disk_use[k][1] / size for k in kinds], height=0.4,
            label="allocated on disk")
    ax.set_xlabel(unit)
    _legend_outside(ax)
    return Plot(title, fig)


# id -> builder; the order of the page. A section's id is its `<section>` (and figure) id on the page.
PLOTS: dict[str, Callable[[StoreStats], Plot]] = {
    "message-rate": message_rate,
    "message-sizes": message_sizes,
    "queue-depth": queue_depth,
    "consumer-lag": consumer_lag,
    "index-fill": index_fill,
    "index-chains": index_chains,
    "disk-use": disk_use,
}


def render_png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI)
    return out.getvalue()
