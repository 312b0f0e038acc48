"""Transactions over remoting: END_TRANSACTION (37) from the producer, and CHECK_TRANSACTION_STATE (39)
sent back to it over its own connection when a transaction stays open (RocketMQ's EndTransactionProcessor
and AbstractTransactionalMessageCheckListener.sendCheckMessage).

The half message itself arrives as a SEND_MESSAGE carrying TRAN_MSG=true (handlers_send); everything it
becomes is the one mechanism both protocols share, `transactions.TransactionTable`. A remoting producer
names its half message by where it landed, the commitlog offset of the send's offset msgId and the
queue offset of the send's answer (tranStateTableOffset), and by its producer group (PGROUP): the
transaction id of the table is made from the two offsets.

A check goes to one connection of the half message's producer group (the first of its producers that
sent a heartbeat, as RocketMQ's getAvailableChannel), oneway, with the half message encoded in its body
under its own topic and queue. The producer answers with END_TRANSACTION, fromTransactionCheck=true;
an answer of UNKNOWN (commitOrRollback 0) leaves the transaction open for the next check.
"""

from __future__ import annotations

import logging

from rocketstore import Message, PutResult
from rocketstore.broker.context import BrokerContext, RequestError, field_bool, field_int, field_str, store_write
from rocketstore.broker.server import Connection, Handler
from rocketstore.broker.transactions import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_TRANSACTION_PREPARED,
    TransactionError,
    transaction_id,
)
from rocketstore.errors import InvalidMessageError, RocketStoreError, StoreError
from rocketstore.format.hosts import parse_host
from rocketstore.format.message import StoredMessage, encode_message
from rocketstore.format.properties import DELAY, REAL_QID, REAL_TOPIC, UNIQ_KEY, encode_properties
from rocketstore.format.sysflag import TRANSACTION_MASK
from rocketstore.protocol import RemotingCommand, RequestCode, ResponseCode

log = logging.getLogger("rocketstore.transactions")

CHECK_TRANSACTION_STATE = 39  # RequestCode.CHECK_TRANSACTION_STATE, a request the broker sends
PROPERTY_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
# EndTransactionRequestHeader.commitOrRollback: MessageSysFlag's transaction types
NOT_TYPE, COMMIT_TYPE, ROLLBACK_TYPE = 0, 0x8, 0xC


def is_half_message(props: dict[str, str], reconsume_times: int) -> bool:
    """Whether a sent message starts a transaction: TRAN_MSG=true, unless it is a retry of a client older
    than 4.6.1 that resends a consumed half's copy with DELAY (SendMessageProcessor's rule)."""
    if props.get(PROPERTY_TRANSACTION_PREPARED, "").lower() != "true":
        return False
    return not (reconsume_times > 0 and props.get(DELAY, "0").strip("0") != "")


def refuse_transactional_batch(sys_flag: int) -> None:
    """A batch is never a transaction's half message (its TRAN_MSG is not read, as in RocketMQ).

    Raises:
        RequestError: MESSAGE_ILLEGAL when the batch's sys flag has transaction bits (RocketMQ's
            CommitLog.asyncPutMessages refuses it so).
    """
    if sys_flag & TRANSACTION_MASK:
        raise RequestError(ResponseCode.MESSAGE_ILLEGAL, "batch message does not support transaction")


async def start_half(ctx: BrokerContext, message: Message) -> PutResult:
    """Write a sent message as a transaction's half message (`TransactionTable.start`).

    Raises:
        RequestError: a delayed message or one that breaks a rule of the store (MESSAGE_ILLEGAL), too
            many open transactions (SYSTEM_BUSY), or the store cannot write (SERVICE_NOT_AVAILABLE).
    """
    try:
        started = await store_write(ctx.store, ctx.transactions.start, message)
    except TransactionError as exc:
        raise RequestError(ResponseCode.SYSTEM_BUSY, str(exc)) from exc
    except InvalidMessageError as exc:
        raise RequestError(ResponseCode.MESSAGE_ILLEGAL, str(exc)) from exc
    except StoreError as exc:
        raise RequestError(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc)) from exc
    return started.result


def check_body(half: StoredMessage, checks: int) -> bytes:
    """The body of a CHECK_TRANSACTION_STATE: the half message encoded as a record (MessageDecoder.encode)
    under its own topic and queue, at the half message's queue and commitlog offsets, with the number of
    checks so far in TRANSACTION_CHECK_TIMES (where RocketMQ's copy of the half message counts them).

    Raises:
        KeyError: the half message has no REAL_TOPIC or REAL_QID.
        ValueError: its REAL_QID is not a number.
    """
    props = half.properties
    text = encode_properties({**props, PROPERTY_CHECK_TIMES: str(checks)})
    born_ip, born_port = parse_host(half.born_host)
    store_ip, store_port = parse_host(half.store_host)
    return encode_message(
        topic=props[REAL_TOPIC].encode(), body=half.body, properties=text.encode(),
        queue_id=int(props[REAL_QID]), flag=half.flag, queue_offset=half.queue_offset, phy_offset=half.phy_offset,
        sys_flag=half.sys_flag, born_timestamp=half.born_timestamp, born_ip=born_ip, born_port=born_port,
        store_timestamp=half.store_timestamp, store_ip=store_ip, store_port=store_port,
        reconsume_times=half.reconsume_times, prepared_transaction_offset=half.prepared_transaction_offset,
        crc=half.body_crc)


