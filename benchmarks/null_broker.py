"""The broker of `rocketstore serve`, optionally with a store that writes nothing ("null broker") and/or
under uvloop: the ceiling of client + event loop + protocol without storage, for bench_broker_load.py.

    python benchmarks/null_broker.py [--null-store] [--uvloop] [--volatile-acks] STORE --listen H:P ...

Everything after these optional flags goes to `rocketstore serve` unchanged, so the process runs the
same code (remoting server, gRPC service, handlers, topic table, client registry, long polling, ACL) as
`python -m rocketstore.broker`. With --null-store the store is opened as usual and then only
`MessageStore.put_batch` (every send of both protocols goes through it) is replaced by `NullPut`, which:

* skips the store's whole write path: validation and encoding (`prepare_many`), the commitlog append,
  the consume-queue and index updates, the arrival listeners, SYNC-flush waits;
* answers PUT_OK with made-up offsets: a physical offset advancing by the body size, a per-queue offset
  counter, the msgId those offsets would have;
* so reads (PULL_MESSAGE, ReceiveMessage) find nothing and answer as the real broker does on an empty
  queue (long polls are held, woken by the send's arrival notice, and end empty).

The periodic flush still runs (on an empty store). --uvloop installs uvloop's event-loop policy before
the broker's `asyncio.run` (uvloop must be importable: it is not a dependency of rocketstore).
--volatile-acks (a diagnostic, real store) makes `ConsumerStateTable.save` a no-op: gRPC consumer state
(acks, invisible times) stays in memory instead of being written to config/grpcConsumerState.json,
fsynced and renamed after every change.
"""

from __future__ import annotations

import socket
import sys
import time
from collections import defaultdict
from collections.abc import Iterable

from rocketstore import Message, MessageStore, PutResult, PutStatus
from rocketstore.format.msgid import encode_msg_id


class NullPut:
    """Stands in for `MessageStore.put_batch`: PutResults, nothing written."""

    def __init__(self, store: MessageStore) -> None:
        host, _, port = store.config.store_host.rpartition(":")
        try:
            self.ip, self.port = socket.inet_aton(host), int(port)
        except (OSError, ValueError):
            self.ip, self.port = b"\x7f\x00\x00\x01", 10911
        self.phy_offset = 0
        self.queue_offsets: defaultdict[tuple[str, int], int] = defaultdict(int)

    def __call__(self, messages: Iterable[Message]) -> list[PutResult]:
        now = int(time.time() * 1000)
        results = []
        for m in messages:
            key = (m.topic, m.queue_id)
            queue_offset = self.queue_offsets[key]
            self.queue_offsets[key] = queue_offset + 1
            size = len(m.body) + 100
            results.append(PutResult(PutStatus.PUT_OK, self.phy_offset, queue_offset, size,
                                     encode_msg_id(self.ip, self.port, self.phy_offset), now, m.topic, m.queue_id))
            self.phy_offset += size
        return results


def main() -> None:
    own = ("--null-store", "--uvloop", "--volatile-acks")
    args = sys.argv[1:]
    flags = set()
    while args and args[0] in own:
        flags.add(args.pop(0))
    null_store, use_uvloop = "--null-store" in flags, "--uvloop" in flags
    if "--volatile-acks" in flags:
        from rocketstore.broker.grpc.consumer_state import ConsumerStateTable

        ConsumerStateTable.save = lambda self: None  # type: ignore[method-assign]
    if null_store:
        import rocketstore.broker.app as app

        real_open = app.open_store

        def open_null_store(*a: object, **kw: object) -> MessageStore:
            store = real_open(*a, **kw)  # type: ignore[arg-type]
            store.put_batch = NullPut(store)  # type: ignore[method-assign]
            return store

        app.open_store = open_null_store
    if use_uvloop:
        import asyncio

        import uvloop

        asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    from rocketstore.cli.serve import serve

    serve(args=args, prog_name="null_broker.py")


if __name__ == "__main__":
    main()
