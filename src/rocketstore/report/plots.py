"""The report's plots as matplotlib figures, rendered to PNG bytes (no display, no pyplot state)."""

from __future__ import annotations

import io
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from rocketstore.report.stats import StoreStats

_MIB = 1024 * 1024
_SIZE = (9.0, 4.2)


def _figure(rows: int = 1) -> tuple[Figure, list[Axes]]:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(_SIZE[0], _SIZE[1] * rows), layout="constrained")
    axes = fig.subplots(rows, 1, squeeze=False)
    return fig, [row[0] for row in axes]


def _nothing(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def _bucket_label(bucket_ms: int) -> str:
    for unit, ms in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if bucket_ms % ms == 0:
            return f"{bucket_ms // ms} {unit}"
    return f"{bucket_ms} ms"


def messages_per_minute(stats: StoreStats) -> Figure:
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter

    fig, (ax,) = _figure()
    ax.set_title(f"Messages per minute, per topic ({_bucket_label(stats.bucket_ms)} buckets)")
    if not stats.per_bucket:
        _nothing(ax, "no messages")
        return fig
    scale = 60_000 / stats.bucket_ms
    for topic, buckets in sorted(stats.per_bucket.items()):
        first, last = min(buckets), max(buckets)
        xs = list(range(first, last + 1))  # empty buckets are zero, not skipped
        times = [datetime.fromtimestamp(b * stats.bucket_ms / 1000, tz=timezone.utc) for b in xs]
        ax.step(times, [buckets.get(b, 0) * scale for b in xs], where="post", label=topic)
    locator = AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    ax.set_xlabel("store time (UTC)")
    ax.set_ylabel("messages / minute")
    ax.legend(fontsize="small", ncols=max(1, min(4, len(stats.per_bucket) // 8 + 1)))
    return fig


def message_sizes(stats: StoreStats) -> Figure:
    fig, (ax,) = _figure()
    ax.set_title("Record size distribution (storeSize, bytes)")
    if not stats.size_counts:
        _nothing(ax, "no messages")
        return fig
    edges = stats.size_buckets
    widths = [b - a for a, b in zip(edges, edges[1:], strict=False)]
    ax.bar(edges[:-1], stats.size_counts, width=widths, align="edge", edgecolor="white")
    ax.set_xlabel("record size (bytes)")
    ax.set_ylabel("messages")
    return fig


def queue_depth_and_lag(stats: StoreStats) -> Figure:
    fig, (depth_ax, lag_ax) = _figure(rows=2)
    depth_ax.set_title("Queue depth (max offset - min offset)")
    lag_ax.set_title("Consumer lag per group and queue")
    if not stats.queues:
        _nothing(depth_ax, "no queues")
        _nothing(lag_ax, "no queues")
        return fig
    labels = [f"{q.topic}/{q.queue_id}" for q in stats.queues]
    positions = list(range(len(labels)))
    depth_ax.bar(positions, [q.depth for q in stats.queues])
    groups = sorted({g for q in stats.queues for g in q.lags})
    width = 0.8 / max(len(groups), 1)
    for i, group in enumerate(groups):
        lags = [q.lags.get(group, 0) for q in stats.queues]
        lag_ax.bar([p - 0.4 + width * (i + 0.5) for p in positions], lags, width=width, label=group)
    if groups:
        lag_ax.legend(fontsize="small")
    else:
        lag_ax.text(0.5, 0.5, "no committed consumer offsets", ha="center", va="center",
                    transform=lag_ax.transAxes, color="0.4")
    for ax, unit in ((depth_ax, "messages"), (lag_ax, "messages behind")):
        ax.set_xticks(positions, labels, rotation=60, ha="right", fontsize="small")
        ax.set_ylabel(unit)
    return fig


def index_fill_and_chains(stats: StoreStats) -> Figure:
    fig, (fill_ax, chain_ax) = _figure(rows=2)
    fill_ax.set_title("Index file fill (entries used / capacity)")
    chain_ax.set_title("Hash slot chain lengths (all index files)")
    if not stats.index_files:
        _nothing(fill_ax, "no index files")
        _nothing(chain_ax, "no index files")
        return fig
    names = [f.name for f in stats.index_files]
    fill_ax.bar(range(len(names)), [100 * f.fill for f in stats.index_files])
    fill_ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize="small")
    fill_ax.set_ylabel("% full")
    fill_ax.set_ylim(0, 100)
    chains: Counter[int] = Counter()
    for f in stats.index_files:
        chains.update(f.chain_lengths)
    if chains:
        lengths = sorted(chains)
        chain_ax.bar(lengths, [chains[n] for n in lengths])
        chain_ax.set_yscale("log")
    else:
        _nothing(chain_ax, "no index entries")
    chain_ax.set_xlabel("entries chained in one slot")
    chain_ax.set_ylabel("slots")
    return fig


def disk_use(stats: StoreStats) -> Figure:
    fig, (ax,) = _figure()
    ax.set_title("Store disk use by file kind (MiB)")
    kinds = list(stats.disk_use)
    apparent = [stats.disk_use[k][0] / _MIB for k in kinds]
    allocated = [stats.disk_use[k][1] / _MIB for k in kinds]
    rows = list(range(len(kinds)))
    ax.barh([r - 0.2 for r in rows], apparent, height=0.4, label="file size")
    ax.barh([r + 0.2 for r in rows], allocated, height=0.4, label="allocated on disk")
    ax.set_yticks(rows, kinds)
    ax.set_xlabel("MiB")
    ax.legend(fontsize="small")
    return fig


# id -> (caption, figure builder); the order of the page.
PLOTS: dict[str, tuple[str, Callable[[StoreStats], Figure]]] = {
    "messages-per-minute": ("Messages per minute per topic", messages_per_minute),
    "message-sizes": ("Message size distribution", message_sizes),
    "queue-depth-lag": ("Queue depth and consumer lag", queue_depth_and_lag),
    "index-fill-chains": ("Index fill and slot-chain lengths", index_fill_and_chains),
    "disk-use": ("Store disk use by file kind", disk_use),
}


def render_png(fig: Figure) -> bytes:
    """The figure as PNG bytes."""
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    return out.getvalue()
