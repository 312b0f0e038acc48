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
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.axis import Axis
    from matplotlib.figure import Figure

    from rocketstore.report.stats import IndexFileStats, QueueStats, StoreStats

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
    about: str = ""
    """The sentence under the figure: what it shows, what good and bad look like."""


def time_zone() -> tzinfo:
    """The zone the report's times are drawn in: this machine's local zone (its offset now)."""
    zone = datetime.now().astimezone().tzinfo
    return zone if zone is not None else timezone.utc


def zone_name(zone: tzinfo, at: datetime | None = None) -> str:
    """`UTC`, or `UTC+02:00 (CEST)`: the zone as the axis labels name it."""
    moment = (at or datetime.now(tz=timezone.utc)).astimezone(zone)
    offset = moment.utcoffset() or timedelta(0)
    if not offset:
        return "UTC"
    sign, minutes = ("+" if offset >= timedelta(0) else "-"), abs(int(offset.total_seconds())) // 60
    name = moment.tzname() or ""
    label = f"UTC{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    return label if not name or name.startswith(("UTC", "+", "-")) else f"{label} ({name})"


def local_time(timestamp_ms: int, zone: tzinfo) -> datetime:
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=timezone.utc).astimezone(zone)


def time_axis_format(span_ms: int) -> str:
    """The strftime format of a time axis's tick labels for a span of `span_ms`: seconds for up to
    ten minutes, minutes for up to two days, the date past that (the date of a shorter span goes in the
    axis label)."""
    if span_ms <= 10 * 60_000:
        return "%H:%M:%S"
    if span_ms <= 2 * 86_400_000:
        return "%H:%M" if span_ms <= 86_400_000 else "%d %b %H:%M"
    return "%d %b" if span_ms <= 300 * 86_400_000 else "%b %Y"


def _same_day(first_ms: int, last_ms: int, zone: tzinfo) -> bool:
    return local_time(first_ms, zone).date() == local_time(last_ms, zone).date()


def span_label(begin_ms: int, end_ms: int, zone: tzinfo, *, precise: bool = False, dated: bool = True) -> str:
    """`03:53:36 – 03:53:38` (with the day, `22 Nov 03:53 – 23 Nov 10:12`, when `dated`): a time span
    in `zone`, to the second (the millisecond when `precise`)."""
    begin, end = local_time(begin_ms, zone), local_time(end_ms, zone)
    clock = "%H:%M:%S" if dated is False or begin.date() == end.date() else "%H:%M"
    if precise:
        clock = "%H:%M:%S.%f"

    def text(moment: datetime) -> str:
        shown = moment.strftime(clock)
        return shown[:-3] if precise else shown

    if not dated:
        return f"{text(begin)} – {text(end)}"
    if begin.date() == end.date():
        return f"{begin.strftime('%d %b')} {text(begin)} – {text(end)}"
    return f"{begin.strftime('%d %b')} {text(begin)} – {end.strftime('%d %b')} {text(end)}"


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
    from matplotlib.dates import AutoDateLocator, DateFormatter, date2num

    unit = rate_unit(stats.bucket_ms)
    title = f"Messages stored per {unit}, per topic"
    if not stats.per_bucket:
        return Plot(title, empty="no messages")
    zone = time_zone()
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
    first_ms, last_ms = first * stats.bucket_ms, (last + 1) * stats.bucket_ms
    ax.xaxis.set_major_locator(AutoDateLocator(tz=zone, minticks=4, maxticks=10))
    ax.xaxis.set_major_formatter(DateFormatter(time_axis_format(last_ms - first_ms), tz=zone))
    day = local_time(first_ms, zone).strftime("%a %d %b %Y") if _same_day(first_ms, last_ms - 1, zone) else ""
    where = f"local time, {zone_name(zone, local_time(first_ms, zone))}"
    ax.set_xlabel(f"store time on {day} ({where})" if day else f"store time ({where})")
    ax.set_ylabel(f"messages per {unit}")
    ax.set_ylim(bottom=0)
    _counts(ax.yaxis)
    _legend_outside(ax)
    about = (f"Each line counts the messages of one topic that the broker wrote in each {unit}. A steady line "
             "is a steady load; stretches at zero are times nothing was written to that topic (producers or "
             "the broker stopped), and tall spikes are bursts the consumers have to catch up with.")
    return Plot(title, fig, about=about)


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
    about = ("How many messages take each number of bytes in the commitlog (body, topic, properties and the "
             "fixed record header). One narrow hump is usual; a long tail to the right means some producers "
             "send much larger bodies, which fill the disk faster (RocketMQ refuses a message over "
             "maxMessageSize, 4 MiB by default).")
    return Plot(title, fig, about=about)


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
    about = ("How many messages each queue holds on disk now. Bars of about the same length mean the "
             "producers spread their messages evenly over a topic's queues; one bar much longer than the "
             "others is a hot queue (a skewed sharding key), which one consumer has to drain alone.")
    return Plot(title, fig, about=about)


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
    about = ("How many stored messages each consumer group has not committed yet, queue by queue. Short bars "
             "are healthy; a long bar, or one that is longer in every new report, means that group's "
             "consumers are slower than the producers or have stopped.")
    return Plot(title, fig, about=about)


