"""SYNC flush with 8 producer threads (group commit) against one fsync per put, 100 B bodies.

Every put counts only once its record is on disk. Two ways to produce: `put()`, which returns once
the record is on disk (a sync then covers at most one put per thread), and `put_nowait()`, with each
thread keeping up to `--window` puts pending and taking their results in order (one sync covers every
put pending before it). Baseline in the same run: one producer that appends each record to a plain
file and calls fdatasync after each (one fsync per put, the rate a store without group commit could
reach). Also shown: this store in SYNC mode with one producer calling put().

    python benchmarks/bench_sync_flush.py
    python benchmarks/bench_sync_flush.py --threads 16 --count 100000 --window 64
"""

from __future__ import annotations

import dataclasses
import os
import sys
import threading
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h
from rocketstore import FlushMode

SYNC_CONFIG = dataclasses.replace(h.BENCH_CONFIG, flush_mode=FlushMode.SYNC)


def run_store(root: Path, count: int, threads: int, body: int, window: int = 0) -> float:
    """Messages per second with `threads` producers each putting count/threads messages, with put()
    (window 0) or with put_nowait() and up to `window` puts pending per thread."""
    path = root / "store"
    store = h.open_store(path, SYNC_CONFIG)
    per_thread = count // threads
    lists = [h.messages(per_thread, body, t * per_thread) for t in range(threads)]
    failures: list[object] = []
    gate = threading.Barrier(threads + 1)

    def producer(msgs: list) -> None:
        gate.wait()
        if not window:
            for m in msgs:
                r = store.put(m)
                if not r.ok:
                    failures.append(r.status)
            return
        pending: deque = deque()
        for m in msgs:
            pending.append(store.put_nowait(m))
            if len(pending) >= window:
                r = pending.popleft().result()
                if not r.ok:
                    failures.append(r.status)
        for p in pending:
            r = p.result()
            if not r.ok:
                failures.append(r.status)

    workers = [threading.Thread(target=producer, args=(lst,)) for lst in lists]
    for w in workers:
        w.start()

    def work() -> None:
        gate.wait()
        for w in workers:
            w.join()

    try:
        seconds = h.wall_timed(work)
    finally:
        store.close()
        h.shutil.rmtree(path, ignore_errors=True)
    if failures:
        raise SystemExit(f"{len(failures)} puts were not confirmed: {failures[:3]}")
    return per_thread * threads / seconds


def run_fsync_per_put(root: Path, count: int, record_size: int) -> float:
    path = root / "fsync.bin"
    record = os.urandom(record_size)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        def work() -> None:
            for _ in range(count):
                os.write(fd, record)
                os.fdatasync(fd)
        return count / h.wall_timed(work)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def main() -> None:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--count", type=int, default=40_000, help="messages per group-commit round")
    p.add_argument("--single-count", type=int, default=1_000, help="puts per one-fsync-per-put round")
    p.add_argument("--body", type=int, default=100)
    p.add_argument("--window", type=int, default=256, help="puts pending per thread with put_nowait")
    args = p.parse_args()
    report = h.Report("bench_sync_flush.py", args)
    record_size = 200 + args.body  # about the record size of these messages
    group, pipelined, single, plain = [], [], [], []
    with h.scratch(args.dir) as root:
        for _ in range(args.repeat):
            plain.append(run_fsync_per_put(root, args.single_count, record_size))
            group.append(run_store(root, args.count, args.threads, args.body))
            pipelined.append(run_store(root, args.count, args.threads, args.body, args.window))
            single.append(run_store(root, args.single_count, 1, args.body))
    base = h.median(plain)
    report.figure(f"SYNC put, {args.threads} threads", h.median(group), "msg/s", "fdatasync per put", base,
                  ">= 20x")
    report.figure(f"SYNC put_nowait, {args.threads} threads, {args.window} pending each", h.median(pipelined),
                  "msg/s", "fdatasync per put", base, ">= 20x")
    report.figure("SYNC put, 1 thread", h.median(single), "msg/s", "fdatasync per put", base)
    report.save()


if __name__ == "__main__":
    main()
