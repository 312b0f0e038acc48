"""Broker load test over both protocols, real broker next to a "null broker" (same process code, a store
that writes nothing), with a cProfile of the real broker under the gRPC load and, when uvloop can be
installed, the real broker under uvloop.

Each phase starts a broker subprocess over a fresh store (benchmarks/null_broker.py: the code of
`python -m rocketstore.broker`, with --null-store for the null broker), creates the topic (4 queues),
starts C consumers in one group, then P producer processes sending synchronously, and measures:

* send msg/s: messages acknowledged / (last send end - first send start), over all producers (client
  start-up and route lookups are outside the window);
* end-to-end msg/s: distinct messages received by the group / (last arrival - first send start); the
  null broker stores nothing, so its consumers get nothing and it has no end-to-end figure;
* send latency p50 / p99 / max, from every send's own latency line.

Variants: `real` (the broker as shipped), `null` (the same process code, MessageStore.put_batch answering
PUT_OK without writing: see null_broker.py for exactly what it skips), `uvloop` (real, under uvloop, when
pip can install it into a scratch folder), and `real-send-only` / `null-send-only` (producers only: with
consumers the real broker also delivers and records acks, work the null broker never gets since it
delivers nothing, so this pair isolates the send path); with --volatile-acks on, `volatile` (real, gRPC
consumer state kept in memory only: what the per-ack state file costs).

Remoting: the real C++ client (PyPI rocketmq 0.4.4, send_sync, push consumers). gRPC: the official
RocketMQ 5 Python client (rocketmq-python-client 5.1.2, Producer.send, SimpleConsumer receive + ack).
Both run in their own venvs as in the tests (tests/broker/broker_support.py, tests/grpc/grpc_support.py);
when a venv cannot be built the script says so and exits 0. Variants alternate inside every round (the
order flips each round); medians and ranges over the rounds are reported, with real/null ratios.

    .venv/bin/python benchmarks/bench_broker_load.py --rounds 2 --producers 4 --consumers 2 \
        --messages 1000 --size 256 --save

--save writes the text report and the JSON to benchmarks/results/bench_broker_load.txt (appended).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import pstats
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from io import StringIO
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import pytest  # noqa: E402  (the client helpers fail through pytest.fail)
from tests.broker.broker_support import ClientProcess, RealClient, client_venv_python, free_port  # noqa: E402

from rocketstore import MessageStore, StoreConfig, native  # noqa: E402
from rocketstore.protocol import RequestCode, ResponseCode  # noqa: E402
from rocketstore.protocol.client import RemotingClient  # noqa: E402

NULL_BROKER = Path(__file__).resolve().parent / "null_broker.py"
RESULTS_DIR = Path(__file__).resolve().parent / "results"
TOPIC = "LoadTopic"
GEOMETRY = {"commitlog_file_size": 64 * 1024 * 1024, "consume_queue_file_entries": 300_000,
            "index_hash_slots": 500_000, "index_max_entries": 2_000_000}


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def _accepts(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


class Broker:
    """benchmarks/null_broker.py STORE on free loopback ports (remoting, name server, gRPC)."""

    def __init__(self, work: Path, name: str, flags: list[str], *, profile: Path | None = None,
                 extra_path: str | None = None) -> None:
        self.store = work / f"{name}-store"
        MessageStore.open(self.store, StoreConfig(**GEOMETRY)).close()
        self.port, self.ns_port, self.grpc_port = free_port(), free_port(), free_port()
        prefix = ["-m", "cProfile", "-o", str(profile)] if profile else []
        cmd = [sys.executable, *prefix, str(NULL_BROKER), *flags, str(self.store), "--listen", self.addr,
               "--namesrv", f"127.0.0.1:{self.ns_port}", "--grpc", self.endpoint, "--log-level", "WARNING"]
        env = dict(os.environ)
        if extra_path:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), extra_path) if p)
        self.log_path = work / f"{name}.log"
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while not all(_accepts(p) for p in (self.port, self.ns_port, self.grpc_port)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"broker {name} did not start:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.1)
        with RemotingClient(self.addr) as admin:
            created = admin.request(RequestCode.UPDATE_AND_CREATE_TOPIC,
                                    {"topic": TOPIC, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6})
            if created.code != ResponseCode.SUCCESS:
                raise RuntimeError(f"cannot create {TOPIC}: {created.remark}")

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def namesrv(self) -> str:
        return f"127.0.0.1:{self.ns_port}"

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _lines(client: ClientProcess) -> list[dict]:
    out = []
    for line in client.out.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return out


def _stop(clients: list[ClientProcess]) -> None:
    for c in clients:
        if c.proc.poll() is None:
            c.proc.terminate()
    for c in clients:
        try:
            c.proc.wait(20)
        except subprocess.TimeoutExpired:
            c.proc.kill()
            c.proc.wait(10)


def run_phase(args: argparse.Namespace, work: Path, protocol: str, variant: str, clients: dict,
              seq: int) -> dict:
    """One broker, C consumers and P producers; the figures of one (protocol, variant) round."""
    base, _, only = variant.partition("-")
    flags = {"real": [], "null": ["--null-store"], "uvloop": ["--uvloop"], "profile": [],
             "volatile": ["--volatile-acks"]}[base]
    n_consumers = 0 if only == "send-only" else args.consumers
    name = f"{seq:02d}-{protocol}-{variant}"
    profile = work / f"{name}.prof" if variant == "profile" else None
    broker = Broker(work, name, flags, profile=profile,
                    extra_path=args.uvloop_site if variant == "uvloop" else None)
    per_producer = args.messages
    total = per_producer * args.producers
    group = f"LoadGroup{seq}"
    consumers: list[ClientProcess] = []
    producers: list[ClientProcess] = []
    try:
        if protocol == "remoting":
            client = clients["remoting"]
            consumers = [client.start("push", "--namesrv", broker.namesrv, "--topic", TOPIC, "--group", group,
                                      "--expect", str(total), "--timeout", str(args.timeout), "--linger", "0")
                         for _ in range(n_consumers)]
            producers = [client.start("produce", "--namesrv", broker.namesrv, "--topic", TOPIC, "--count",
                                      str(per_producer), "--key-prefix", f"p{i}-", "--tags", "TagA,TagB",
                                      "--send-timeout-ms", "10000", "--body-size", str(args.size))
                         for i in range(args.producers)]
        else:
            client = clients["grpc"]
            consumers = [client.start("consume", "--endpoint", broker.endpoint, "--topic", TOPIC, "--group", group,
                                      "--expect", str(total), "--timeout", str(args.timeout), "--batch", "32",
                                      "--invisible", "60", "--await-s", "5")
                         for _ in range(n_consumers)]
            producers = [client.start("produce", "--endpoint", broker.endpoint, "--topic", TOPIC, "--count",
                                      str(per_producer), "--key-prefix", f"p{i}-", "--tag", "TagA",
                                      "--body-size", str(args.size))
                         for i in range(args.producers)]
        deadline = time.monotonic() + args.timeout
        for p in producers:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.proc.wait(max(0.1, deadline - time.monotonic()))
        _stop(producers)  # the ones past the deadline
        sends = [line for p in producers for line in _lines(p) if "latency_ms" in line and "error" not in line]
        errors = sum(1 for p in producers for line in _lines(p) if "error" in line)
        received: dict[str, int] = {}
        if base != "null" and consumers:  # the null broker keeps nothing to deliver
            while len(received) < len(sends) and time.monotonic() < deadline:
                time.sleep(0.2)
                for c in consumers:
                    for line in _lines(c):
                        if "body" in line and "received_at" in line:
                            received.setdefault(line["body"], line["received_at"])
    finally:
        _stop(producers + consumers)
        broker.stop()
    latencies = [s["latency_ms"] for s in sends]
    first = min((s["sent_at"] - s["latency_ms"] for s in sends), default=0.0)
    last = max((s["sent_at"] for s in sends), default=0.0)
    result = {"protocol": protocol, "variant": variant, "sent": len(sends), "send_errors": errors,
              "send_msgs_per_s": len(sends) / max(last - first, 1.0) * 1000 if sends else 0.0,
              "send_p50_ms": percentile(latencies, 50), "send_p99_ms": percentile(latencies, 99),
              "send_max_ms": max(latencies, default=float("nan")), "received": len(received)}
    if base != "null" and consumers:
        arrived = max(received.values(), default=first)
        result["end_to_end_msgs_per_s"] = len(received) / max(arrived - first, 1.0) * 1000 if received else 0.0
    if profile is not None:
        result["profile"] = _profile_summary(profile, args.profile_top)
    return result


def _profile_summary(path: Path, top: int) -> dict:
    if not path.exists():
        return {"error": "no profile written"}
    stats = pstats.Stats(str(path))
    total = stats.total_tt  # type: ignore[attr-defined]
    rows = []
    for (file, line, func), (_cc, ncalls, tottime, cumtime, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        rows.append({"function": f"{Path(file).name}:{line}({func})", "file": file, "calls": ncalls,
                     "tottime_s": round(tottime, 3), "cumtime_s": round(cumtime, 3)})
    by_self = sorted(rows, key=lambda r: r["tottime_s"], reverse=True)[:top]
    by_cum = sorted(rows, key=lambda r: r["cumtime_s"], reverse=True)[:top * 2]
    ours = sorted((r for r in rows if "/rocketstore/" in r["file"]), key=lambda r: r["cumtime_s"], reverse=True)[:top]
    for r in rows:
        r.pop("file")
    text = StringIO()
    listing = pstats.Stats(str(path), stream=text)
    listing.sort_stats("tottime").print_stats(top)
    listing.print_callers(r"posix.fsync|posix.replace")
    listing.sort_stats("cumulative").print_stats(r"/rocketstore/", top)
    return {"total_s": round(total, 3), "top_self": by_self, "top_cumulative": by_cum, "top_rocketstore": ours,
            "text": text.getvalue()}


def prepare_uvloop(work: Path) -> tuple[str | None, str]:
    """A folder holding uvloop for the broker's PYTHONPATH (pip install --target), or why not."""
    with contextlib.suppress(ImportError):
        import uvloop

        return "", f"uvloop {uvloop.__version__} already importable"
    site = work / "uvloop-site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q",
                           "--target", str(site), "uvloop"], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return None, f"uvloop not installable: {(done.stderr or done.stdout)[-300:]}"
    version = next((p.name for p in site.glob("uvloop-*.dist-info")), "uvloop")
    return str(site), f"{version} installed in a scratch folder (--target) for this run only"


