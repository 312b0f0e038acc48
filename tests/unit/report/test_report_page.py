"""The HTML report's page and plots, from hand-made `StoreStats` (no Spark): units from the data, one title
per section, a line instead of an empty plot, and figures whose text stays inside them."""

from __future__ import annotations

import re
from datetime import timedelta, timezone
from html.parser import HTMLParser

import pytest

from rocketstore.format.times import format_time_ms
from rocketstore.report import plots
from rocketstore.report.html import render_page, render_section
from rocketstore.report.stats import IndexFileStats, QueueStats, StoreStats, summary_rows, time_bucket_ms

pytest.importorskip("matplotlib")

FIRST_MS = 1_795_319_616_563  # the golden store's first and last store times: 5.6 seconds apart
LAST_MS = 1_795_319_622_208
GOLDEN_PER_SECOND = {"TopicA": [20, 50, 38, 49, 38, 47, 10], "TopicB": [6, 18, 24, 21, 37, 25, 2]}


def _stats(*, bucket_ms: int = 1000, per_bucket: dict[str, list[int]] | None = None,
           queues: list[QueueStats] | None = None, index_files: list[IndexFileStats] | None = None,
           disk_use: dict[str, tuple[int, int]] | None = None) -> StoreStats:
    per_bucket = GOLDEN_PER_SECOND if per_bucket is None else per_bucket
    first = FIRST_MS // bucket_ms
    return StoreStats(
        store="/data/store", messages=sum(map(sum, per_bucket.values())), total_bytes=223_647,
        first_store_timestamp=FIRST_MS, last_store_timestamp=LAST_MS, bucket_ms=bucket_ms,
        per_bucket={t: {first + i: n for i, n in enumerate(counts)} for t, counts in per_bucket.items()},
        size_buckets=[170.0, 300.0, 430.0, 560.0, 690.0], size_counts=[100, 140, 150, 130],
        queues=[QueueStats("TopicA", 0, 0, 160), QueueStats("TopicB", 1, 0, 27)] if queues is None else queues,
        index_files=[IndexFileStats("20261122035336573", 399, 399, 100, 90, {1: 80, 2: 10})]
        if index_files is None else index_files,
        disk_use={"commitlog": (262_144, 229_376), "consumequeue": (24_000, 53_248), "config": (400, 4096)}
        if disk_use is None else disk_use,
    )


