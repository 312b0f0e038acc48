"""The disk itself: plain sequential write bandwidth with fdatasync, and the latency of a 4 KiB
write + fdatasync. These are the baselines of the other scripts (bench_put.py measures the sequential
write again in its own run, bench_sync_flush.py the one-fsync-per-put rate); here they stand against
the store writing the same volume through its commitlog with put_batch (1 KiB bodies) and a flush.

    python benchmarks/bench_disk.py
    python benchmarks/bench_disk.py --mib 2048
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h


def sequential(path: Path, volume: int, chunk: int = 1024 * 1024) -> float:
    block = os.urandom(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t0 = time.perf_counter()
        left = volume
        while left > 0:
            left -= os.write(fd, block[:min(chunk, left)])
        os.fdatasync(fd)
        return volume / (time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def fsync_latencies_us(path: Path, count: int) -> list[float]:
    block = os.urandom(4096)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    out = []
    try:
        for _ in range(count):
            t0 = time.perf_counter_ns()
            os.write(fd, block)
            os.fdatasync(fd)
            out.append((time.perf_counter_ns() - t0) / 1000)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    return sorted(out)


def store_volume(root: Path, volume: int) -> float:
    """Bytes/s of put_batch (1 KiB bodies, batches of 256) writing about `volume` commitlog bytes,
    flush included."""
    path = root / "store"
    store = h.open_store(path)
    per_message = 1024 + 120
    msgs = h.messages(max(256, volume // per_message), 1024)
    try:
        t0 = time.perf_counter()
        for i in range(0, len(msgs), 256):
            store.put_batch(msgs[i:i + 256])
        store.flush()
        seconds = time.perf_counter() - t0
        written = store.max_phy_offset - store.min_phy_offset
    finally:
        store.close()
        h.shutil.rmtree(path, ignore_errors=True)
    return written / seconds


def main() -> None:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--mib", type=int, default=512, help="volume of the sequential write")
    p.add_argument("--fsyncs", type=int, default=500)
    args = p.parse_args()
    report = h.Report("bench_disk.py", args)
    volume = args.mib * 1024 * 1024
    seq, lat, ours = [], [], []
    with h.scratch(args.dir) as root:
        for _ in range(args.repeat):
            seq.append(sequential(root / "seq.bin", volume))
            lat.append(h.percentile(fsync_latencies_us(root / "fsync.bin", args.fsyncs), 50))
            ours.append(store_volume(root, volume))
    report.line(f"{'4 KiB write + fdatasync p50':<38} {h.median(lat):>14,.1f} us")
    report.figure(f"put_batch 1 KiB + flush ({args.mib} MiB)", h.median(ours) / 1e6, "MB/s",
                  "sequential write + fdatasync", h.median(seq) / 1e6, ">= 0.7x")
    report.save()


if __name__ == "__main__":
    main()