def check_fields(half: StoredMessage) -> dict[str, str]:
    """The CheckTransactionStateRequestHeader of a half message."""
    uniq_key = half.properties.get(UNIQ_KEY, "")
    return {"tranStateTableOffset": str(half.queue_offset), "commitLogOffset": str(half.phy_offset),
            "msgId": uniq_key, "transactionId": uniq_key, "offsetMsgId": half.msg_id}


class TransactionHandlers:
    """END_TRANSACTION, and the checks of open transactions for remoting producers."""

    def __init__(self, ctx: BrokerContext) -> None:
        self.ctx = ctx  # the broker asks `ask_producer` about open transactions (TransactionTable.add_asker)

    def table(self) -> dict[int, Handler]:
        """Request code -> handler."""
        return {RequestCode.END_TRANSACTION: self.end}

    def ask_producer(self, half: StoredMessage, txn_id: str) -> bool:
        """Send CHECK_TRANSACTION_STATE to a producer of the half message's group; False when none of
        that group is connected (the transaction is asked about again at its next check)."""
        group = half.properties.get(PROPERTY_PRODUCER_GROUP, "")
        producers = [p for p in self.ctx.clients.producers_of(group) or [] if not p.conn.closed]
        if not producers:
            return False
        opened = self.ctx.transactions.open.get(half.queue_offset)
        try:
            body = check_body(half, opened.checks if opened is not None else 1)
        except (KeyError, ValueError) as exc:
            log.warning("half message at %d cannot be checked: %s", half.phy_offset, exc)
            return False
        producer = producers[0]
        producer.conn.send_oneway(CHECK_TRANSACTION_STATE, check_fields(half), body)
        log.info("remoting transaction check of %s (topic %s) sent to producer %s of %s", txn_id,
                 half.properties.get(REAL_TOPIC), producer.client_id, group)
        return True

    async def end(self, cmd: RemotingCommand, conn: Connection) -> RemotingCommand | None:
        """END_TRANSACTION: commit or roll back a half message (from its producer, or answering a check)."""
        try:
            self.ctx.refuse_writes()
            group = field_str(cmd, "producerGroup")
            phy_offset = field_int(cmd, "commitLogOffset")
            queue_offset = field_int(cmd, "tranStateTableOffset")
            kind = field_int(cmd, "commitOrRollback")
            from_check = field_bool(cmd, "fromTransactionCheck")
            if kind == NOT_TYPE:  # the producer does not know yet: ask again at the next check
                log.info("transaction at %d left open by producer group %s%s", phy_offset, group,
                         " answering a check" if from_check else "")
                return None
            if kind not in (COMMIT_TYPE, ROLLBACK_TYPE):
                raise RequestError(ResponseCode.SYSTEM_ERROR, f"commitOrRollback {kind} is neither commit (8) "
                                   "nor rollback (12)")
            txn_id = _transaction_id(phy_offset, queue_offset)
            committed = await self._end(txn_id, group, kind == COMMIT_TYPE)
        except RequestError as exc:
            return cmd.response(exc.code, exc.remark)
        if committed is not None:
            self.ctx.stats.record_put(committed.topic, 1, committed.size)
            self.ctx.notify_arrival(committed.topic, committed.queue_id)
        return cmd.response(ResponseCode.SUCCESS)

    async def _end(self, txn_id: str, group: str, commit: bool) -> PutResult | None:
        """`TransactionTable.end` translated to request errors, off the loop when SYNC flushing waits."""
        try:
            return await store_write(self.ctx.store, self.ctx.transactions.end, txn_id, None, None, commit,
                                     producer_group=group)
        except TransactionError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from exc
        except StoreError as exc:
            raise RequestError(ResponseCode.SERVICE_NOT_AVAILABLE, str(exc)) from exc
        except RocketStoreError as exc:
            raise RequestError(ResponseCode.SYSTEM_ERROR, str(exc)) from exc


def _transaction_id(phy_offset: int, queue_offset: int) -> str:
    """The table's id of the half message at these offsets.

    Raises:
        RequestError: an offset outside what a transaction id holds.
    """
    if not (0 <= phy_offset < 1 << 64 and 0 <= queue_offset < 1 << 64):
        raise RequestError(ResponseCode.SYSTEM_ERROR, f"no half message at commitlog offset {phy_offset}, "
                           f"queue offset {queue_offset}")
    return transaction_id(phy_offset, queue_offset)