def summarize(results: list[dict]) -> dict:
    out: dict = {}
    keys = ("send_msgs_per_s", "end_to_end_msgs_per_s", "send_p50_ms", "send_p99_ms", "send_max_ms")
    for r in results:
        if r["variant"] == "profile":
            continue
        slot = out.setdefault(r["protocol"], {}).setdefault(r["variant"], {k: [] for k in keys})
        for k in keys:
            if k in r:
                slot[k].append(r[k])
    for variants in out.values():
        for name, slot in list(variants.items()):
            variants[name] = {k: {"median": round(statistics.median(v), 2), "min": round(min(v), 2),
                                  "max": round(max(v), 2)} for k, v in slot.items() if v}
        for suffix in ("", "-send-only"):
            if "real" + suffix in variants and "null" + suffix in variants:
                real = variants["real" + suffix]["send_msgs_per_s"]["median"]
                null = variants["null" + suffix]["send_msgs_per_s"]["median"]
                variants[f"ratio_real_over_null_send{suffix}"] = round(real / null, 3)
        if "uvloop" in variants and "real" in variants:
            variants["ratio_uvloop_over_real_send"] = round(
                variants["uvloop"]["send_msgs_per_s"]["median"] / variants["real"]["send_msgs_per_s"]["median"], 3)
    return out


