"""Transactional messages: half messages, their end (commit or rollback) and the check of those left
open, shared by both protocols (RocketMQ's TransactionalMessageService).

On disk everything is what RocketMQ 4.9.8's broker writes, so that a RocketMQ broker opening the store
sees the same transactions ended and open:

* half message: queue 0 of RMQ_SYS_TRANS_HALF_TOPIC, transaction bits of the sys flag cleared, the
  message's own topic and queue in REAL_TOPIC / REAL_QID and TRAN_MSG=true. No consumer reads that topic,
  so an open or rolled-back message is never delivered.
* commit: the message in its own topic and queue, sys flag COMMIT_TYPE, PREPAREDTRANSACTIONOFFSET the half
  message's commitlog offset, the half message's properties (REAL_TOPIC / REAL_QID / TRAN_MSG among them,
  as RocketMQ's record keeps them): consumers get it like any other.
* end (commit, rollback, or given up): a record in queue 0 of RMQ_SYS_TRANS_OP_HALF_TOPIC, tag ``d``,
  body the half message's queue offset in decimal. A half message that was asked about `check_max` times
  without an answer is copied to TRANS_CHECK_MAX_TIME_TOPIC and ended.
* progress: the consumer offsets of group CID_RMQ_SYS_TRANS on both queues: every half message below the
  committed half offset is ended (RocketMQ commits the same offsets).

A transaction id names the half message: its commitlog offset and queue offset, 32 hex digits. Ending
one checks that the record there is that half message, of that topic and message id.

Checks: an open half message older than `timeout_ms` (or its CHECK_IMMUNITY_TIME_IN_SECONDS) is offered
to the protocol adapters' askers (`add_asker`) every `check_interval_ms`, at most `check_max` times.
Where RocketMQ appends a copy of the half message per check, the count is kept in memory: after a restart
a half message gets its full number of checks again.

A commit writes the message, then the end record: a crash between the two leaves the half message open,
and a producer that answers the check with commit again gets the message twice (as in RocketMQ); a
rollback is one record and cannot be half done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from rocketstore import Message, MessageStore, PutResult, PutStatus
from rocketstore.errors import InvalidMessageError, MessageNotFoundError, RocketStoreError
from rocketstore.format.message import StoredMessage
from rocketstore.format.properties import DELAY, REAL_QID, REAL_TOPIC, UNIQ_KEY
from rocketstore.format.sysflag import TRANSACTION_MASK, SysFlag, TransactionType
from rocketstore.format.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_TOPIC

log = logging.getLogger("rocketstore.transactions")

PROPERTY_TRANSACTION_PREPARED = "TRAN_MSG"
PROPERTY_CHECK_IMMUNITY_S = "CHECK_IMMUNITY_TIME_IN_SECONDS"
PROPERTY_PRODUCER_GROUP = "PGROUP"
PROGRESS_GROUP = "CID_RMQ_SYS_TRANS"
END_TAG = "d"  # TransactionalMessageUtil.REMOVETAG
HALF_QUEUE = 0
MAX_OPEN = 100_000
"""Open transactions at once; a half message past it is refused (each costs memory until it ends)."""

_SET_BY_THE_STORE = SysFlag.BORNHOST_V6 | SysFlag.STOREHOST_V6 | TRANSACTION_MASK
_TRANSACTION_ID_DIGITS = 32


class TransactionError(RocketStoreError):
    """A transaction request the broker refuses; `kind` says which RocketMQ code answers it."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "invalid_id", "too_many", "store"


@dataclass(frozen=True)
class TransactionSettings:
    """When open transactions are asked about (RocketMQ's transactionTimeOut, transactionCheckInterval,
    transactionCheckMax)."""

    timeout_ms: int = 6_000
    check_interval_ms: int = 60_000
    check_max: int = 15


@dataclass
class OpenHalf:
    """A half message waiting for its end."""

    queue_offset: int
    phy_offset: int
    topic: str
    next_check_ms: int
    checks: int = 0


@dataclass(frozen=True)
class Started:
    """A half message written: where, and the id that ends it."""

    result: PutResult
    transaction_id: str


Asker = Callable[[StoredMessage, str], bool]
"""(the half message, its transaction id) -> True when a producer was asked about it."""


def transaction_id(phy_offset: int, queue_offset: int) -> str:
    return f"{phy_offset:016X}{queue_offset:016X}"


def parse_transaction_id(text: str) -> tuple[int, int]:
    """(commitlog offset, queue offset) of the half message a transaction id names.

    Raises:
        TransactionError: not a transaction id of this broker.
    """
    if len(text) != _TRANSACTION_ID_DIGITS:
        raise TransactionError("invalid_id", f"transaction id {text!r} is not one this broker gave")
    try:
        return int(text[:16], 16), int(text[16:], 16)
    except ValueError:
        raise TransactionError("invalid_id", f"transaction id {text!r} is not one this broker gave") from None


