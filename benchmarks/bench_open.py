"""Same-run A/B of a clean open of a store (what recovery costs when nothing is wrong): two revisions,
alternating A, B, B, A, ... for `--rounds` rounds, each round a fresh process that imports rocketstore
(timed), then times `--opens` opens and closes of the same store and reports the medians.

    .venv/bin/python benchmarks/bench_open.py 95e35e1 HEAD --rounds 6
    .venv/bin/python benchmarks/bench_open.py 53c72c7 HEAD --rounds 8 --opens 1 --store deep

Stores (`--store`), written once per revision (by that revision) and closed cleanly:
    wide  250 topics x 4 queues, 100,000 messages of 100 B with one key each, 64 MiB commitlog files
    deep  1,000,000 messages of 100 B with one key each in 4 queues of one topic, the default geometry
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench_ab import alternating

WORKLOAD = r'''
import json, statistics, sys, time
t = time.perf_counter()
import rocketstore
imported = time.perf_counter() - t
from pathlib import Path
from rocketstore import Message, MessageStore, StoreConfig
root, opens, shape = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
if shape == "wide":
    cfg = StoreConfig(commitlog_file_size=64 << 20, consume_queue_file_entries=10_000, index_hash_slots=50_000,
                      index_max_entries=200_000)
    count, topic, queue = 100_000, lambda i: f"T{i % 250}", lambda i: (i // 250) % 4
else:
    cfg, count, topic, queue = StoreConfig(), 1_000_000, lambda i: "T", lambda i: i % 4
if not root.exists():
    with MessageStore.open(root, cfg) as store:
        for i in range(count):
            store.put(Message(topic(i), b"x" * 100, queue_id=queue(i), keys=(f"k{i}",)))
times = []
for _ in range(opens):
    t = time.perf_counter()
    store = MessageStore.open(root, cfg)
    times.append(time.perf_counter() - t)
    assert store.recovery.clean, store.recovery.to_dict()
    store.close()
print(json.dumps({"open ms": statistics.median(times) * 1000, "import ms": imported * 1000}))
'''


def run(tree: Path, opens: int, shape: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run([sys.executable, "-c", WORKLOAD, str(tree / f"open-store-{shape}"), str(opens), shape],
                          env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"workload failed in {tree}:\n{done.stderr}")
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="baseline revision")
    parser.add_argument("b", help="revision measured against it")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--opens", type=int, default=5, help="opens timed per round (their median)")
    parser.add_argument("--store", choices=("wide", "deep"), default="wide",
                        help="wide: 1,000 queues of 100 entries; deep: 4 queues of 250,000 (see above)")
    args = parser.parse_args()
    results = alternating(args.a, args.b, "bench-open-", args.rounds, lambda tree: run(tree, args.opens, args.store),
                          prepare=lambda tree: run(tree, 1, args.store))  # the first run writes the store
    shape = "1,000 queues" if args.store == "wide" else "1,000,000 messages in 4 queues"
    print(f"A = {args.a}, B = {args.b}: {args.rounds} alternating rounds of {args.opens} clean opens of a store "
          f"of {shape}, load average {os.getloadavg()[0]:.1f}")
    for figure in ("open ms", "import ms"):
        a, b = [r[figure] for r in results["A"]], [r[figure] for r in results["B"]]
        ratio = statistics.median(b) / statistics.median(a)
        print(f"{figure:9}  A {statistics.median(a):.1f} ({min(a):.1f}-{max(a):.1f})  "
              f"B {statistics.median(b):.1f} ({min(b):.1f}-{max(b):.1f})  B/A {ratio:.2f}")


if __name__ == "__main__":
    main()
