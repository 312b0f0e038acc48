"""Same-run A/B of two revisions of rocketstore on the store API's hot paths.

Checks each revision out into a temporary worktree, builds its compiled helpers there, then runs the
same workload in a fresh process per revision, alternating A, B, B, A, ... for `--rounds` rounds, and
prints the medians (ranges) and B/A. For a change that must not make anything slower (a refactor), the
ratios should sit within the rounds' noise.

    .venv/bin/python benchmarks/bench_ab.py HEAD~3 HEAD --rounds 4

Workload (100 B bodies, one key each, ASYNC flush, default geometry): `put` one message per call,
`put_batch` of 32, `get` + decode 32 per call over every queue (median of 5 passes), `query` by key (p50).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
_R = TypeVar("_R")

WORKLOAD = r'''
import json, sys, tempfile, time
from pathlib import Path
from rocketstore import Message, MessageStore, StoreConfig
n = int(sys.argv[1])
body = b"x" * 100
out = {}
with tempfile.TemporaryDirectory(dir=sys.argv[2]) as tmp:  # in the worktree: a killed run leaves nothing
    msgs = [Message("AbTopic", body, queue_id=i % 4, tags="TagA", keys=(f"key-{i}",)) for i in range(n)]
    with MessageStore.open(Path(tmp) / "one", StoreConfig()) as store:
        t = time.perf_counter()
        for m in msgs:
            store.put(m)
        out["put msg/s"] = n / (time.perf_counter() - t)
        rates = []
        for _ in range(5):  # one pass takes a fraction of a second: the median of five
            t = time.perf_counter()
            got = 0
            for q in range(4):
                offset = 0
                while True:
                    r = store.get("AbTopic", q, offset, 32)
                    if not r.messages:
                        break
                    for m in r.messages:
                        m.body, m.keys
                    got += len(r.messages)
                    offset = r.next_offset
            rates.append(got / (time.perf_counter() - t))
        out["get msg/s"] = sorted(rates)[2]
        lat = []
        for i in range(0, n, max(1, n // 20000)):
            t = time.perf_counter_ns()
            store.query("AbTopic", f"key-{i}")
            lat.append(time.perf_counter_ns() - t)
        lat.sort()
        out["query p50 us"] = lat[len(lat) // 2] / 1000
    with MessageStore.open(Path(tmp) / "batch", StoreConfig()) as store:
        t = time.perf_counter()
        for i in range(0, n, 32):
            store.put_batch(msgs[i:i + 32])
        out["put_batch msg/s"] = n / (time.perf_counter() - t)
print(json.dumps(out))
'''


def worktree(rev: str, base: Path, side: str) -> Path:
    path = base / side
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(path), rev], check=True)
    built = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=path,
                           capture_output=True, text=True)
    if built.returncode != 0:
        sys.exit(f"cannot build the compiled helpers of {rev}:\n{built.stderr}")
    return path


def run(tree: Path, count: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    done = subprocess.run([sys.executable, "-c", WORKLOAD, str(count), str(tree)], env=env, capture_output=True,
                          text=True, timeout=1800)
    if done.returncode != 0:
        sys.exit(f"workload failed in {tree}:\n{done.stderr}")
    return json.loads(done.stdout)


def alternating(a: str, b: str, prefix: str, rounds: int, run: Callable[[Path], _R],
                prepare: Callable[[Path], object] | None = None) -> dict[str, list[_R]]:
    """Check revisions `a` and `b` out into temporary worktrees, build them, run `prepare` once in each,
    then `run` in each for `rounds` rounds, A, B, B, A, ...; the results by side, the worktrees removed."""
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        trees = {"A": worktree(a, Path(tmp), "A"), "B": worktree(b, Path(tmp), "B")}
        try:
            if prepare is not None:
                for tree in trees.values():
                    prepare(tree)
            results: dict[str, list[_R]] = {"A": [], "B": []}
            for i in range(rounds):
                for side in ("A", "B") if i % 2 == 0 else ("B", "A"):
                    results[side].append(run(trees[side]))
            return results
        finally:
            for tree in trees.values():
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help="baseline revision")
    parser.add_argument("b", help="revision measured against it")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--count", type=int, default=200_000, help="messages per run")
    args = parser.parse_args()
    results = alternating(args.a, args.b, "bench-ab-", args.rounds, lambda tree: run(tree, args.count))
    print(f"A = {args.a}, B = {args.b}: {args.rounds} alternating rounds of {args.count:,} messages, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'':16} {'A median (range)':>28} {'B median (range)':>28} {'B/A':>6}")
    for name in results["A"][0]:
        a = [r[name] for r in results["A"]]
        b = [r[name] for r in results["B"]]

        def cell(v: list[float]) -> str:
            return f"{statistics.median(v):,.1f} ({min(v):,.1f}-{max(v):,.1f})"
        print(f"{name:16} {cell(a):>28} {cell(b):>28} {statistics.median(b) / statistics.median(a):6.2f}")


if __name__ == "__main__":
    main()
