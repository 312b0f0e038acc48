"""Run under a low descriptor limit: a store of many queues, or of many index files, opens, takes puts,
reopens and answers.

    python -m tests.adversarial.fd_workload STORE QUEUES LIMIT
    python -m tests.adversarial.fd_workload index STORE MESSAGES LIMIT

Prints one JSON line: the most descriptors seen open, and what was read back.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import threading
from pathlib import Path

from rocketstore import Message, MessageStore, StoreConfig

TOPICS = 100
CONFIG = StoreConfig(consume_queue_file_entries=64, commitlog_file_size=1 << 20, deliver_delayed_messages=False)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def put_round(store: MessageStore, queues: int, round_no: int) -> int:
    most = 0
    for n in range(queues):
        store.put(Message(f"T{n % TOPICS}", f"{round_no}-{n}".encode(), queue_id=n // TOPICS))
        if n % 500 == 0:
            most = max(most, open_descriptors())
    return most


def set_limit(limit: int) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))


def main() -> None:
    if sys.argv[1] == "index":
        index_main(Path(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
        return
    path, queues, limit = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    set_limit(limit)
    with MessageStore.open(path, CONFIG) as store:
        most = put_round(store, queues, 0)
    with MessageStore.open(path, CONFIG) as store:  # recovery checks every queue's file
        most = max(most, open_descriptors(), put_round(store, queues, 1))
        bodies = [[m.body.decode() for m in store.get(f"T{n % TOPICS}", n // TOPICS, 0, 4).messages]
                  for n in range(0, queues, max(1, queues // 50))]
        clean = store.recovery.clean
    with MessageStore.open(path, CONFIG, read_only=True) as reader:
        last = reader.get("T99", queues // TOPICS - 1, 1, 1).messages[0].body.decode()
    print(json.dumps({"most_open": most, "bodies": bodies, "clean": clean, "last": last}))


INDEX_QUEUES = 400
READERS = 4
INDEX_CONFIG = StoreConfig(index_hash_slots=8, index_max_entries=24, consume_queue_file_entries=64,
                           commitlog_file_size=1 << 20, deliver_delayed_messages=False)
"""23 keys an index file: a message of one key each makes a new index file every 23 puts."""


def indexed(n: int) -> Message:
    return Message(f"T{n % TOPICS}", f"m{n}".encode(), queue_id=n // TOPICS % (INDEX_QUEUES // TOPICS),
                   keys=(f"k{n}",))


def read_beside(store: MessageStore, written: list[int], stop: threading.Event, errors: list[str],
                most: list[int]) -> None:
    """Query keys of old index files and get from queues while the writer puts, until `stop`: a query
    sees every put that returned before it (it catches the index up first)."""
    rng = random.Random(threading.get_ident())
    reads = 0
    while not stop.is_set():
        if not written[0]:
            continue
        n = rng.randrange(written[0])
        try:
            found = store.query(f"T{n % TOPICS}", f"k{n}")
            if [m.body for m in found] != [f"m{n}".encode()]:
                errors.append(f"k{n}: {[m.body for m in found]}")
            store.get(f"T{n % TOPICS}", n // TOPICS % (INDEX_QUEUES // TOPICS), 0, 4)
        except Exception as exc:  # every failure is counted and reported
            errors.append(f"{type(exc).__name__}: {exc}")
        reads += 1
        if reads % 50 == 0:
            most[0] = max(most[0], open_descriptors())


def index_main(path: Path, messages: int, limit: int) -> None:
    """A writer beside READERS reader threads over INDEX_QUEUES queues, with small index files: then a
    close, a reopen under the same limit that queries keys of every index file, and a read-only open."""
    set_limit(limit)
    errors: list[str] = []
    most = [0]
    written = [0]  # puts returned
    store = MessageStore.open(path, INDEX_CONFIG)
    stop = threading.Event()
    readers = [threading.Thread(target=read_beside, args=(store, written, stop, errors, most))
               for _ in range(READERS)]
    for reader in readers:
        reader.start()
    try:
        for n in range(messages):
            store.put(indexed(n))
            written[0] = n + 1
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    most[0] = max(most[0], open_descriptors())
    store.close()
    with MessageStore.open(path, INDEX_CONFIG) as store:
        clean = store.recovery.clean
        files = len(store.index.files)
        damaged = [f.path.name for f in store.index.files if f.find_damage(full=True) is not None]
        missing = [n for n in range(0, messages, 23)
                   if [m.body for m in store.query(f"T{n % TOPICS}", f"k{n}")] != [f"m{n}".encode()]]
        most[0] = max(most[0], open_descriptors())
    with MessageStore.open(path, INDEX_CONFIG, read_only=True) as reader:
        missing += [n for n in range(5, messages, 37)
                    if [m.body for m in reader.query(f"T{n % TOPICS}", f"k{n}")] != [f"m{n}".encode()]]
        most[0] = max(most[0], open_descriptors())
    print(json.dumps({"most_open": most[0], "errors": len(errors), "first_errors": errors[:5], "clean": clean,
                      "index_files": files, "damaged": damaged, "missing": missing}))


if __name__ == "__main__":
    main()
