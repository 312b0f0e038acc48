"""cProfile of the hot paths: put (single), put_batch, get with decode, query by key.

Prints, for each path, the functions with the most own time. Timings under the profiler are inflated
(every Python call pays for the hook), so read the table for *where* the time goes, not how much.

    python benchmarks/profile_paths.py                 # 100,000 messages, 100 B bodies
    python benchmarks/profile_paths.py --count 200000 --top 25 --path put_batch
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h

PATHS = ("put", "put_batch", "get", "query")


def profile(label: str, fn, top: int, report: h.Report) -> None:
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    report.line(f"## {label}")
    for line in out.getvalue().splitlines():
        if line.strip() and not line.startswith(("   Ordered by", "   List reduced")):
            report.line(line.replace(str(Path(h.__file__).resolve().parents[1]) + "/", ""))


def main() -> None:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=100_000)
    p.add_argument("--body", type=int, default=100)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--path", choices=PATHS, nargs="*", default=list(PATHS))
    args = p.parse_args()
    report = h.Report("profile_paths.py", args)
    msgs = h.messages(args.count, args.body)
    with h.scratch(args.dir) as root:
        if "put" in args.path:
            with h.open_store(root / "single") as store:
                profile("put (single messages)", lambda: [store.put(m) for m in msgs], args.top, report)
        with h.open_store(root / "batch") as store:
            def put_batches() -> None:
                for i in range(0, len(msgs), 256):
                    store.put_batch(msgs[i:i + 256])
            if "put_batch" in args.path:
                profile("put_batch (256 per batch)", put_batches, args.top, report)
            else:
                put_batches()

            def get_all() -> None:
                for queue_id in range(h.QUEUES):
                    offset = 0
                    while True:
                        result = store.get(h.TOPIC, queue_id, offset, 32)
                        if not result.messages:
                            break
                        for m in result.messages:
                            m.body, m.tags, m.keys  # noqa: B018
                        offset = result.next_offset

            if "get" in args.path:
                profile("get + decode (body, tags, keys)", get_all, args.top, report)
            if "query" in args.path:
                keys = [h.key_of(i) for i in range(0, args.count, 7)]
                profile("query by key", lambda: [store.query(h.TOPIC, k) for k in keys], args.top, report)
    report.save()


if __name__ == "__main__":
    main()
