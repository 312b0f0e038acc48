"""Get with decode: read every message of every queue with `get(max_count=32)`, 100 B and 1 KiB bodies.

Each message read has its body, tags and keys taken (decoding is lazy: header fields are decoded at
read, properties on first access). `--all-fields` takes every field through `to_dict()` instead.
Baseline in the same run: sqlite3 WAL, `SELECT ... WHERE topic=? AND queue_id=? AND queue_offset>=?
ORDER BY queue_offset LIMIT 32` over the same rows, each row's body and key taken.

    python benchmarks/bench_get.py
    python benchmarks/bench_get.py --count 1000000 --body 100
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _harness as h

SELECT = ("SELECT phy, queue_offset, store_ts, tags, msg_key, body FROM msg "
          "WHERE topic = ? AND queue_id = ? AND queue_offset >= ? ORDER BY queue_offset LIMIT 32")


def read_store(store, all_fields: bool) -> int:
    n = 0
    get = store.get
    for queue_id in range(h.QUEUES):
        offset = 0
        while True:
            result = get(h.TOPIC, queue_id, offset, 32)
            if not result.messages:
                break
            for m in result.messages:
                if all_fields:
                    m.to_dict()
                else:
                    m.body, m.tags, m.keys  # noqa: B018
            n += len(result.messages)
            offset = result.next_offset
    return n


def read_sqlite(conn) -> int:
    n = 0
    for queue_id in range(h.QUEUES):
        offset = 0
        while True:
            rows = conn.execute(SELECT, (h.TOPIC, queue_id, offset)).fetchall()
            if not rows:
                break
            for row in rows:
                row[5], row[3], row[4]
            n += len(rows)
            offset = rows[-1][1] + 1
    return n


def main() -> None:
    p = h.parser(__doc__.splitlines()[0])
    p.add_argument("--count", type=int, default=200_000, help="messages in the store and in sqlite")
    p.add_argument("--body", type=int, nargs="*", default=[100, 1024])
    p.add_argument("--all-fields", action="store_true", help="decode every field (to_dict) per message")
    args = p.parse_args()
    report = h.Report("bench_get.py", args)
    with h.scratch(args.dir) as root:
        for body in args.body:
            msgs = h.messages(args.count, body)
            store = h.open_store(root / f"store-{body}")
            for i in range(0, len(msgs), 1024):
                store.put_batch(msgs[i:i + 1024])
            conn = h.open_sqlite(root / f"baseline-{body}.sqlite")
            producer = h.SqliteProducer(conn)
            for i in range(0, len(msgs), 1024):
                producer.put_batch(msgs[i:i + 1024])
            ours: list[float] = []
            theirs: list[float] = []
            try:
                for _ in range(args.repeat):
                    t0 = h.clock()
                    counted = read_store(store, args.all_fields)
                    ours.append(counted / (h.clock() - t0))
                    assert counted == args.count, counted
                    t0 = h.clock()
                    counted = read_sqlite(conn)
                    theirs.append(counted / (h.clock() - t0))
            finally:
                store.close()
                conn.close()
            label = "all fields" if args.all_fields else "body+tags+keys"
            report.figure(f"get+decode {body} B ({label})", h.median(ours), "msg/s", "sqlite WAL select",
                          h.median(theirs), ">= 600,000 msg/s")
    report.save()


if __name__ == "__main__":
    main()
