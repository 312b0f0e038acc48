"""Memory of a long put loop: anonymous resident memory (RssAnon: heap, not the mapped store files)
sampled while putting 10,000,000 messages (100 B bodies, one key each, async flush).

Messages are made on the fly, so the loop itself holds nothing. The figure is the growth of RssAnon
per million messages over the second half of the run, where caches are warm: the slope of the
least-squares line through the samples of that half (the difference of its two ends is printed too;
one allocator step of a MiB or two at either end moves it a lot). The baseline in the same run is
RssAnon after the first 5 % of the messages. Flat memory = growth near 0 and end/baseline near 1.

    python benchmarks/bench_memory.py                    # 10,000,000 messages in batches of 256
    python benchmarks/bench_memory.py --count 1000000 --mode single
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h
from rocketstore import Message


def least_squares_slope(points: list[tuple[int, int]]) -> float:
    """Slope of the least-squares line through (x, y) points (0 for fewer than two)."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0


def main() -> None:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=10_000_000)
    p.add_argument("--mode", choices=["single", "batch"], default="batch")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--samples", type=int, default=40)
    args = p.parse_args()
    report = h.Report("bench_memory.py", args)
    body = h.body_of(100)
    step = max(args.batch_size, args.count // args.samples // args.batch_size * args.batch_size)
    samples: list[tuple[int, int]] = []
    with h.scratch(args.dir) as root:
        start_rss = h.rss_anon_bytes()
        store = h.open_store(root / "store")
        t0 = time.perf_counter()
        try:
            done = 0
            while done < args.count:
                n = min(step, args.count - done)
                for i in range(done, done + n, args.batch_size):
                    batch = [Message(h.TOPIC, body, queue_id=j % h.QUEUES, tags="TagA", keys=(h.key_of(j),))
                             for j in range(i, min(i + args.batch_size, done + n))]
                    if args.mode == "batch":
                        store.put_batch(batch)
                    else:
                        for m in batch:
                            store.put(m)
                done += n
                samples.append((done, h.rss_anon_bytes()))
        finally:
            store.close()
        seconds = time.perf_counter() - t0
    warm = next(rss for n, rss in samples if n >= args.count * 0.05)
    mid_n, mid_rss = next((n, rss) for n, rss in samples if n >= args.count // 2)
    end_n, end_rss = samples[-1]
    ends = (end_rss - mid_rss) / max(1, end_n - mid_n) * 1_000_000
    slope = least_squares_slope([(n, rss) for n, rss in samples if n >= mid_n]) * 1_000_000
    report.line(f"# {args.count:,} puts ({args.mode}) in {seconds:.0f} s; RssAnon before open "
                f"{start_rss / 2**20:.1f} MiB")
    report.line("# RssAnon MiB at " + ", ".join(f"{n // 1000:,}k: {rss / 2**20:.1f}" for n, rss in samples[::4]))
    report.line(f"{'RssAnon growth, second half':<38} {slope / 1024:>14,.1f} KiB per million messages "
                f"(least squares over {sum(1 for n, _ in samples if n >= mid_n)} samples; "
                f"end minus middle: {ends / 1024:,.1f})")
    report.figure("RssAnon at end", end_rss / 2**20, "MiB", "RssAnon at 5 %", warm / 2**20,
                  "flat (~1x)", higher_is_better=False)
    report.save()


if __name__ == "__main__":
    main()
