"""Put throughput, single messages and batches, 100 B and 1 KiB bodies, one key each, async flush.

Baseline in the same run: sqlite3 in WAL mode with an indexed key column, one autocommitted INSERT per
message (the reference setting of the goals). For 1 KiB batches also a plain sequential write of the same
volume with one fdatasync at the end (what `dd bs=1M conv=fdatasync` measures).

    python benchmarks/bench_put.py                     # both sizes, single and batch
    python benchmarks/bench_put.py --body 100 --mode batch --count 1000000 --batch-size 512
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h
from rocketstore.format import javahash


def run_store(root: Path, msgs: list, mode: str, batch_size: int, flush: bool = False,
              numpy: bool = True) -> tuple[float, int, float]:
    """Seconds (on the chosen clock) to put `msgs` into a new store, the commitlog bytes written, and
    the wall seconds. `numpy=False` runs the pure-Python key hashing (what a machine without numpy gets)."""
    path = root / "store"
    store = h.open_store(path)
    saved_np = getattr(javahash, "_np", None)
    if not numpy:
        javahash._np = None  # the module's optional numpy handle: None means the pure-Python path
    try:
        if mode == "single":
            put = store.put

            def work() -> None:
                for m in msgs:
                    put(m)
        else:
            put_batch = store.put_batch
            chunks = [msgs[i:i + batch_size] for i in range(0, len(msgs), batch_size)]

            def work() -> None:
                for chunk in chunks:
                    put_batch(chunk)
                if flush:
                    store.flush()
        t0 = h.time.perf_counter()
        seconds = h.timed(work)
        wall = h.time.perf_counter() - t0
        volume = store.max_phy_offset - store.min_phy_offset
    finally:
        if not numpy:
            javahash._np = saved_np
        store.close()
        h.shutil.rmtree(path, ignore_errors=True)
    return seconds, volume, wall


def run_sqlite(root: Path, msgs: list, mode: str, batch_size: int) -> float:
    path = root / "baseline.sqlite"
    conn = h.open_sqlite(path)
    try:
        producer = h.SqliteProducer(conn)
        if mode == "single":
            def work() -> None:
                for m in msgs:
                    producer.put(m)
        else:
            def work() -> None:
                for i in range(0, len(msgs), batch_size):
                    producer.put_batch(msgs[i:i + batch_size])
        return h.timed(work)
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)


def plain_write(root: Path, volume: int, chunk: int = 1024 * 1024) -> float:
    """Seconds for a sequential write of `volume` bytes in 1 MiB chunks plus one fdatasync."""
    path = root / "plain.bin"
    block = os.urandom(chunk)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        def work() -> None:
            left = volume
            while left > 0:
                left -= os.write(fd, block[:min(chunk, left)])
            os.fdatasync(fd)
        return h.wall_timed(work)
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


GOALS = {("single", 100): ">= 3x", ("single", 1024): ">= 3x", ("batch", 100): ">= 10x", ("batch", 1024): ""}


def main() -> None:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=200_000, help="messages per store round")
    p.add_argument("--sqlite-count", type=int, default=50_000, help="messages per sqlite round")
    p.add_argument("--body", type=int, nargs="*", default=[100, 1024], help="body sizes in bytes")
    p.add_argument("--mode", choices=["single", "batch", "both"], default="both")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--compare-numpy", action="store_true",
                   help="also run put_batch with numpy's key hashing switched off")
    args = p.parse_args()
    report = h.Report("bench_put.py", args)
    modes = ["single", "batch"] if args.mode == "both" else [args.mode]
    with h.scratch(args.dir) as root:
        for body in args.body:
            msgs = h.messages(args.count, body)
            base_msgs = msgs[:args.sqlite_count]
            sqlite_single: list[float] = []
            results: dict[str, list[float]] = {m: [] for m in modes}
            batch_sqlite: list[float] = []
            no_numpy: list[float] = []
            batch_wall: list[float] = []
            plain: list[float] = []
            volume = 0
            for round_no in range(args.repeat):
                # A-B then B-A: a load that drifts during a round weighs on both sides alike
                if round_no % 2 == 0:
                    sqlite_single.append(len(base_msgs) / run_sqlite(root, base_msgs, "single", 1))
                for mode in modes:
                    seconds, volume, wall = run_store(root, msgs, mode, args.batch_size)
                    results[mode].append(len(msgs) / seconds)
                    if mode == "batch":
                        batch_wall.append(len(msgs) / wall)
                if round_no % 2 == 1:
                    sqlite_single.append(len(base_msgs) / run_sqlite(root, base_msgs, "single", 1))
                if "batch" in modes and args.compare_numpy:
                    no_numpy.append(len(msgs) / run_store(root, msgs, "batch", args.batch_size, numpy=False)[0])
                if "batch" in modes:
                    batch_sqlite.append(len(base_msgs) / run_sqlite(root, base_msgs, "batch", args.batch_size))
                    if body >= 1024:
                        plain.append(volume / plain_write(root, volume))
            base = h.median(sqlite_single)
            for mode in modes:
                name = f"put {mode} {body} B" + (f" (batches of {args.batch_size})" if mode == "batch" else "")
                report.figure(name, h.median(results[mode]), "msg/s", "sqlite WAL put", base,
                              GOALS.get((mode, body), ""))
            if no_numpy:
                report.figure(f"put batch {body} B, numpy hashing", h.median(results["batch"]), "msg/s",
                              "pure-Python hashing", h.median(no_numpy))
            if "batch" in modes:
                report.line(f"{'  (sqlite WAL executemany per batch':<38} {h.median(batch_sqlite):>14,.1f} msg/s "
                            f"| store batch / sqlite batch {h.median(results['batch']) / h.median(batch_sqlite):.2f}x)")
                if plain:  # both in wall time: the disk baseline waits on the disk
                    mb = h.median(batch_wall) * (volume / len(msgs)) / 1e6
                    disk = h.median(plain) / 1e6
                    report.figure(f"put batch {body} B bandwidth (wall)", mb, "MB/s", "plain fdatasync write",
                                  disk, ">= 0.7x")
    report.save()


if __name__ == "__main__":
    main()
