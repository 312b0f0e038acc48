"""Delayed delivery (RocketMQ's ScheduleMessageService): moves due messages from SCHEDULE_TOPIC_XXXX
back to their real topic and queue.

`put()` parks a message carrying DELAY = level L in queue L-1 of SCHEDULE_TOPIC_XXXX, its consume-queue
tags code being its delivery time (store time + the level's delay). Each pass walks every level's queue
from its progress offset and, for each entry that is due, puts a copy to REAL_TOPIC / REAL_QID with the
parked record's properties (DELAY and WAIT kept, as in RocketMQ's records; the copy is not parked again
and does not wait for the disk), stopping at the first entry not yet due (entries of one level are
due in order). Progress, level -> next queue offset, is kept in `config/delayOffset.json` in RocketMQ's
shape and written after each pass that moved it and at close. Delivery is at least once: a crash between
a delivery and the next progress write delivers those messages again, as in RocketMQ.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from rocketstore._types import Clock
from rocketstore.errors import InvalidMessageError, MessageNotFoundError, StoreReadOnlyError
from rocketstore.format import properties as props
from rocketstore.format.message import StoredMessage
from rocketstore.format.store_dirs import CONFIG_DIR
from rocketstore.format.topics import refuses_sends
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.json_config import JAVA_INT_MAX, StateFileProblem, java_int, load_state, write_json
from rocketstore.services.service import Service

DELAY_OFFSET_FILE = "delayOffset.json"
SCHEDULE_INTERVAL_MS = 100  # RocketMQ re-checks a level 100 ms after finding nothing due
_BATCH = 256

log = logging.getLogger("rocketstore.schedule")


def delivery_target(parked: StoredMessage) -> tuple[str, int, dict[str, str]]:
    """Where a parked record goes and with which properties: REAL_TOPIC / REAL_QID, and every property
    of the parked record, DELAY and WAIT among them (RocketMQ's messageTimeup writes the parked record's
    properties string; its later removal of DELAY and WAIT=false touch only what the put reads, so the
    copy is not parked again and nothing waits for the disk: `deliver` does the same).

    Raises:
        ValueError: the record has no REAL_TOPIC, names a system topic there, or has a REAL_QID that is
            not a number.
    """
    properties = dict(parked.properties)
    topic = properties.get(props.REAL_TOPIC)
    if not topic:
        raise ValueError(f"record at {parked.phy_offset} has no {props.REAL_TOPIC}")
    if refuses_sends(topic):  # delivering it would park it again, forever
        raise ValueError(f"record at {parked.phy_offset} names the system topic {topic!r} as its {props.REAL_TOPIC}")
    queue_id = int(properties.get(props.REAL_QID) or 0)
    return topic, queue_id, properties


Deliver = Callable[[StoredMessage, str, int, dict[str, str]], None]


class _Paused(Exception):
    """The store refused a delivery; carries what the level delivered before it."""

    def __init__(self, delivered: int) -> None:
        super().__init__(delivered)
        self.delivered = delivered


class ScheduleService(Service):
    """Delivers due delayed messages; `run_once(now_ms)` is one pass over every level.

    Args:
        root: the store root (progress goes to `config/delayOffset.json`).
        delay_millis: delay of each level in ms (index 0 = level 1).
        queue_for: the consume queue of SCHEDULE_TOPIC_XXXX queue `queue_id`, None when it has none.
        read: the record at a physical offset (raises MessageNotFoundError when it is gone).
        deliver: stores a copy of the parked record under (topic, queue id, properties); raises
            InvalidMessageError when the copy is refused.
        clock: epoch-ms clock used when `run_once` is given no time.
    """

    name = "schedule"

    def __init__(self, root: Path, delay_millis: list[int], *,
                 queue_for: Callable[[int], ConsumeQueue | None], read: Callable[[int], StoredMessage],
                 deliver: Deliver, clock: Clock,
                 interval_ms: int = SCHEDULE_INTERVAL_MS) -> None:
        super().__init__(interval_ms)
        self.path = root / CONFIG_DIR / DELAY_OFFSET_FILE
        self.delay_millis = delay_millis
        self._queue_for = queue_for
        self._read = read
        self._deliver_copy = deliver
        self.clock = clock
        self.offsets: dict[int, int] = {}
        self._dirty = False
        self._pass_lock = threading.RLock()  # a pass on demand and the background pass never overlap

    def load(self, *, quarantine: Path | None = None) -> StateFileProblem | None:
        """Read the progress of every level (`json_config.load_state`: a damaged file is replaced by its
        .bak, or all levels start at 0, delivering again what was delivered: at least once).

        Returns:
            what was wrong with the file, None when nothing was.

        Raises:
            OSError: a damaged file could not be quarantined.
        """
        root = self.path.parent.parent
        self.offsets, problem = load_state(root, self.path, _parse_progress, dict, quarantine=quarantine)
        return problem

    def persist(self) -> None:
        """Write the progress when it moved since the last write.

        Raises:
            OSError: the file could not be written (the previous one stays).
        """
        with self._pass_lock:
            if not self._dirty:
                return
            write_json(self.path, {"offsetTable": dict(sorted(self.offsets.items()))})
            self._dirty = False

    def run_once(self, now_ms: int | None = None) -> int:  # type: ignore[override]
        """Deliver every message due at `now_ms` (default: the clock) and persist the progress.

        A store that turned read-only (a full disk, say) pauses delivery: the pass stops at the refused
        message, keeps the progress before it, and a later pass takes it up again.

        Returns:
            how many messages were delivered.

        Raises:
            OSError: the progress could not be written.
        """
        now = self.clock() if now_ms is None else now_ms
        delivered = 0
        with self._pass_lock:
            try:
                for level in range(1, len(self.delay_millis) + 1):
                    delivered += self._deliver_level(level, now)
            except _Paused as paused:
                delivered += paused.delivered
            finally:
                self.persist()
        return delivered

    def _deliver_level(self, level: int, now: int) -> int:
        cq = self._queue_for(level - 1)
        if cq is None:
            return 0
        offset = max(self.offsets.get(level, 0), cq.min_offset)
        if offset != self.offsets.get(level, 0):
            self.offsets[level] = offset  # messages below the queue's min offset were deleted
            self._dirty = True
        delivered = 0
        while offset < cq.max_offset:
            units = cq.units(offset, min(cq.max_offset, offset + _BATCH))
            if not units:
                break
            for unit in units:
                if unit.valid and not unit.filler:
                    if self._due_time(unit.tags_code, level, now) > now:
                        return delivered
                    try:
                        delivered += self._deliver(unit.phy_offset)
                    except StoreReadOnlyError:
                        raise _Paused(delivered) from None
                offset += 1
                self.offsets[level] = offset
                self._dirty = True
        return delivered

    def _due_time(self, deliver_ms: int, level: int, now: int) -> int:
        """RocketMQ's correctDeliverTimestamp: a delivery time further away than the level's delay
        (the clock went back) is due now."""
        delay = self.delay_millis[level - 1]
        return now if deliver_ms > now + delay else deliver_ms

    def _deliver(self, phy_offset: int) -> int:
        try:
            parked = self._read(phy_offset)
            topic, queue_id, properties = delivery_target(parked)
        except (MessageNotFoundError, ValueError) as exc:
            log.warning("delayed record at %d skipped: %s", phy_offset, exc)
            return 0
        try:
            self._deliver_copy(parked, topic, queue_id, properties)
        except InvalidMessageError as exc:
            log.warning("delayed record at %d cannot be delivered: %s", phy_offset, exc)
            return 0
        return 1


def _parse_progress(data: dict[str, object]) -> dict[int, int]:
    """Level -> next queue offset, from delayOffset.json's content.

    Raises:
        ValueError: a level or offset that is not an integer Java reads.
    """
    table = data.get("offsetTable") or {}
    if not isinstance(table, dict):
        raise ValueError(f"offsetTable is a {type(table).__name__}, not an object")
    return {java_int(k, f"delay level {k!r}", JAVA_INT_MAX): java_int(v, f"offset of delay level {k}")
            for k, v in table.items()}