def text_report(report: dict) -> str:
    lines = [f"# {report['date']}, python {platform.python_version()}, {report['machine']}, load average "
             f"{report['load_average']}, hot functions: {report['hot_functions']}",
             f"# {report['producers']} producers x {report['messages']} msgs of {report['size']} B, "
             f"{report['consumers']} consumers, {report['rounds']} rounds; {report['uvloop']}"]
    for protocol, variants in report["summary"].items():
        for variant, figs in variants.items():
            if not isinstance(figs, dict):
                lines.append(f"{protocol:9s} {variant:28s} {figs}")
                continue
            parts = []
            for k, v in figs.items():
                parts.append(f"{k} {v['median']:,.1f} ({v['min']:,.1f}-{v['max']:,.1f})")
            lines.append(f"{protocol:9s} {variant:14s} " + " | ".join(parts))
    prof = report.get("profile")
    if prof and "top_self" in prof:
        lines.append(f"profile of the real broker under the gRPC load (cProfile, {prof['total_s']} s in total), "
                     "top self time:")
        lines += [f"  {r['tottime_s']:8.3f} s self {r['cumtime_s']:8.3f} s cum {r['calls']:>9} calls  "
                  f"{r['function']}" for r in prof["top_self"]]
        lines.append("  rocketstore's functions by cumulative time:")
        lines += [f"  {r['tottime_s']:8.3f} s self {r['cumtime_s']:8.3f} s cum {r['calls']:>9} calls  "
                  f"{r['function']}" for r in prof["top_rocketstore"]]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--consumers", type=int, default=2)
    parser.add_argument("--messages", type=int, default=1000, help="messages per producer")
    parser.add_argument("--size", type=int, default=256, help="body bytes")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=60, help="bound of each phase, in seconds")
    parser.add_argument("--protocols", default="remoting,grpc")
    parser.add_argument("--uvloop", choices=["auto", "off"], default="auto",
                        help="auto: also run the real broker under uvloop when pip can install it")
    parser.add_argument("--profile", choices=["on", "off"], default="on",
                        help="one extra gRPC phase of the real broker under cProfile")
    parser.add_argument("--profile-top", type=int, default=15)
    parser.add_argument("--volatile-acks", choices=["on", "off"], default="off",
                        help="diagnostic: also the real broker keeping gRPC consumer state in memory only "
                             "(no write + fsync + rename of grpcConsumerState.json per ack)")
    parser.add_argument("--send-only", choices=["on", "off"], default="on",
                        help="also run real and null with producers only (no consumer, so no acks either)")
    parser.add_argument("--save", action="store_true", help="append the report to benchmarks/results/")
    args = parser.parse_args()
    protocols = [p for p in args.protocols.split(",") if p]
    work = Path(tempfile.mkdtemp(prefix="bench-load-"))
    clients: dict = {}
    try:
        for protocol in protocols:
            try:
                if protocol == "remoting":
                    clients[protocol] = RealClient(client_venv_python(), work / "client-home")
                else:
                    from tests.grpc.grpc_support import Client5, client5_venv_python

                    clients[protocol] = Client5(client5_venv_python(), work / "client5-home")
            except (Exception, pytest.fail.Exception) as exc:
                print(f"the {protocol} client venv cannot be built, no figures: {exc}")
                sys.exit(0)
        args.uvloop_site, uvloop_note = (None, "uvloop: off")
        if args.uvloop == "auto":
            args.uvloop_site, uvloop_note = prepare_uvloop(work)
        variants = ["real", "null"] + (["uvloop"] if args.uvloop_site is not None else [])
        if args.send_only == "on":
            variants += ["real-send-only", "null-send-only"]
        if args.volatile_acks == "on":
            variants.append("volatile")
        results, seq = [], 0
        for rnd in range(args.rounds):
            order = variants if rnd % 2 == 0 else variants[::-1]
            for protocol in (protocols if rnd % 2 == 0 else protocols[::-1]):
                for variant in order:
                    seq += 1
                    r = run_phase(args, work, protocol, variant, clients, seq)
                    r["round"] = rnd
                    results.append(r)
                    print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in r.items()}),
                          flush=True)
        profile = None
        if args.profile == "on" and "grpc" in protocols:
            seq += 1
            prof = run_phase(args, work, "grpc", "profile", clients, seq)
            profile = prof.pop("profile")
            results.append(prof)
        report = {"date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                  "machine": f"{os.cpu_count()} cpus, {platform.platform()}",
                  "load_average": " ".join(f"{x:.1f}" for x in os.getloadavg()),
                  "hot_functions": "compiled" if native.speedups is not None else "pure Python",
                  "producers": args.producers, "consumers": args.consumers, "messages": args.messages,
                  "size": args.size, "rounds": args.rounds, "uvloop": uvloop_note,
                  "summary": summarize(results), "phases": results, "profile": profile}
        text = text_report(report)
        print(text)
        if profile:
            print(profile["text"])
        if args.save:
            RESULTS_DIR.mkdir(exist_ok=True)
            slim = {**report, "profile": {k: v for k, v in (profile or {}).items() if k != "text"}}
            with open(RESULTS_DIR / "bench_broker_load.txt", "a") as f:
                f.write(f"$ python benchmarks/bench_broker_load.py {' '.join(sys.argv[1:])}\n{text}\n"
                        f"# json {json.dumps(slim)}\n\n")
        print(json.dumps({k: v for k, v in report.items() if k not in ("phases", "profile")}, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