def half_message(message: Message) -> Message:
    """The record of `message` (its own topic and queue set) while its transaction is open."""
    props = dict(message.properties or {})
    if message.tags is not None:
        props.setdefault("TAGS", message.tags)
    if message.keys:
        props.setdefault("KEYS", " ".join(message.keys))
    props[REAL_TOPIC] = message.topic
    props[REAL_QID] = str(message.queue_id)
    props[PROPERTY_TRANSACTION_PREPARED] = "true"
    return Message(TRANS_HALF_TOPIC, message.body, queue_id=HALF_QUEUE, properties=props, flag=message.flag,
                   sys_flag=message.sys_flag & ~TRANSACTION_MASK, born_timestamp=message.born_timestamp,
                   born_host=message.born_host, reconsume_times=message.reconsume_times)


def committed_message(half: StoredMessage) -> Message:
    """The record a commit writes for a half message (EndTransactionProcessor.endMessageTransaction).

    Its properties are the half message's, REAL_TOPIC, REAL_QID and TRAN_MSG included: RocketMQ writes
    the half message's properties string and removes those three only from what the put reads.
    """
    props = dict(half.properties)
    return Message(half.properties[REAL_TOPIC], half.body, queue_id=int(half.properties[REAL_QID]),
                   properties=props, flag=half.flag,
                   sys_flag=(half.sys_flag & ~_SET_BY_THE_STORE) | TransactionType.COMMIT,
                   born_timestamp=half.born_timestamp, born_host=half.born_host,
                   reconsume_times=half.reconsume_times, prepared_transaction_offset=half.phy_offset)


def _end_record(queue_offset: int) -> Message:
    return Message(TRANS_OP_TOPIC, str(queue_offset).encode("ascii"), queue_id=HALF_QUEUE, tags=END_TAG)


def _immunity_ms(half: StoredMessage, timeout_ms: int) -> int:
    value = half.properties.get(PROPERTY_CHECK_IMMUNITY_S, "")
    return max(timeout_ms, int(value) * 1000) if value.isdigit() else timeout_ms


