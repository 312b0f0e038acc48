"""BrokerStats: the message counts and rates GET_BROKER_RUNTIME_INFO reports (RocketMQ's BrokerStats and
StoreStatsService: messages put and got since start, since this morning and yesterday morning, and the
put and get rates over the last 10 s, minute and 10 minutes)."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from datetime import date, datetime

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
        self._day: date = self._today()
        self.put_today_morning = self.get_today_morning = 0
        self.put_yesterday_morning = self.get_yesterday_morning = 0

    def _today(self) -> date:
        return datetime.fromtimestamp(self._clock() / 1000).date()

    def _tick(self) -> None:
        now = self._clock()
        if not self._samples or now - self._samples[-1][0] >= SAMPLE_INTERVAL_MS:
            self._samples.append((now, self.put_total, self.get_total))
        today = self._today()
        if today != self._day:  # midnight passed: the totals now are this morning's
            self.put_yesterday_morning, self.get_yesterday_morning = self.put_today_morning, self.get_today_morning
            self.put_today_morning, self.get_today_morning = self.put_total, self.get_total
            self._day = today

    def record_put(self, count: int, size: int) -> None:
        """`count` messages of `size` bytes in all were stored."""
        self._tick()
        self.put_total += count
        self.put_size_total += size

    def record_get(self, count: int) -> None:
        """`count` messages were delivered to consumers."""
        self._tick()
        self.get_total += count

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
