"""Which records get their queue entry when a queue is built from the log's oldest record on (a rebuild,
or the catch-up that starts over): the queue offsets of a queue's records follow one another in the
log, and no CRC covers a record's queue id or queue offset, so a damaged field shows as a record out
of its queue's sequence.

* A record whose queue offset follows neither the record kept before it in its queue nor leads to the
  next record of its queue (its queue offset field was damaged) gets no entry: it is reported skipped
  and stays in the log and the index.
* A queue offset for which the log holds no record (a record's queue id was damaged, so it went to
  another queue) becomes a filler entry, which readers pass over as a removed message: the records
  after it keep their offsets, and no offset is given out twice. A hole is filled only where the next
  record of the queue agrees with the offset after it, and up to `MAX_HOLE` offsets wide.

One record of lookahead per queue: a record is decided when the next record of its queue arrives, or
at `finish`.
"""

from __future__ import annotations

from collections.abc import Callable

from rocketstore.errors import StoreError
from rocketstore.log.consume_queue import MAX_QUEUE_OFFSET, ConsumeQueue
from rocketstore.services.dispatch import DispatchRequest

MAX_HOLE = 4096
"""The most queue offsets in a row a hole may fill: more is a damaged offset, not lost records."""


class QueueOrder:
    """Writes the queue entries of records handed in log order, keeping each queue's sequence."""

    def __init__(self, write: Callable[[DispatchRequest], bool], queue_for: Callable[[str, int], ConsumeQueue],
                 skipped: Callable[[DispatchRequest, str], None]) -> None:
        self._write = write
        self._queue_for = queue_for
        self._skipped = skipped
        self._pending: dict[tuple[str, int], DispatchRequest] = {}
        self._last_kept: dict[tuple[str, int], int] = {}

    def add(self, req: DispatchRequest) -> int:
        """Hand in the next record (in log order); how many entries were written now.

        Raises:
            OSError: a queue file could not be created.
        """
        if not req.gets_queue_entry:
            return 0
        key = (req.topic, req.queue_id)
        before = self._pending.get(key)
        self._pending[key] = req
        return 0 if before is None else self._decide(before, req.queue_offset)

    def finish(self) -> int:
        """Decide the records still waiting for a successor; how many entries were written.

        Raises:
            OSError: a queue file could not be created.
        """
        pending, self._pending = self._pending, {}
        return sum(self._decide(req, None) for req in pending.values())

    def _decide(self, req: DispatchRequest, after: int | None) -> int:
        key = (req.topic, req.queue_id)
        q = req.queue_offset
        before = self._last_kept.get(key)
        cq = self._queue_for(*key)
        if before is None:  # the first of its queue here: the next one vouches for it
            fits = after is None or after == q + 1
        else:
            fits = q == before + 1 or (before < q and after == q + 1)
        hole = q - cq.max_offset if cq.max_offset else 0  # a hole only where the next record agrees, and no
        if hole > MAX_HOLE or (hole > 0 and after != q + 1):  # wider than damage to a few records leaves
            fits = False
        if not fits or not 0 <= q <= MAX_QUEUE_OFFSET:
            self._skipped(req, f"{key[0]}/{key[1]} queue offset {q} agrees with neither record beside it in its "
                               "queue (a damaged field)")
            return 0
        self._last_kept[key] = q
        if hole > 0:
            cq.fill_hole(q)
        try:
            return int(self._write(req))
        except StoreError as exc:  # does not fit the entries the queue held before the scan
            self._skipped(req, str(exc))
            return 0
