"""Same-run A/B of a clean open of a store with 1,000 consume queues (what recovery costs when nothing
is wrong): two revisions, alternating A, B, B, A, ... for `--rounds` rounds, each round a fresh process
that times `--opens` opens and closes of the same store and reports the median.

    .venv/bin/python benchmarks/bench_open.py 95e35e1 HEAD --rounds 6

Store: 250 topics x 4 queues, 100,000 messages of 100 B with one key each, 64 MiB commitlog files,
written once per revision (by that revision) and closed cleanly.
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
from pathlib import Path
from rocketstore import Message, MessageStore, StoreConfig
root, opens = Path(sys.argv[1]), int(sys.argv[2])
cfg = StoreConfig(commitlog_file_size=64 << 20, consume_queue_file_entries=10_000, index_hash_slots=50_000,
                  index_max_entries=200_000)
if not root.exists():
    with MessageStore.open(root, cfg) as store:
        for i in range(100_000):
            store.put(Message(f"T{i % 250}", b"x" * 100, queue_id=(i // 250) % 4, keys=(f"k{i}",)))
times = []
for _ in range(opens):
    t = time.perf_counter()
    store = MessageStore.open(root, cfg)
    times.append(time.perf_counter() - t)
    assert store.recovery.clean, store.recovery.to_dict()
    store.close()
print(json.dumps({"open ms": statistics.median(times) * 1000}))
'''


def run(tree: Path, opens: int) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run([sys.executable, "-c", WORKLOAD, str(tree / "open-store"), str(opens)], env=env,
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"workload failed in {tree}:\n{done.stderr}")
    return float(json.loads(done.stdout)["open ms"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="baseline revision")
    parser.add_argument("b", help="revision measured against it")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--opens", type=int, default=5, help="opens timed per round (their median)")
    args = parser.parse_args()
    results = alternating(args.a, args.b, "bench-open-", args.rounds, lambda tree: run(tree, args.opens),
                          prepare=lambda tree: run(tree, 1))  # the first run writes the store
    a, b = results["A"], results["B"]
    print(f"A = {args.a}, B = {args.b}: {args.rounds} alternating rounds of {args.opens} clean opens of a store "
          f"of 1,000 queues, load average {os.getloadavg()[0]:.1f}")
    ratio = statistics.median(b) / statistics.median(a)
    print(f"open ms  A {statistics.median(a):.1f} ({min(a):.1f}-{max(a):.1f})  "
          f"B {statistics.median(b):.1f} ({min(b):.1f}-{max(b):.1f})  B/A {ratio:.2f}")


if __name__ == "__main__":
    main()
