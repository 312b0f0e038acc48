"""Where a synchronous send's time goes in `rocketstore serve`.

Three views of the same request, a SEND_MESSAGE_V2 of --size bytes whose header carries exactly the fields
the RocketMQ 4.9.8 Java producer sends (captured from one; JSON header, as the Java client writes by default):

1. stages, in this process, no socket: frame decode, header decode, the send handler (field parsing,
   properties, the Message, `put_batch`, stats, the arrival notice, the response), `put_batch` alone,
   the stats alone, the response's encoding; each the median over --repeat runs of --count calls, in us;
2. round trip: a broker (`BrokerApp`, the code of `rocketstore serve`, ASYNC flush) in a child process,
   one blocking-socket client sending the request and waiting for each answer (the Java client's
   synchronous send): requests/s, p50/p90/p99 and the broker's CPU time per request (user + system,
   from /proc: steadier than the wall clock on a shared machine); then with --connections clients; then
   one connection keeping --connections requests unanswered (a Java producer shared by that many threads
   sends over its one channel to the broker);
3. a cProfile of that broker child under the same load, the functions by own time (--top).

The difference between the round trip and the sum of the stages is what the event loop, the sockets and
the server's per-request plumbing cost.

    .venv/bin/python benchmarks/profile_broker_send.py --count 20000 --save

--save appends the report to benchmarks/results/profile_broker_send.txt.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import platform
import pstats
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.broker.app import BrokerApp
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.handlers_send import _v1
from rocketstore.format.properties import decode_properties
from rocketstore.protocol import CommandReader, RemotingCommand, RequestCode, encode_command
from rocketstore.protocol.command import decode_command
from rocketstore.protocol.frame import FrameDecoder

RESULTS = Path(__file__).resolve().parent / "results" / "profile_broker_send.txt"
TOPIC = "BenchTopic"
GEOMETRY = StoreConfig(commitlog_file_size=64 * 1024 * 1024, consume_queue_file_entries=30_000,
                       index_hash_slots=50_000, index_max_entries=200_000)


def java_send(opaque: int, i: int, size: int) -> RemotingCommand:
    """A SEND_MESSAGE_V2 as the Java producer (DefaultMQProducer.send, 4.9.8) writes it."""
    props = f"KEYS\x01key-{i}\x02UNIQ_KEY\x01FD00000000000000000000000000000{i:027X}\x02WAIT\x01true\x02TAGS\x01TagA"
    fields = {"a": "bench_producer_group", "b": TOPIC, "c": "TBW102", "d": "4", "e": str(i % 4), "f": "0",
              "g": str(int(time.time() * 1000)), "h": "0", "i": props, "j": "0", "k": "false", "m": "false",
              "n": "broker-a"}
    body = (f"msg-{i}".encode() + b"x" * size)[:max(size, 1)]
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, opaque=opaque, language="JAVA", version=399,
                           ext_fields=fields, body=body)


# -- 1. stages -----------------------------------------------------------------------------------------


class _Conn:
    """What the send handler reads of a connection."""

    peer = "127.0.0.1:50000"
    local = "127.0.0.1:10911"
    closed = False


def _time_us(fn: Callable[[int], object], count: int, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        t0 = time.thread_time()
        for i in range(count):
            fn(i)
        runs.append((time.thread_time() - t0) / count * 1e6)
    return statistics.median(runs)


def stages(args: argparse.Namespace, work: Path) -> list[tuple[str, float]]:
    frames = [encode_command(java_send(i, i, args.size)) for i in range(args.count)]
    out: list[tuple[str, float]] = []

    def frame_decode(i: int) -> object:
        decoder = FrameDecoder()
        decoder.feed(frames[i])
        return decoder.next_frame()

    decoded = [frame_decode(i) for i in range(args.count)]
    out.append(("frame decode (feed + next_frame)", _time_us(frame_decode, args.count, args.repeat)))
    out.append(("header decode (JSON)", _time_us(lambda i: decode_command(decoded[i]), args.count,  # type: ignore[arg-type]
                                                  args.repeat)))

    def reader(i: int) -> object:
        r = CommandReader()
        r.feed(frames[i])
        return r.next_command()

    out.append(("CommandReader: bytes to command", _time_us(reader, args.count, args.repeat)))
    app, loop = _app(work / "stages")
    try:
        ctx = app.ctx
        assert ctx is not None
        handler = app.servers[0].dispatcher.handlers[RequestCode.SEND_MESSAGE_V2]
        conn = _Conn()
        commands = [reader(i) for i in range(args.count)]

        def send(i: int) -> object:
            return loop.run_until_complete(handler(commands[i], conn))  # type: ignore[arg-type]

        answers = [send(i) for i in range(min(args.count, 2000))]  # the topic exists from here on
        out.append(("send handler, whole (run_until_complete)", _time_us(
            lambda i: send(i), args.count, 1)))

        async def many(n: int) -> None:
            for i in range(n):
                await handler(commands[i], conn)  # type: ignore[arg-type]

        t0 = time.thread_time()
        loop.run_until_complete(many(args.count))
        out.append(("send handler, whole (awaited in one task)", (time.thread_time() - t0) / args.count * 1e6))
        body = b"x" * args.size
        msgs = [[Message(TOPIC, body, queue_id=i % 4, tags="TagA", keys=(f"key-{i}",))] for i in range(args.count)]
        out.append(("MessageStore.put_batch of one message", _time_us(lambda i: ctx.store.put_batch(msgs[i]),
                                                                        args.count, 1)))
        sends = handler.__self__  # type: ignore[attr-defined]
        built = [[sends._message(_v1(commands[i]), conn, TOPIC, i % 4,  # type: ignore[union-attr]
                                 decode_properties(commands[i].ext_fields["properties"]),  # type: ignore[union-attr]
                                 commands[i].body, 0)] for i in range(args.count)]  # type: ignore[union-attr]
        out.append(("put_batch of the Message the handler builds", _time_us(
            lambda i: ctx.store.put_batch(built[i]), args.count, 1)))
        out.append(("stats.record_put", _time_us(lambda i: ctx.stats.record_put(TOPIC, 1, 400), args.count,
                                                 args.repeat)))
        answer = answers[-1]
        out.append(("response encode", _time_us(lambda i: encode_command(answer), args.count,  # type: ignore[arg-type]
                                                args.repeat)))
    finally:
        loop.run_until_complete(app.close())
        loop.close()
    return out


def _app(root: Path) -> tuple[BrokerApp, asyncio.AbstractEventLoop]:
    MessageStore.open(root, GEOMETRY).close()
    loop = asyncio.new_event_loop()
    app = BrokerApp(BrokerConfig(root, listen="127.0.0.1:0", namesrv=None))
    loop.run_until_complete(app.start())
    return app, loop


# -- 2. round trip -------------------------------------------------------------------------------------


def _recv_frame(sock: socket.socket, pending: bytearray) -> bytes:
    while True:
        if len(pending) >= 4:
            (length,) = struct.unpack_from(">i", pending)
            if len(pending) >= 4 + length:
                frame = bytes(pending[:4 + length])
                del pending[:4 + length]
                return frame
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("broker closed the connection")
        pending += chunk


def client_loop(port: int, count: int, size: int, first: int, latencies: list[float]) -> None:
    """`count` sends, each waiting for its answer (one connection)."""
    requests = [encode_command(java_send(first + i, first + i, size)) for i in range(count)]
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = bytearray()
        for request in requests:
            t0 = time.perf_counter()
            sock.sendall(request)
            _recv_frame(sock, pending)
            latencies.append(time.perf_counter() - t0)


def pipelined_loop(port: int, count: int, size: int, window: int, latencies: list[float]) -> None:
    """`count` sends over one connection with up to `window` unanswered at a time: how the Java producer
    shared by N threads uses its one channel to the broker."""
    requests = [encode_command(java_send(i, i, size)) for i in range(count)]
    sent_at: dict[int, float] = {}
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pending = bytearray()
        nxt = 0
        while nxt < min(window, count):
            sent_at[nxt] = time.perf_counter()
            sock.sendall(requests[nxt])
            nxt += 1
        for _ in range(count):
            answer = CommandReader()
            answer.feed(_recv_frame(sock, pending))
            opaque = answer.next_command().opaque  # type: ignore[union-attr]
            latencies.append(time.perf_counter() - sent_at.pop(opaque))
            if nxt < count:
                sent_at[nxt] = time.perf_counter()
                sock.sendall(requests[nxt])
                nxt += 1


def cpu_seconds(pid: int) -> float:
    """User + system CPU time `pid` has used."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def round_trip(port: int, count: int, size: int, connections: int, pid: int | None = None,
               window: int = 0) -> dict[str, float]:
    """Requests/s and latency of `connections` synchronous clients, or with `window`, of one connection
    keeping that many requests unanswered."""
    cpu_before = cpu_seconds(pid) if pid else 0.0
    latencies: list[float] = []
    per = count // connections
    threads = [threading.Thread(target=client_loop, args=(port, per, size, 10_000_000 * (k + 1), latencies))
               for k in range(connections)]
    if window:
        threads = [threading.Thread(target=pipelined_loop, args=(port, count, size, window, latencies))]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - t0
    latencies.sort()
    figures = {"requests_per_s": len(latencies) / elapsed, "p50_us": latencies[len(latencies) // 2] * 1e6,
               "p90_us": latencies[int(len(latencies) * 0.9)] * 1e6,
               "p99_us": latencies[int(len(latencies) * 0.99)] * 1e6}
    if pid:
        figures["broker_cpu_us_per_request"] = (cpu_seconds(pid) - cpu_before) / len(latencies) * 1e6
    return figures


CHILD = """
import asyncio, cProfile, sys
from pathlib import Path
from rocketstore.broker.app import BrokerApp
from rocketstore.broker.config import BrokerConfig
from rocketstore.broker.handlers_send import _v1
from rocketstore.format.properties import decode_properties
store, port, profile = sys.argv[1], sys.argv[2], sys.argv[3]
app = BrokerApp(BrokerConfig(Path(store), listen=f"127.0.0.1:{port}", namesrv=None))
if profile != "-":
    prof = cProfile.Profile()
    prof.enable()
try:
    asyncio.run(app.serve_forever())
finally:
    if profile != "-":
        prof.disable()
        prof.dump_stats(profile)
"""


@contextlib.contextmanager
def broker_child(root: Path, profile: Path | None):  # type: ignore[no-untyped-def]
    MessageStore.open(root, GEOMETRY).close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(root), str(port), str(profile or "-")])
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError("the broker child did not start")
            time.sleep(0.1)
        yield port, proc.pid
    finally:
        proc.terminate()
        proc.wait(30)


