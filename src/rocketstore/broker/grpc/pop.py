"""Receive, acknowledge, change invisible time, dead-letter: RocketMQ 5's pop consumption over the store's
queues, with the durable state of `consumer_state`.

Rules (as RocketMQ 5's broker pops):

* A group with no state in a queue starts at its committed consumer offset, else at the queue's first
  message.
* A received message is invisible to the group for the requested time; acknowledged it is done, else it
  is delivered again when that time has passed, with its delivery attempt raised by one. When an attempt
  would pass the group's maximum, the message is copied to ``%DLQ%<group>`` instead and done.
* A message whose filter does not match is done at once (never delivered to that group).
* A message with a delivery time (TIMER_DELIVER_MS) waits until then.
* FIFO: a message with a message group is not delivered while an earlier message of the same group in
  the same queue is not done.
* Receipt handles name the queue, offset and a random token of one delivery: a handle of an earlier
  delivery, of another group, forged, or of a message whose invisible time has passed is refused with
  INVALID_RECEIPT_HANDLE.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from rocketstore import Message, MessageStore
from rocketstore.broker.context import ConsumerOffsets
from rocketstore.broker.grpc.consumer_state import ConsumerStateTable, Inflight, Key, QueueState
from rocketstore.broker.grpc.convert import (
    PROPERTY_DLQ_ORIGIN_MESSAGE_ID,
    PROPERTY_DLQ_ORIGIN_TOPIC,
    PROPERTY_TIMER_DELIVER_MS,
    GrpcStatusError,
    due_ms,
    message_group,
)
from rocketstore.broker.grpc.logs import short
from rocketstore.broker.grpc.protos import pb
from rocketstore.format.layout import JAVA_INT_MAX, JAVA_LONG_MAX
from rocketstore.format.message import StoredMessage
from rocketstore.format.properties import DELAY, REAL_QID, REAL_TOPIC
from rocketstore.format.topics import DLQ_PREFIX

log = logging.getLogger("rocketstore.broker.grpc")

HANDLE_PREFIX = "rs1"
TOKEN_BYTES = 8  # a delivery's token: 16 lowercase hex digits
# rs1.<queue id>.<queue offset>.<token>: ASCII digits only (str.isdigit also takes "²" and other digits
# int() refuses), at most as many as Java's int and long hold.
_HANDLE = re.compile(r"rs1\.(0|[1-9][0-9]{0,9})\.(0|[1-9][0-9]{0,18})\.([0-9a-f]{16})", re.ASCII)
_HANDLE_MAX_CHARS = 3 + 1 + 10 + 1 + 19 + 1 + 2 * TOKEN_BYTES


@dataclass(frozen=True)
class Delivery:
    """A message handed to a consumer."""

    message: StoredMessage
    receipt_handle: str
    attempt: int
    invisible_ms: int


@dataclass(frozen=True)
class Handle:
    """A parsed receipt handle."""

    queue_id: int
    queue_offset: int
    token: str

    def encode(self) -> str:
        return f"{HANDLE_PREFIX}.{self.queue_id}.{self.queue_offset}.{self.token}"

    @classmethod
    def parse(cls, text: object) -> Handle:
        """The handle `text` names: a queue id within Java's int, a queue offset within Java's long and
        the token of one delivery, each of ASCII characters and bounded length.

        Raises:
            GrpcStatusError: INVALID_RECEIPT_HANDLE for anything else (any string, of any length or
                characters, and any non-string), never another error.
        """
        match = _HANDLE.fullmatch(text) if isinstance(text, str) and len(text) <= _HANDLE_MAX_CHARS else None
        if match is None:
            raise GrpcStatusError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is malformed")
        queue_id, queue_offset = int(match[1]), int(match[2])
        if queue_id > JAVA_INT_MAX or queue_offset > JAVA_LONG_MAX:
            raise GrpcStatusError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is malformed")
        return cls(queue_id, queue_offset, match[3])


def tag_filter(expression: str) -> frozenset[str] | None:
    """Tags of a TAG expression ("A || B"); None for every message ("" or "*").

    Raises:
        GrpcStatusError: ILLEGAL_FILTER_EXPRESSION for an expression with an empty tag.
    """
    text = expression.strip()
    if text in ("", "*"):
        return None
    tags = [t.strip() for t in text.split("||")]
    if not all(tags):
        raise GrpcStatusError(pb.Code.ILLEGAL_FILTER_EXPRESSION, f"tag expression {expression!r} is not valid")
    return frozenset(tags)


class PopService:
    """Pop consumption over `store`, state in `table` (saved after every change, or with `autosave`
    False counted for the caller's `StateSaver`).

    Args:
        store: the open store.
        table: the loaded consumer state.
        max_attempts: deliveries of a message before it goes to the DLQ.
        on_put: called with (topic, queue id) after a DLQ copy is stored.
        ensure_dlq: called with the DLQ topic before a copy is stored (topic table).
        autosave: save the table at each change (False: the caller saves before answering).
        offsets: where group offsets are committed (default: the store's; the broker's `ConsumerOffsets`
            keeps them in memory over a read-only store).

    Over a read-only store nothing is written: a message past its attempts is delivered again instead of
    copied to the DLQ, and `forward_to_dlq` is refused.
    """

    def __init__(self, store: MessageStore, table: ConsumerStateTable, max_attempts: int,
                 on_put: Callable[[str, int], None], ensure_dlq: Callable[[str], None], *,
                 autosave: bool = True, offsets: ConsumerOffsets | None = None) -> None:
        self.store = store
        self.offsets = offsets if offsets is not None else ConsumerOffsets(store)
        self.table = table
        self.autosave = autosave  # False: changes are only counted, the caller saves (StateSaver)
        self.max_attempts = max_attempts
        self.on_put = on_put
        self.ensure_dlq = ensure_dlq

    def _changed(self) -> None:
        if self.autosave:
            self.table.save()
        else:
            self.table.mark_changed()

    def _queue(self, group: str, topic: str, queue_id: int) -> QueueState:
        key: Key = (group, topic, queue_id)
        state = self.table.get(key)
        if state is None:
            low = self.store.min_offset(topic, queue_id)
            committed = self.offsets.get(group, topic, queue_id)
            start = max(committed, low) if committed is not None else low
            state = QueueState(start, start)
            self.table.put(key, state)
        return state

    def _read(self, topic: str, queue_id: int, queue_offset: int) -> StoredMessage | None:
        return next(iter(self.store.iter_queue(topic, queue_id, queue_offset, queue_offset + 1)), None)

    def receive(self, group: str, topic: str, queue_ids: list[int], tags: frozenset[str] | None, batch: int,
                invisible_ms: int, now_ms: int) -> list[Delivery]:
        """Up to `batch` messages of `topic` for `group`, made invisible for `invisible_ms`."""
        out: list[Delivery] = []
        changed = False
        for queue_id in queue_ids:
            if len(out) >= batch:
                break
            state = self._queue(group, topic, queue_id)
            changed |= self._receive_queue(group, topic, queue_id, state, tags, batch - len(out), invisible_ms,
                                           now_ms, out)
            self._commit(group, topic, queue_id, state)
        if changed or out:
            self._changed()
        return out

    def _receive_queue(self, group: str, topic: str, queue_id: int, state: QueueState,
                       tags: frozenset[str] | None, room: int, invisible_ms: int, now_ms: int,
                       out: list[Delivery]) -> bool:
        changed = False
        busy: set[str] = set()  # message groups with an earlier message not done
        taken = 0
        for queue_offset in sorted(state.inflight):
            entry = state.inflight[queue_offset]
            blocked = entry.message_group is not None and entry.message_group in busy
            if entry.message_group is not None:
                busy.add(entry.message_group)
            if blocked or entry.visible_at_ms > now_ms or taken >= room:
                continue
            message = self._read(topic, queue_id, queue_offset)
            if message is None:  # its file was deleted
                state.finish(queue_offset)
                changed = True
                continue
            if entry.handle is not None and entry.attempt >= self.max_attempts and not self.store.read_only:
                self._dead_letter(group, message, entry.attempt)
                state.finish(queue_offset)
                if entry.message_group is not None:
                    busy.discard(entry.message_group)
                changed = True
                continue
            out.append(self._deliver(entry, message, invisible_ms, now_ms))
            taken += 1
            changed = True
        high = self.store.max_offset(topic, queue_id)
        while state.cursor < high and taken < room:
            scanned = 0
            for message in self.store.iter_queue(topic, queue_id, state.cursor, min(high, state.cursor + 64)):
                if taken >= room:
                    break
                queue_offset = message.queue_offset
                state.cursor = queue_offset + 1
                scanned += 1
                changed = True
                if tags is not None and message.tags not in tags:
                    state.finish(queue_offset)
                    continue
                group_name = message_group(message)
                entry = Inflight(max(due_ms(message), 0), 0, None, group_name)
                state.inflight[queue_offset] = entry
                blocked = group_name is not None and group_name in busy
                if group_name is not None:
                    busy.add(group_name)
                if blocked or entry.visible_at_ms > now_ms:
                    continue
                out.append(self._deliver(entry, message, invisible_ms, now_ms))
                taken += 1
            if not scanned:  # nothing readable left below the queue's end
                break
        return changed

    def _deliver(self, entry: Inflight, message: StoredMessage, invisible_ms: int, now_ms: int) -> Delivery:
        entry.attempt += 1
        entry.visible_at_ms = now_ms + invisible_ms
        entry.handle = secrets.token_hex(TOKEN_BYTES)
        handle = Handle(message.queue_id, message.queue_offset, entry.handle).encode()
        return Delivery(message, handle, entry.attempt, invisible_ms)

    def _commit(self, group: str, topic: str, queue_id: int, state: QueueState) -> None:
        if self.offsets.get(group, topic, queue_id) != state.offset:
            self.offsets.commit(group, topic, queue_id, state.offset)

    def _find(self, group: str, topic: str, receipt_handle: str, now_ms: int) -> tuple[Handle, QueueState, Inflight]:
        handle = Handle.parse(receipt_handle)
        state = self.table.get((group, topic, handle.queue_id))
        entry = state.inflight.get(handle.queue_offset) if state is not None else None
        if state is None or entry is None or entry.handle != handle.token:
            raise GrpcStatusError(pb.Code.INVALID_RECEIPT_HANDLE,
                                  "receipt handle is not the current one of a message in flight for this group")
        if entry.visible_at_ms <= now_ms:
            raise GrpcStatusError(pb.Code.INVALID_RECEIPT_HANDLE, "receipt handle is expired")
        return handle, state, entry

    def ack(self, group: str, topic: str, receipt_handle: str, now_ms: int) -> None:
        """Finish the message of a current receipt handle.

        Raises:
            GrpcStatusError: INVALID_RECEIPT_HANDLE.
        """
        handle, state, _entry = self._find(group, topic, receipt_handle, now_ms)
        state.finish(handle.queue_offset)
        self._commit(group, topic, handle.queue_id, state)
        self._changed()

    def change_invisible(self, group: str, topic: str, receipt_handle: str, invisible_ms: int, now_ms: int) -> str:
        """Make the message of a current receipt handle invisible for `invisible_ms` from now; returns its
        new receipt handle (the old one is no longer valid).

        Raises:
            GrpcStatusError: INVALID_RECEIPT_HANDLE.
        """
        handle, state, entry = self._find(group, topic, receipt_handle, now_ms)
        entry.visible_at_ms = now_ms + invisible_ms
        entry.handle = secrets.token_hex(TOKEN_BYTES)
        self._changed()
        return Handle(handle.queue_id, handle.queue_offset, entry.handle).encode()

    def forward_to_dlq(self, group: str, topic: str, receipt_handle: str, now_ms: int) -> None:
        """Copy the message of a current receipt handle to ``%DLQ%<group>`` and finish it.

        Raises:
            GrpcStatusError: INVALID_RECEIPT_HANDLE; FORBIDDEN over a read-only store; MESSAGE_NOT_FOUND
                when its record is gone.
        """
        handle, state, entry = self._find(group, topic, receipt_handle, now_ms)
        if self.store.read_only:
            raise GrpcStatusError(pb.Code.FORBIDDEN, "the broker serves a read-only store: nothing is moved to the DLQ")
        message = self._read(topic, handle.queue_id, handle.queue_offset)
        if message is None:
            raise GrpcStatusError(pb.Code.MESSAGE_NOT_FOUND, "the message is no longer in the store")
        self._dead_letter(group, message, entry.attempt)
        state.finish(handle.queue_offset)
        self._commit(group, topic, handle.queue_id, state)
        self._changed()

    def _dead_letter(self, group: str, message: StoredMessage, attempts: int) -> None:
        topic = DLQ_PREFIX + group
        self.ensure_dlq(topic)
        props = {k: v for k, v in message.properties.items()
                 if k not in (DELAY, REAL_TOPIC, REAL_QID, PROPERTY_TIMER_DELIVER_MS)}
        props[PROPERTY_DLQ_ORIGIN_TOPIC] = message.topic
        props[PROPERTY_DLQ_ORIGIN_MESSAGE_ID] = message.uniq_key or message.msg_id
        props.setdefault("ORIGIN_MESSAGE_ID", message.msg_id)
        props.setdefault("RETRY_TOPIC", message.topic)
        props["WAIT"] = "false"
        result = self.store.put(Message(topic, message.body, queue_id=0, properties=props, flag=message.flag,
                                        born_timestamp=message.born_timestamp, born_host=message.born_host,
                                        sys_flag=message.sys_flag, reconsume_times=max(attempts - 1, 0)))
        self.on_put(result.topic, result.queue_id)
        log.info("gRPC message %s of topic %s moved to %s after %d deliveries",
                 short(message.uniq_key or message.msg_id), short(message.topic), short(topic), attempts)