class _Text(HTMLParser):
    """The page's visible text (no attribute values), and the ids of its figures and empty-plot lines."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.figures: list[str] = []
        self.empty: list[str] = []
        self._in_empty = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "figure":
            self.figures.append(values.get("id") or "")
        self._in_empty = tag == "p" and values.get("class") == "empty"

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if self._in_empty:
            self.empty.append(data)
            self._in_empty = False


def _page(stats: StoreStats) -> tuple[str, _Text]:
    page = render_page(stats, {plot_id: render_section(build(stats)) for plot_id, build in plots.PLOTS.items()})
    parsed = _Text()
    parsed.feed(page)
    return page, parsed


@pytest.mark.parametrize(("span_ms", "bucket_ms", "unit"), [
    (LAST_MS - FIRST_MS, 1000, "second"),
    (90 * 60_000, 60_000, "minute"),
    (3 * 3_600_000, 300_000, "5 min"),
    (3 * 86_400_000, 3_600_000, "hour"),
    (200 * 86_400_000, 2 * 86_400_000, "2 d"),
])
def test_the_rate_is_counted_per_bucket_sized_from_the_time_span(span_ms, bucket_ms, unit):
    assert time_bucket_ms(FIRST_MS, FIRST_MS + span_ms) == bucket_ms
    assert plots.rate_unit(bucket_ms) == unit


def test_a_six_second_store_plots_the_messages_of_each_second_not_an_extrapolation():
    plot = plots.message_rate(_stats())
    assert plot.title == "Messages stored per second, per topic"
    (ax,) = plot.figure.axes
    assert ax.get_ylabel() == "messages per second"
    drawn = {line.get_label(): list(line.get_data().values) for line in ax.patches}
    assert drawn == GOLDEN_PER_SECOND  # counts as stored, not scaled to a minute (x60)
    assert ax.get_ylim()[1] < 60


def test_topics_past_the_line_limit_are_summed_into_one_line():
    per_bucket = {f"Topic{n:02d}": [n + 1, 1] for n in range(plots.MAX_LINES + 3)}
    (ax,) = plots.message_rate(_stats(per_bucket=per_bucket)).figure.axes
    drawn = {line.get_label(): list(line.get_data().values) for line in ax.patches}
    assert len(drawn) == plots.MAX_LINES + 1
    assert drawn["3 other topics"] == [1 + 2 + 3, 3]  # the three smallest topics
    assert sum(map(sum, drawn.values())) == sum(map(sum, per_bucket.values()))


def test_the_summary_prints_store_times_as_the_cli_does():
    rows = dict(summary_rows(_stats()))
    assert rows["first stored (UTC)"] == format_time_ms(FIRST_MS) == "2026-11-22T03:53:36.563Z"
    assert rows["last stored (UTC)"] == "2026-11-22T03:53:42.208Z"
    page, _ = _page(_stats())
    assert str(FIRST_MS) not in page and "2026-11-22T03:53:36.563Z" in page


@pytest.mark.parametrize(("largest", "unit"), [(0, "B"), (1000, "B"), (262_144, "KiB"), (4 << 20, "MiB"),
                                                (3 << 30, "GiB"), (5 << 40, "GiB")])
def test_byte_units_follow_the_largest_value(largest, unit):
    assert plots.byte_unit(largest)[0] == unit


def test_disk_use_of_a_small_store_is_drawn_in_kib():
    (ax,) = plots.disk_use(_stats()).figure.axes
    assert ax.get_xlabel() == "KiB"
    widths = [bar.get_width() for bar in ax.patches]
    assert max(widths) == 256.0 and min(widths) == 400 / 1024


def test_every_title_is_said_once_and_figures_carry_none():
    stats = _stats(queues=[QueueStats("TopicA", 0, 0, 160, {"billing": 12})])
    built = {plot_id: build(stats) for plot_id, build in plots.PLOTS.items()}
    page, parsed = _page(stats)
    text = "".join(parsed.text)
    for plot_id, plot in built.items():
        assert plot.figure is not None, plot_id
        assert text.count(plot.title) == 1, plot.title
        assert all(ax.get_title(loc) == "" for ax in plot.figure.axes for loc in ("left", "center", "right"))
        assert plot.figure.get_suptitle() == ""
    assert "<figcaption" not in page
    assert parsed.figures == [f"plot-{plot_id}" for plot_id in plots.PLOTS]


def test_a_store_without_consumer_groups_gets_one_line_instead_of_a_lag_plot():
    stats = _stats()
    plot = plots.consumer_lag(stats)
    assert plot.figure is None and plot.empty == "no consumer groups"
    _, parsed = _page(stats)
    assert "plot-consumer-lag" not in parsed.figures
    assert parsed.empty == ["no consumer groups"]


def test_a_store_without_messages_draws_no_empty_axes():
    stats = StoreStats(store="/data/empty", disk_use={"commitlog": (0, 0)})
    _, parsed = _page(stats)
    assert parsed.figures == ["plot-disk-use"]
    assert parsed.empty == ["no messages", "no messages", "no queues", "no consumer groups", "no index files",
                            "no index files"]


def test_records_all_of_one_size_still_draw_a_bar():
    stats = _stats()
    stats.size_buckets, stats.size_counts = [300.0, 300.0], [520]  # Spark's histogram when min == max
    (ax,) = plots.message_sizes(stats).figure.axes
    assert [bar.get_width() for bar in ax.patches] == [1.0]


def _crowded() -> StoreStats:
    long_topic = "orders-eu-west-1-" + "x" * 90
    queues = [QueueStats(f"{long_topic}-{t}", q, 0, 10 * t + q, {"billing-service-with-a-long-group-name": q})
              for t in range(250) for q in range(4)]
    files = [IndexFileStats(f"20261122{n:09d}", 100 + n, 16_383, 4096, 90, {1: 80, 2: 10}) for n in range(200)]
    per_bucket = {f"{long_topic}-{t}": [t % 7, 3, t % 5] for t in range(20)}
    return _stats(per_bucket=per_bucket, queues=queues, index_files=files)


@pytest.mark.parametrize("plot_id", list(plots.PLOTS))
def test_crowded_figures_keep_their_labels_inside_and_apart(plot_id):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    plot = plots.PLOTS[plot_id](_crowded())
    figure = plot.figure
    FigureCanvasAgg(figure)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    assert figure.get_size_inches()[1] <= 0.9 + plots.BAR_ROW_IN * 1.5 * plots.MAX_BARS
    for ax in figure.axes:
        box = ax.get_tightbbox(renderer)  # axes, ticks, labels, legend
        assert box.x0 >= -1 and box.y0 >= -1, plot_id
        assert box.x1 <= figure.bbox.width + 1 and box.y1 <= figure.bbox.height + 1, plot_id
        labels = sorted((t.get_window_extent(renderer) for t in ax.get_yticklabels() if t.get_text()),
                        key=lambda b: b.y0)
        assert len(labels) <= plots.MAX_BARS
        assert all(len(t.get_text()) <= plots.LABEL_CHARS for t in ax.get_yticklabels())
        assert all(low.y1 <= high.y0 + 0.5 for low, high in zip(labels, labels[1:], strict=False)), plot_id


def test_crowded_charts_say_what_they_leave_out():
    stats = _crowded()
    assert plots.queue_depth(stats).title.endswith(f"the {plots.MAX_BARS} deepest of 1000 queues")
    assert plots.index_fill(stats).title.endswith(f"the {plots.MAX_BARS} newest of 200 files")
    assert plots.consumer_lag(stats).title.endswith(f"the {plots.MAX_BARS} most behind of 1000 (group, queue) pairs")
    (ax,) = plots.index_fill(stats).figure.axes
    assert [t.get_text() for t in ax.get_yticklabels()][-1] == "20261122000000199"


UTC_PLUS_2 = timezone(timedelta(hours=2))


def _drawn(figure):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(figure)
    figure.canvas.draw()
    return figure


def test_every_plot_has_one_plain_sentence_under_it():
    stats = _stats(queues=[QueueStats("TopicA", 0, 0, 160, {"billing": 12})])
    page, parsed = _page(stats)
    text = "".join(parsed.text)
    for plot_id, build in plots.PLOTS.items():
        plot = build(stats)
        assert plot.about and plot.about.endswith(".") and plot.title not in plot.about, plot_id
        assert text.count(plot.about) == 1, plot_id
        # under its own figure, inside its own section
        section = page[page.index(f'<section id="{plot_id}">'):]
        section = section[:section.index("</section>")]
        assert section.index(f'<figure id="plot-{plot_id}">') < section.index('<p class="about">'), plot_id


def test_an_empty_section_has_its_line_and_no_sentence():
    stats = _stats()
    _, parsed = _page(stats)
    assert plots.consumer_lag(stats).about == ""
    assert "consumers are slower" not in "".join(parsed.text)


def test_the_rate_axis_reads_clock_times_in_the_local_zone(monkeypatch):
    monkeypatch.setattr(plots, "time_zone", lambda: UTC_PLUS_2)
    (ax,) = _drawn(plots.message_rate(_stats()).figure).axes
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert len(labels) >= 4
    assert all(re.fullmatch(r"05:53:(3[6-9]|4[0-3])", label) for label in labels), labels  # 03:53 UTC + 2 h
    assert labels == sorted(labels)
    assert ax.get_xlabel() == "store time on Sun 22 Nov 2026 (local time, UTC+02:00)"
    assert ax.xaxis.get_offset_text().get_text() == ""  # the whole time is in each label


@pytest.mark.parametrize(("span_ms", "shown"), [
    (6_000, "05:53:36"), (30 * 60_000, "05:53"), (36 * 3_600_000, "22 Nov 05:53"), (40 * 86_400_000, "22 Nov"),
    (400 * 86_400_000, "Nov 2026"),
])
def test_time_labels_keep_the_precision_the_span_needs(span_ms, shown):
    moment = plots.local_time(FIRST_MS, UTC_PLUS_2)
    assert moment.strftime(plots.time_axis_format(span_ms)) == shown


def test_a_rate_over_several_days_dates_its_labels(monkeypatch):
    monkeypatch.setattr(plots, "time_zone", lambda: timezone.utc)
    day = 86_400_000
    stats = _stats(bucket_ms=3_600_000, per_bucket={"TopicA": [5] * 72})
    (ax,) = _drawn(plots.message_rate(stats).figure).axes
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert all(re.fullmatch(r"\d\d [A-Z][a-z]{2}", label) for label in labels), labels
    assert ax.get_xlabel() == "store time (local time, UTC)"
    assert time_bucket_ms(FIRST_MS, FIRST_MS + 3 * day) == 3_600_000


def _index_file(name: str, begin_ms: int, end_ms: int, entries: int = 399) -> IndexFileStats:
    return IndexFileStats(name, entries, 399, 100, 90, {1: 80, 2: 10}, begin_ms, end_ms if entries else 0)


def test_index_files_are_labelled_by_the_store_times_of_their_entries():
    files = [_index_file("20261122035336573", FIRST_MS, FIRST_MS + 1_500),
             _index_file("20261122035338100", FIRST_MS + 1_600, LAST_MS, entries=30),
             _index_file("20261122035342300", 0, 0, entries=0)]
    labels, axis = plots.index_labels(files, timezone.utc)
    assert labels == ["03:53:36 – 03:53:38", "03:53:38 – 03:53:42", "20261122035342300 (no entries)"]
    assert axis == ("each row one index file: store times of its first – last entry on Sun 22 Nov 2026 "
                    "(local time, UTC)")
    # in another zone, the same instants
    assert plots.index_labels(files, UTC_PLUS_2)[0][0] == "05:53:36 – 05:53:38"


def test_index_labels_alike_to_the_second_show_milliseconds():
    files = [_index_file("a", FIRST_MS, FIRST_MS + 200), _index_file("b", FIRST_MS + 210, FIRST_MS + 400)]
    labels, _ = plots.index_labels(files, timezone.utc)
    assert labels == ["03:53:36.563 – 03:53:36.763", "03:53:36.773 – 03:53:36.963"]


def test_index_files_over_several_days_carry_the_day():
    day = 86_400_000
    files = [_index_file("a", FIRST_MS, FIRST_MS + day), _index_file("b", FIRST_MS + day, FIRST_MS + day + 60_000)]
    labels, axis = plots.index_labels(files, timezone.utc)
    assert labels == ["22 Nov 03:53 – 23 Nov 03:53", "23 Nov 03:53:36 – 03:54:36"]
    assert axis == "each row one index file: store times of its first – last entry (local time, UTC)"
    assert all(len(label) <= plots.LABEL_CHARS for label in labels)


def test_index_fill_counts_against_the_usable_entries_and_says_why(monkeypatch):
    monkeypatch.setattr(plots, "time_zone", lambda: timezone.utc)
    # maxIndexNum 400: entry 0 is never written, so 399 keys fill a file
    files = [_index_file("20261122035336573", FIRST_MS, FIRST_MS + 1_500),
             _index_file("20261122035338100", FIRST_MS + 1_600, LAST_MS, entries=30)]
    assert (files[0].configured, files[0].full, files[1].full) == (400, True, False)
    plot = plots.index_fill(_stats(index_files=files))
    (ax,) = _drawn(plot.figure).axes
    assert [t.get_text() for t in ax.texts] == ["399 of 399 (full)", "30 of 399"]
    assert [round(bar.get_width(), 1) for bar in ax.patches] == [100.0, 7.5]
    assert ax.get_xlabel().startswith("% of usable entries\n")
    assert "A file holds 399 keys: the 400 entries configured (maxIndexNum) less entry 0, which RocketMQ never " \
           "writes." in plot.about
    page, parsed = _page(_stats(index_files=files))
    assert "<td>399 of 399</td><td>100 %</td>" in page and "<td>30 of 399</td><td>8 %</td>" in page
    assert "<td>20261122035336573</td><td>22 Nov 03:53:36 – 03:53:38</td>" in page
    assert "the configured maxIndexNum (400) less entry 0" in "".join(parsed.text)
    assert "Times are local (UTC)." in "".join(parsed.text)


def test_index_file_stats_read_the_time_span_from_the_header(tmp_path):
    from rocketstore.format import index as index_format
    from rocketstore.report.stats import index_file_stats

    slots, max_entries = 8, 5
    header = index_format.IndexHeader(FIRST_MS, LAST_MS, 0, 400, 2, 3)
    data = bytearray(index_format.index_file_size(slots, max_entries))
    data[:index_format.HEADER_SIZE] = header.pack()
    for n, key_hash in ((1, 9), (2, 17)):
        index_format.ENTRY.pack_into(data, index_format.entry_pos(n, slots), key_hash, 100 * n, 0, 0)
    path = tmp_path / "20261122035336573"
    path.write_bytes(bytes(data))
    stats = index_file_stats(str(path), slots, max_entries)
    assert (stats.entries, stats.capacity, stats.configured) == (2, 4, 5)
    assert (stats.begin_timestamp, stats.end_timestamp) == (FIRST_MS, LAST_MS)
    assert stats.chain_lengths == {2: 1}  # both keys in slot 1


def test_the_report_summary_says_what_the_page_holds_and_where():
    from rocketstore.report.html import ReportSummary

    summary = ReportSummary("/tmp/report.html", 520, 12, 5, ("message-rate", "disk-use"), 166_213, "/data/g", 3,
                            28.03)
    assert summary.describe() == (
        "wrote the report on /data/g to /tmp/report.html (162.3 KiB) in 28 s:\n"
        "  520 messages in 3 topics and 12 queues, 5 index files, 2 plots; open it in a browser")
    assert summary.to_dict()["seconds"] == 28.03
