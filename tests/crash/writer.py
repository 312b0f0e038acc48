"""Writer child of the kill -9 tests: puts workload messages and prints one line per acknowledged put.

    python writer.py STORE MODE FIRST_SEQ COUNT [put|nowait]

`ACK seq phy_offset queue_offset size` is printed (and flushed) only after put() returned PUT_OK (or,
with `nowait`, after the PendingPut of put_nowait did, with up to 32 puts pending), so every line the
parent reads is a promise the store made. The parent kills this process with SIGKILL.
"""

from __future__ import annotations

import sys
from collections import deque
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from workload import crash_config, message_for

from rocketstore import FlushMode, MessageStore, PendingPut, PutResult, PutStatus


def main(argv: list[str]) -> int:
    root, mode, first, count = Path(argv[0]), FlushMode(argv[1]), int(argv[2]), int(argv[3])
    nowait = len(argv) > 4 and argv[4] == "nowait"
    store = MessageStore.open(root, crash_config(mode))
    out = sys.stdout
    out.write("READY\n")
    out.flush()

    def ack(seq: int, result: PutResult) -> None:
        if result.status is PutStatus.PUT_OK:
            out.write(f"ACK {seq} {result.phy_offset} {result.queue_offset} {result.size}\n")
            out.flush()

    pending: deque[tuple[int, PendingPut]] = deque()
    for seq in range(first, first + count):
        if not nowait:
            ack(seq, store.put(message_for(seq)))
            continue
        pending.append((seq, store.put_nowait(message_for(seq))))
        if len(pending) >= 32:
            done, oldest = pending.popleft()
            ack(done, oldest.result())
    for seq, put in pending:
        ack(seq, put.result())
    store.close()
    out.write("DONE\n")
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
