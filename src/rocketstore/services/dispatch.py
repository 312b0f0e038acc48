"""Dispatch: turn commitlog records into consume-queue entries and index keys (RocketMQ's reput).

Rules (4.9.8): NOT and COMMIT records get a queue entry, PREPARED and ROLLBACK none; everything but
ROLLBACK is indexed under its UNIQ_KEY and every non-empty KEYS token. A record of
SCHEDULE_TOPIC_XXXX carrying DELAY gets its delivery time as tags code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rocketstore.format import properties as props
from rocketstore.format.javahash import tags_code
from rocketstore.format.message import StoredMessage
from rocketstore.format.sysflag import gets_index_entry, gets_queue_entry
from rocketstore.format.topics import SCHEDULE_TOPIC
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.index_service import IndexService


@dataclass(frozen=True, slots=True)
class DispatchRequest:
    """What dispatch needs of one record."""

    topic: str
    queue_id: int
    phy_offset: int
    size: int
    tags_code: int
    store_timestamp: int
    queue_offset: int
    keys: tuple[str, ...]
    uniq_key: str | None
    sys_flag: int

    @property
    def gets_queue_entry(self) -> bool:
        """NOT and COMMIT records get a consume-queue entry."""
        return gets_queue_entry(self.sys_flag)

    @property
    def gets_index_entry(self) -> bool:
        """Every record but ROLLBACK is indexed (under `index_keys`)."""
        return gets_index_entry(self.sys_flag)

    @property
    def index_keys(self) -> tuple[str, ...]:
        """The keys the index holds the record under, in the order the store writes them: UNIQ_KEY, then
        each KEYS token; the empty left out (as `log.index_service.index_keys_of` packs them)."""
        keys = (self.uniq_key, *self.keys) if self.uniq_key else self.keys
        return tuple(k for k in keys if k)


def delivery_tags_code(store_timestamp: int, level: int, delay_millis: list[int]) -> int:
    """Tags code of a delayed record: its delivery time (unknown level: +1 s, as RocketMQ)."""
    level = min(level, len(delay_millis))
    if level <= 0:
        return store_timestamp + 1000
    return store_timestamp + delay_millis[level - 1]


def request_from_message(msg: StoredMessage, delay_millis: list[int]) -> DispatchRequest:
    """Build the dispatch request of a decoded record."""
    properties = msg.properties
    code = tags_code(properties.get(props.TAGS))
    if msg.topic == SCHEDULE_TOPIC and props.DELAY in properties:
        try:
            level = int(properties[props.DELAY])
        except ValueError:
            level = 0
        if level > 0:
            code = delivery_tags_code(msg.store_timestamp, level, delay_millis)
    return DispatchRequest(
        msg.topic, msg.queue_id, msg.phy_offset, msg.size, code, msg.store_timestamp, msg.queue_offset,
        tuple(props.split_keys(properties.get(props.KEYS))), properties.get(props.UNIQ_KEY), msg.sys_flag,
    )


class Dispatcher:
    """Writes dispatch requests into consume queues and the index."""

    def __init__(self, queue_for: Callable[[str, int], ConsumeQueue], index: IndexService,
                 on_queue_entry: Callable[[DispatchRequest], None] | None = None) -> None:
        self._queue_for = queue_for
        self.index = index
        self._on_queue_entry = on_queue_entry

    def dispatch(self, req: DispatchRequest, *, queues: bool = True, index: bool = True) -> tuple[bool, bool]:
        """Apply one request (idempotent: entries already present are left alone).

        Returns:
            whether a queue entry was added, and whether index keys were.

        Raises:
            StoreError: a queue entry would leave a gap.
            OSError: a file could not be created.
        """
        queued = indexed = False
        if queues and req.gets_queue_entry:
            cq = self._queue_for(req.topic, req.queue_id)
            queued = cq.put(req.phy_offset, req.size, req.tags_code, req.queue_offset)
            if queued and self._on_queue_entry:
                self._on_queue_entry(req)
        if index and req.gets_index_entry:
            indexed = self.index.build(req.topic, req.phy_offset, req.store_timestamp, req.keys, req.uniq_key)
        return queued, indexed
