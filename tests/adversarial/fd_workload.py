"""Run under a low descriptor limit: a store of many queues opens, takes puts, reopens and answers.

    python -m tests.adversarial.fd_workload STORE QUEUES LIMIT

Prints one JSON line: the most descriptors seen open, and what was read back.
"""

from __future__ import annotations

import json
import os
import resource
import sys
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


def main() -> None:
    path, queues, limit = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
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


if __name__ == "__main__":
    main()
