"""Query by key, p50/p99 latency, on a store of 1,000,000 messages (one key each, 100 B bodies).

Each query asks for one existing key picked at random and returns the decoded messages (the key
check that drops hash collisions reads each candidate's KEYS). Baseline in the same run: sqlite3 WAL
`SELECT ... WHERE msg_key = ?` on its key index, rows fetched.

    python benchmarks/bench_query.py
    python benchmarks/bench_query.py --count 5000000 --queries 100000
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h

SELECT = "SELECT phy, queue_id, queue_offset, store_ts, tags, msg_key, body FROM msg WHERE msg_key = ?"


def clock_overhead_ns(clock) -> int:
    """Median time between two back-to-back readings of `clock` (~0.1 us wall, ~0.9 us thread CPU)."""
    gaps = []
    for _ in range(2001):
        t0 = clock()
        gaps.append(clock() - t0)
    return sorted(gaps)[len(gaps) // 2]


def latencies_us(fn, keys: list[str]) -> list[float]:
    """Per-call latencies, sorted, with the clock's own reading cost taken off each sample."""
    clock = h.clock_ns  # perf_counter_ns, or thread CPU time with --clock cpu
    overhead = clock_overhead_ns(clock)
    out = []
    for key in keys:
        t0 = clock()
        fn(key)
        out.append(max(0, clock() - t0 - overhead) / 1000)
    out.sort()
    return out


def main() -> None:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=1_000_000, help="messages in the store and in sqlite")
    p.add_argument("--queries", type=int, default=20_000, help="queries per round")
    p.add_argument("--body", type=int, default=100)
    args = p.parse_args()
    report = h.Report("bench_query.py", args)
    rng = random.Random(6)
    with h.scratch(args.dir) as root:
        store = h.open_store(root / "store")
        conn = h.open_sqlite(root / "baseline.sqlite")
        producer = h.SqliteProducer(conn)
        t0 = time.perf_counter()
        for start in range(0, args.count, 10_000):
            batch = h.messages(min(10_000, args.count - start), args.body, start)
            for i in range(0, len(batch), 1000):
                store.put_batch(batch[i:i + 1000])
                producer.put_batch(batch[i:i + 1000])
        report.line(f"# filled {args.count:,} messages into both in {time.perf_counter() - t0:.1f} s")
        found = store.query(h.TOPIC, h.key_of(args.count // 2))
        assert len(found) == 1 and found[0].keys == [h.key_of(args.count // 2)], found
        p50s, p99s, b50s, b99s = [], [], [], []
        try:
            for _ in range(args.repeat):
                keys = [h.key_of(rng.randrange(args.count)) for _ in range(args.queries)]
                ours = latencies_us(lambda k: store.query(h.TOPIC, k), keys)
                theirs = latencies_us(lambda k: conn.execute(SELECT, (k,)).fetchall(), keys)
                p50s.append(h.percentile(ours, 50))
                p99s.append(h.percentile(ours, 99))
                b50s.append(h.percentile(theirs, 50))
                b99s.append(h.percentile(theirs, 99))
        finally:
            store.close()
            conn.close()
        report.figure(f"query p50 ({args.count:,} msgs)", h.median(p50s), "us", "sqlite WAL select",
                      h.median(b50s), "<= 5 us", higher_is_better=False)
        report.figure(f"query p99 ({args.count:,} msgs)", h.median(p99s), "us", "sqlite WAL select",
                      h.median(b99s), "<= 20 us", higher_is_better=False)
    report.save()


if __name__ == "__main__":
    main()
