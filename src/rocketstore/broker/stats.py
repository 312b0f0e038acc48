"""BrokerStats: the message counts and rates GET_BROKER_RUNTIME_INFO reports (RocketMQ's BrokerStats and
StoreStatsService: messages put and got since start, since this morning and yesterday morning, and the
put and get rates over the last 10 s, minute and 10 minutes)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from datetime import date, datetime, timedelta

SAMPLE_INTERVAL_MS = 1000
WINDOWS_MS = (10_000, 60_000, 600_000)
MAX_SAMPLES = WINDOWS_MS[-1] // SAMPLE_INTERVAL_MS + 2


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class BrokerStats:
    """Counters of one broker process (they start at 0 with it, as RocketMQ's do).

    Args:
        clock_ms: epoch milliseconds.
    """

    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        self._clock = clock_ms or _now_ms
        self.boot_ms = self._clock()
        self.put_total = 0
        self.get_total = 0
        self.put_size_total = 0
        self._samples: deque[tuple[int, int, int]] = deque(maxlen=MAX_SAMPLES)  # (ms, puts, gets)
        self._next_sample_ms = 0
        self._day: date = self._today()
        self._day_ms = self._day_bounds(self._day)  # [start, end) of self._day in epoch ms
        self.items = KeyedStats(self._clock)
        self.put_today_morning = self.get_today_morning = 0
        self.put_yesterday_morning = self.get_yesterday_morning = 0

    def _today(self) -> date:
        return datetime.fromtimestamp(self._clock() / 1000).date()

    @staticmethod
    def _day_bounds(day: date) -> tuple[int, int]:
        start = datetime(day.year, day.month, day.day)
        return int(start.timestamp() * 1000), int((start + timedelta(days=1)).timestamp() * 1000)

    def _tick(self, now: int | None = None) -> int:
        """Sample the totals once a second and turn the day at midnight; returns the time it read."""
        if now is None:
            now = self._clock()
        if now >= self._next_sample_ms:
            self._samples.append((now, self.put_total, self.get_total))
            self._next_sample_ms = now + SAMPLE_INTERVAL_MS
        start, end = self._day_ms
        if not start <= now < end:
            today = datetime.fromtimestamp(now / 1000).date()
            if today != self._day:  # midnight passed: the totals now are this morning's
                self.put_yesterday_morning, self.get_yesterday_morning = (self.put_today_morning,
                                                                          self.get_today_morning)
                self.put_today_morning, self.get_today_morning = self.put_total, self.get_total
                self._day = today
            self._day_ms = self._day_bounds(today)
        return now

    def record_put(self, topic: str, count: int, size: int) -> None:
        """`count` messages of `size` bytes in all were stored in `topic`."""
        now = self._tick()
        self.put_total += count
        self.put_size_total += size
        if count:
            self.items.add(TOPIC_PUT_NUMS, topic, count, now)
            self.items.add(TOPIC_PUT_SIZE, topic, size, now)

    def record_get(self, topic: str, group: str, count: int, size: int) -> None:
        """`count` messages of `size` bytes of `topic` were delivered to `group`."""
        now = self._tick()
        self.get_total += count
        if count:
            self.items.add(GROUP_GET_NUMS, f"{topic}@{group}", count, now)
            self.items.add(GROUP_GET_SIZE, f"{topic}@{group}", size, now)

    def _tps(self, which: int) -> str:
        """Rates over the three windows, "x.xx y.yy z.zz" (RocketMQ's putTps shape)."""
        self._tick()
        now, current = self._clock(), (self.put_total, self.get_total)[which]
        rates = []
        for window in WINDOWS_MS:
            base = next((s for s in self._samples if now - s[0] <= window), None)
            if base is None or now <= base[0]:
                rates.append(0.0)
            else:
                rates.append((current - base[1 + which]) * 1000 / (now - base[0]))
        return " ".join(f"{rate:.2f}" for rate in rates)

    def put_tps(self) -> str:
        return self._tps(0)

    def get_tps(self) -> str:
        return self._tps(1)


TOPIC_PUT_NUMS = "TOPIC_PUT_NUMS"
TOPIC_PUT_SIZE = "TOPIC_PUT_SIZE"
GROUP_GET_NUMS = "GROUP_GET_NUMS"
GROUP_GET_SIZE = "GROUP_GET_SIZE"
STATS_NAMES = (TOPIC_PUT_NUMS, TOPIC_PUT_SIZE, GROUP_GET_NUMS, GROUP_GET_SIZE)
# (bucket width, buckets kept) of the minute, hour and day views (RocketMQ samples every 10 s, 10 min, 1 h)
_VIEWS = ((10_000, 6), (600_000, 6), (3_600_000, 24))
MAX_STATS_KEYS = 10_000
"""Most (name, key) counters kept: the least recently counted goes first (clients choose group names)."""
MAX_KEY_LENGTH = 512
"""Longest key counted (a topic is at most 127 characters; a group name longer than RocketMQ's 255 is not
counted)."""


class _Counter:
    """Counts of one (name, key) in buckets of each view: value sum and times counted."""

    __slots__ = ("buckets", "_current", "_current_from", "_current_until")

    def __init__(self) -> None:
        self.buckets: tuple[deque[list[int]], ...] = tuple(deque(maxlen=kept) for _width, kept in _VIEWS)
        self._current: tuple[list[int], ...] = ()  # the last bucket of each view, while `now` is in all of them
        self._current_from = self._current_until = 0

    def add(self, now: int, value: int) -> None:
        if self._current_from <= now < self._current_until:
            for bucket in self._current:
                bucket[1] += value
                bucket[2] += 1
            return
        for (width, _kept), buckets in zip(_VIEWS, self.buckets, strict=True):
            start = now - now % width
            if buckets and buckets[-1][0] == start:
                buckets[-1][1] += value
                buckets[-1][2] += 1
            else:
                buckets.append([start, value, 1])
        self._current = tuple(buckets[-1] for buckets in self.buckets)
        self._current_from = max(bucket[0] for bucket in self._current)
        self._current_until = min(bucket[0] + width for bucket, (width, _kept) in zip(self._current, _VIEWS,
                                                                                      strict=True))

    def view(self, now: int, which: int) -> dict[str, float | int]:
        """RocketMQ's StatsSnapshot (avgpt, sum, tps) of the minute (0), hour (1) or day (2) view."""
        width, kept = _VIEWS[which]
        oldest = now - width * kept
        total = times = 0
        for start, value, count in self.buckets[which]:
            if start + width > oldest:
                total += value
                times += count
        return {"avgpt": total / times if times else 0.0, "sum": total, "tps": total * 1000 / (width * kept)}


class KeyedStats:
    """RocketMQ's BrokerStatsManager items that VIEW_BROKER_STATS_DATA reports (statsAll reads them):
    messages and bytes put per topic, got per topic@group, over the last minute, hour and day.

    Args:
        clock_ms: epoch milliseconds.
    """

    def __init__(self, clock_ms: Callable[[], int] | None = None) -> None:
        self._clock = clock_ms or _now_ms
        self._counters: dict[tuple[str, str], _Counter] = {}

    def add(self, name: str, key: str, value: int, now: int | None = None) -> None:
        """Count `value` for (name, key) at `now` (epoch ms, default the clock's) (a key longer than
        MAX_KEY_LENGTH is not counted)."""
        if len(key) > MAX_KEY_LENGTH:
            return
        counter = self._counters.pop((name, key), None)  # re-inserted last: the dict keeps recency order
        if counter is None:
            counter = _Counter()
            while len(self._counters) >= MAX_STATS_KEYS:
                del self._counters[next(iter(self._counters))]
        self._counters[(name, key)] = counter
        counter.add(self._clock() if now is None else now, value)

    def snapshot(self, name: str, key: str) -> dict[str, dict[str, float | int]] | None:
        """BrokerStatsData (statsDay, statsHour, statsMinute) of (name, key), None when never counted."""
        counter = self._counters.get((name, key))
        if counter is None:
            return None
        now = self._clock()
        return {"statsDay": counter.view(now, 2), "statsHour": counter.view(now, 1),
                "statsMinute": counter.view(now, 0)}