def index_labels(files: Sequence[IndexFileStats], zone: tzinfo) -> tuple[list[str], str]:
    """(a label per index file, the axis label): each file by the store times of its first and last
    entry in `zone` (the day in the axis label when every file lies in one day; to the millisecond when
    seconds would make two labels alike); a file without entries by its name."""
    spans = [(f.begin_timestamp, f.end_timestamp) for f in files if f.entries and f.begin_timestamp > 0]
    if not spans:
        return [f.name for f in files], "index file"
    first, last = min(b for b, _ in spans), max(e for _, e in spans)
    one_day = _same_day(first, last, zone)
    labels: list[str] = []
    for precise in (False, True):
        labels = [span_label(f.begin_timestamp, f.end_timestamp, zone, precise=precise, dated=not one_day)
                  if f.entries and f.begin_timestamp > 0 else f"{f.name} (no entries)" for f in files]
        if len(set(labels)) == len(labels):
            break
    where = f"local time, {zone_name(zone, local_time(first, zone))}"
    day = f" on {local_time(first, zone).strftime('%a %d %b %Y')}" if one_day else ""
    return labels, f"each row one index file: store times of its first – last entry{day} ({where})"


def index_fill(stats: StoreStats) -> Plot:
    title = "Index file fill (entries / usable entries)"
    if not stats.index_files:
        return Plot(title, empty="no index files")
    files = stats.index_files
    if len(files) > MAX_BARS:
        title += f", the {MAX_BARS} newest of {len(files)} files"
        files = files[-MAX_BARS:]
    labels, axis_label = index_labels(files, time_zone())
    fig, ax, rows = _bar_rows(labels)
    bars = ax.barh(rows, [100 * f.fill for f in files], height=0.7)
    ax.bar_label(bars, [f"{f.entries} of {f.capacity}" + (" (full)" if f.full else "") for f in files],
                 fontsize="x-small", padding=2)
    ax.set_xlim(0, 135)  # room for the bar labels right of a full file's bar
    ax.set_xticks(range(0, 101, 20))
    ax.set_xlabel(f"% of usable entries\n{axis_label}")
    capacity, configured = files[-1].capacity, files[-1].configured
    about = (f"How full each index file is. A file holds {capacity} keys: the {configured} entries configured "
             "(maxIndexNum) less entry 0, which RocketMQ never writes. Every file but the newest should be "
             "full, since the store starts a new file only when the last one is full; an older file part full "
             "is unusual and worth checking with rocketstore verify.")
    return Plot(title, fig, about=about)


def index_chains(stats: StoreStats) -> Plot:
    title = "Hash-slot chain lengths (all index files)"
    if not stats.index_files:
        return Plot(title, empty="no index files")
    chains: Counter[int] = Counter()
    for f in stats.index_files:
        chains.update(f.chain_lengths)
    if not chains:
        return Plot(title, empty="no index entries")
    from matplotlib.ticker import FuncFormatter

    fig, ax = _figure()
    lengths = sorted(chains)
    ax.bar(lengths, [chains[n] for n in lengths])
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}" if value >= 1 else f"{value:g}"))
    ax.set_xlabel("keys chained in one slot")
    _counts(ax.xaxis)
    ax.set_ylabel("slots")
    about = ("How many keys share one hash slot of an index file, and how many slots have chains that long. "
             "Most slots should hold one to a few keys; long chains make every key lookup read many entries, "
             "a sign of too few slots (maxHashSlotNum) for the keys or of one key on very many messages.")
    return Plot(title, fig, about=about)


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
    about = ("How many bytes each kind of store file takes: its size, and what the file system has allocated "
             "for it: less for a file not written to its end yet, more for many small files (each takes whole "
             "disk blocks). The commitlog should be by far the largest; consume queues and index grow with "
             "the number of messages and keys.")
    return Plot(title, fig, about=about)


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