def round_trips(args: argparse.Namespace, work: Path, emit: Callable[[str], None]) -> None:
    emit("2. round trip over loopback, blocking-socket client(s), broker in a child process")
    with broker_child(work / "rt", None) as (port, pid):
        round_trip(port, min(args.count, 5000), args.size, 1)  # warm-up; creates the topic
        for connections in (1, args.connections):
            figures = round_trip(port, args.count, args.size, connections, pid)
            emit(f"   {connections} connection(s): " + ", ".join(f"{k} {v:,.1f}" for k, v in figures.items()))
        figures = round_trip(port, args.count, args.size, 1, pid, window=args.connections)
        emit(f"   1 connection, {args.connections} unanswered: "
             + ", ".join(f"{k} {v:,.1f}" for k, v in figures.items()))


def profile(args: argparse.Namespace, work: Path, emit: Callable[[str], None]) -> None:
    emit(f"3. cProfile of the broker child under {args.connections} connections, by own time")
    prof_path = work / "broker.prof"
    with broker_child(work / "prof", prof_path) as (port, _pid):
        round_trip(port, min(args.count, 5000), args.size, 1)
        round_trip(port, args.count, args.size, args.connections)
    text = io.StringIO()
    pstats.Stats(str(prof_path), stream=text).sort_stats("tottime").print_stats(args.top)
    for row in text.getvalue().splitlines():
        if row.strip() and not row.startswith(("   Random", "   Ordered")):
            emit("   " + row.rstrip())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000, help="requests of each measurement")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each in-process stage (median)")
    parser.add_argument("--size", type=int, default=256, help="body bytes")
    parser.add_argument("--connections", type=int, default=8, help="clients of the concurrent round trip")
    parser.add_argument("--top", type=int, default=30, help="functions listed from the profile")
    parser.add_argument("--parts", default="stages,round-trip,profile", help="which of the three views to run")
    parser.add_argument("--save", action="store_true", help=f"append the report to {RESULTS.name}")
    args = parser.parse_args()
    lines = [f"$ python benchmarks/profile_broker_send.py {' '.join(sys.argv[1:])}",
             f"# {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, python {platform.python_version()}, "
             f"{os.cpu_count()} cpus, load average {os.getloadavg()[0]:.1f}"]
    print("\n".join(lines), flush=True)

    def emit(text: str) -> None:
        lines.append(text)
        print(text, flush=True)

    with tempfile.TemporaryDirectory(prefix="profile-broker-send-") as tmp:
        work = Path(tmp)
        parts = set(args.parts.split(","))
        if "stages" in parts:
            emit("1. stages, in process (us of thread CPU time per request)")
            for name, us in stages(args, work):
                emit(f"   {name:<44} {us:8.2f}")
        if "round-trip" in parts:
            round_trips(args, work, emit)
        if "profile" in parts:
            profile(args, work, emit)
    if args.save:
        with open(RESULTS, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n# json " + json.dumps({"args": vars(args)}) + "\n\n")


if __name__ == "__main__":
    main()