class TransactionTable:
    """The open transactions of one store, and the writes that start and end them.

    Args:
        store: the broker's store (writable).
        settings: when open transactions are asked about.
    """

    def __init__(self, store: MessageStore, settings: TransactionSettings) -> None:
        self.store = store
        self.settings = settings
        self.open: dict[int, OpenHalf] = {}  # half queue offset -> open half
        self._askers: list[Asker] = []

    def load(self) -> None:
        """Find the open transactions: half messages from the committed progress on, less those with an
        end record."""
        store = self.store
        half_start = store.committed_offset(PROGRESS_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE)
        op_start = store.committed_offset(PROGRESS_GROUP, TRANS_OP_TOPIC, HALF_QUEUE)
        ended: set[int] = set()
        for record in store.iter_queue(TRANS_OP_TOPIC, HALF_QUEUE, op_start):
            if record.body.isdigit():
                ended.add(int(record.body))
        for half in store.iter_queue(TRANS_HALF_TOPIC, HALF_QUEUE, half_start):
            if half.queue_offset not in ended and REAL_TOPIC in half.properties:
                self.open[half.queue_offset] = OpenHalf(
                    half.queue_offset, half.phy_offset, half.properties[REAL_TOPIC],
                    half.store_timestamp + _immunity_ms(half, self.settings.timeout_ms))
        if self.open:
            log.info("%d open transactions in %s", len(self.open), store.path)

    def add_asker(self, asker: Asker) -> Callable[[], None]:
        """Ask `asker` about open transactions that are due; returns the function that stops it."""
        self._askers.append(asker)
        return lambda: self._askers.remove(asker)

    def start(self, message: Message) -> Started:
        """Write `message` as a half message (its topic and queue id set).

        Raises:
            TransactionError: MAX_OPEN transactions are open.
            InvalidMessageError: the message is delayed too, or breaks a rule of the store (nothing was
                written).
            StoreError: the store cannot write.
        """
        if DELAY in (message.properties or {}):
            raise InvalidMessageError("a transactional message cannot be delayed as well", PutStatus.MESSAGE_ILLEGAL)
        if len(self.open) >= MAX_OPEN:
            raise TransactionError("too_many", f"{MAX_OPEN} transactions are open; end some first")
        result = self.store.put_broker_records([half_message(message)])[0]
        due = result.store_timestamp + self.settings.timeout_ms
        self.open[result.queue_offset] = OpenHalf(result.queue_offset, result.phy_offset, message.topic, due)
        return Started(result, transaction_id(result.phy_offset, result.queue_offset))

    def end(self, txn_id: str, topic: str | None, message_id: str | None, commit: bool, *,
            producer_group: str | None = None) -> PutResult | None:
        """Commit (write the message to its topic) or roll back the transaction `txn_id`.

        Ending a transaction that already ended writes nothing (a retried request). Returns the
        committed message's result, None for a rollback or an already ended transaction.

        Args:
            txn_id: the half message's id (`transaction_id`).
            topic: the message's own topic (gRPC names it), None to take the half message's.
            message_id: the client's message id (UNIQ_KEY), None not to check it.
            commit: True to commit, False to roll back.
            producer_group: the group that sent the half message (remoting names it, as PGROUP), None
                not to check it.

        Raises:
            TransactionError: `txn_id` names no half message (of `topic`, `message_id` and
                `producer_group`, when given).
            StoreError: the store cannot write.
        """
        phy_offset, queue_offset = parse_transaction_id(txn_id)
        half = self._half_at(phy_offset, queue_offset, topic, message_id, txn_id)
        if producer_group is not None and half.properties.get(PROPERTY_PRODUCER_GROUP) != producer_group:
            raise TransactionError("invalid_id", f"transaction {txn_id} is not one of producer group {producer_group}")
        if queue_offset not in self.open:
            return None
        committed = self.store.put_batch([committed_message(half)])[0] if commit else None
        self._ended(queue_offset)
        return committed

    def _half_at(self, phy_offset: int, queue_offset: int, topic: str | None, message_id: str | None,
                 txn_id: str) -> StoredMessage:
        try:
            half = self.store.message_at(phy_offset)
        except (MessageNotFoundError, RocketStoreError):
            raise TransactionError("invalid_id", f"transaction {txn_id} names no half message") from None
        props = half.properties
        if half.topic != TRANS_HALF_TOPIC or half.queue_offset != queue_offset or REAL_TOPIC not in props:
            raise TransactionError("invalid_id", f"transaction {txn_id} names no half message")
        if topic is not None and props[REAL_TOPIC] != topic:
            raise TransactionError("invalid_id", f"transaction {txn_id} is not a transaction of topic {topic}")
        if message_id is not None and props.get(UNIQ_KEY) != message_id:
            raise TransactionError("invalid_id", f"transaction {txn_id} is not the one of message {message_id}")
        return half

    def _ended(self, queue_offset: int) -> None:
        self.store.put_broker_records([_end_record(queue_offset)])
        self.open.pop(queue_offset, None)
        store = self.store
        progress = min(self.open) if self.open else store.max_offset(TRANS_HALF_TOPIC, HALF_QUEUE)
        store.commit_offset(PROGRESS_GROUP, TRANS_HALF_TOPIC, HALF_QUEUE, progress)
        if not self.open:  # every end record so far is about a half message below the progress
            store.commit_offset(PROGRESS_GROUP, TRANS_OP_TOPIC, HALF_QUEUE,
                                store.max_offset(TRANS_OP_TOPIC, HALF_QUEUE))

    def check(self, now_ms: int) -> int:
        """Ask about the open transactions that are due, give up those asked `check_max` times.
        Returns how many were asked."""
        asked = 0
        due = [h for h in list(self.open.values()) if h.next_check_ms <= now_ms]  # a snapshot: with SYNC
        for half in sorted(due, key=lambda h: h.queue_offset):                    # flush, ends run in threads
            if half.checks >= self.settings.check_max:
                self._give_up(half)
                continue
            half.checks += 1
            half.next_check_ms = now_ms + self.settings.check_interval_ms
            try:
                record = self.store.message_at(half.phy_offset)
            except RocketStoreError:  # gone with retention: nothing left to end
                log.warning("half message at %d is gone; its transaction ends", half.phy_offset)
                self._ended(half.queue_offset)
                continue
            txn_id = transaction_id(half.phy_offset, half.queue_offset)
            if any(ask(record, txn_id) for ask in list(self._askers)):
                asked += 1
        return asked

    def _give_up(self, half: OpenHalf) -> None:
        log.warning("transaction of the message at %d (topic %s) unresolved after %d checks: moved to %s",
                    half.phy_offset, half.topic, half.checks, TRANS_CHECK_MAX_TIME_TOPIC)
        try:
            record = self.store.message_at(half.phy_offset)
            copy = half_message_copy(record)
            self.store.put_broker_records([copy])
        except RocketStoreError:
            log.warning("half message at %d is gone", half.phy_offset)
        self._ended(half.queue_offset)


def half_message_copy(half: StoredMessage) -> Message:
    """A half message as kept in TRANS_CHECK_MAX_TIME_TOPIC once given up."""
    return Message(TRANS_CHECK_MAX_TIME_TOPIC, half.body, queue_id=0, properties=dict(half.properties),
                   flag=half.flag, sys_flag=half.sys_flag & ~_SET_BY_THE_STORE, born_timestamp=half.born_timestamp,
                   born_host=half.born_host, reconsume_times=half.reconsume_times)
