"""Load test of `rocketstore serve` on loopback with the real RocketMQ C++ client, next to the store
used in-process in the same run.

Starts a broker subprocess over a fresh store, runs P producer processes (PyPI rocketmq 0.4.4,
send_sync) and C push-consumer processes in one group at the same time, and reports messages/s and
send latency percentiles; then puts the same number of messages straight into a MessageStore in this
process. Every phase is bounded by --timeout and the broker is stopped with SIGTERM at the end.

    .venv/bin/python benchmarks/bench_broker.py --producers 4 --consumers 2 --messages 5000 --size 256

The client runs in its own venv ($ROCKETSTORE_CLIENT_VENV, else <tmp>/rocketstore-client-rocketmq-0.4.4),
created on first use as the tests do.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.broker.broker_support import (  # noqa: E402
    SMALL_GEOMETRY,
    BrokerProcess,
    RealClient,
    client_venv_python,
    finish,
)

from rocketstore import Message, MessageStore, StoreConfig  # noqa: E402

GEOMETRY = {**SMALL_GEOMETRY, "commitlog_file_size": 64 * 1024 * 1024, "consume_queue_file_entries": 300_000,
            "index_hash_slots": 500_000, "index_max_entries": 2_000_000}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def run_broker_phase(args: argparse.Namespace, work: Path) -> dict[str, float]:
    store = work / "broker-store"
    MessageStore.open(store, StoreConfig(**GEOMETRY)).close()
    broker = BrokerProcess(store, work / "broker.log").start()
    client = RealClient(client_venv_python(), work / "client-home")
    per_producer = args.messages // args.producers
    total = per_producer * args.producers
    try:
        started = time.monotonic()
        consumers = [client.start("push", "--namesrv", broker.namesrv, "--topic", "BenchTopic", "--group",
                                  "BenchGroup", "--expect", str(total), "--timeout", str(args.timeout),
                                  "--linger", "0.5") for _ in range(args.consumers)]
        producers = [client.start("produce", "--namesrv", broker.namesrv, "--topic", "BenchTopic", "--count",
                                  str(per_producer), "--key-prefix", f"p{i}-", "--tags", "TagA,TagB",
                                  "--send-timeout-ms", "10000", "--body-size", str(args.size))
                     for i in range(args.producers)]
        sends = [line for p in producers for line in finish(p, args.timeout) if "status" in line]
        produced_at = time.monotonic()
        # Consumers share the group: together they must see every message once; each stops at its
        # timeout, so stop them as soon as the group has everything.
        received: set[str] = set()
        deadline = time.monotonic() + args.timeout
        while len(received) < total and time.monotonic() < deadline:
            received = set()
            for c in consumers:
                for line in c.out.read_text(errors="replace").splitlines():
                    if line.startswith('{"topic"'):
                        received.add(json.loads(line)["body"])
            time.sleep(0.2)
        consumed_at = time.monotonic()
        for c in consumers:
            c.proc.terminate()
            c.proc.wait(30)
    finally:
        broker.stop()
    latencies = [s["latency_ms"] for s in sends]
    return {"sent": len(sends), "received": len(received), "send_msgs_per_s": len(sends) / (produced_at - started),
            "end_to_end_msgs_per_s": len(received) / (consumed_at - started),
            "send_p50_ms": percentile(latencies, 50), "send_p99_ms": percentile(latencies, 99),
            "send_max_ms": max(latencies) if latencies else float("nan")}


def run_store_phase(args: argparse.Namespace, work: Path) -> dict[str, float]:
    body = b"x" * args.size
    latencies = []
    with MessageStore.open(work / "inproc-store", StoreConfig(**GEOMETRY)) as store:
        started = time.monotonic()
        for i in range(args.messages):
            t0 = time.perf_counter()
            store.put(Message("BenchTopic", body, queue_id=i % 4, tags="TagA", keys=(f"k{i}",)))
            latencies.append((time.perf_counter() - t0) * 1000)
        elapsed = time.monotonic() - started
    return {"put_msgs_per_s": args.messages / elapsed, "put_p50_ms": statistics.median(latencies),
            "put_p99_ms": percentile(latencies, 99)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--messages", type=int, default=8000, help="total messages sent")
    parser.add_argument("--size", type=int, default=256, help="body bytes")
    parser.add_argument("--timeout", type=float, default=300, help="bound of each phase, in seconds")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-broker-") as tmp:
        work = Path(tmp)
        broker = run_broker_phase(args, work)
        inproc = run_store_phase(args, work)
    report = {"machine": f"{platform.machine()} {os.cpu_count()} cpus, Python {platform.python_version()}",
              "producers": args.producers, "consumers": args.consumers, "messages": args.messages,
              "broker": {k: round(v, 2) for k, v in broker.items()},
              "store_in_process": {k: round(v, 3) for k, v in inproc.items()}}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
