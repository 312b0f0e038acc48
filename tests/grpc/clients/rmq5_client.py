"""Drives the official RocketMQ 5 Python client (PyPI `rocketmq-python-client` 5.1.2) for the gRPC tests.

Runs inside the client's own virtual environment, never imports rocketstore, and prints one JSON object
per line: every send receipt (with its latency, ms) or received message, then a final {"done": ...} line.

    python rmq5_client.py produce --endpoint H:P --topic T --count N [--tag A] [--key-prefix k]
                                  [--message-group G] [--delay-s S] [--prop K=V] [--body-size B]
    python rmq5_client.py consume --endpoint H:P --topic T --group G [--expr E] --expect N --timeout S
                                  [--invisible S] [--ack all|none|odd] [--change-invisible S] [--forward-dlq]
    python rmq5_client.py transact --endpoint H:P --topic T --count N --end commit|rollback|none
                                   [--check-answer commit|rollback] [--linger S]
        (sends N transactional messages, ends each as told, then stays up S seconds answering the
        server's checks with --check-answer: commit, rollback, or alternate: even message numbers commit)
    python rmq5_client.py push --endpoint H:P --topic T --group G --expect N --timeout S [--fail-first]
        (a push consumer; with --fail-first its listener fails each message's first delivery)

Every mode takes --tls: connect with TLS (the client's tls_enable; it trusts the roots of
$GRPC_DEFAULT_SSL_ROOTS_FILE_PATH, else the system's).
"""

import argparse
import json
import sys
import time

from rocketmq.grpc_protocol import TransactionResolution
from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.consumer import ConsumeResult, MessageListener, PushConsumer, SimpleConsumer
from rocketmq.v5.model import FilterExpression, Message
from rocketmq.v5.producer import Producer, TransactionChecker


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def config(args):
    credentials = Credentials(args.ak, args.sk) if args.ak else Credentials()
    return ClientConfiguration(args.endpoint, credentials, request_timeout=5)


def produce(args):
    producer = Producer(config(args), (args.topic,), tls_enable=args.tls)
    producer.startup()
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            body = f"{args.key_prefix}body-{i}"
            msg.body = (body + "x" * max(0, args.body_size - len(body))).encode()
            if args.tag:
                msg.tag = args.tag
            msg.keys = f"{args.key_prefix}{i}"
            for prop in args.prop:
                key, _, value = prop.partition("=")
                msg.add_property(key, value)
            if args.message_group:
                msg.message_group = args.message_group
            due = None
            if args.delay_s is not None:
                # rocketmq-python-client 5.1.2 puts this value into Timestamp.seconds (its docstring says
                # ms): give it seconds
                due = int(time.time()) + args.delay_s
                msg.delivery_timestamp = due
            started = time.monotonic()
            try:
                receipt = producer.send(msg)
                emit({"sent": i, "message_id": receipt.message_id, "offset": receipt.offset,
                      "sent_at": int(time.time() * 1000), "due_s": due,
                      "latency_ms": (time.monotonic() - started) * 1000})
            except Exception as exc:  # the test reads the failure
                emit({"sent": i, "error": str(exc)})
    finally:
        producer.shutdown()
    emit({"done": args.count})


class AnsweringChecker(TransactionChecker):
    """Answers the server's checks: by the body's suffix, else with --check-answer."""

    def __init__(self, default):
        self.default = default

    def check(self, message):
        body = message.body.decode()
        answer = self.default
        if answer == "alternate":  # bodies are <prefix>body-<i>-<end>: even i commit, odd i roll back
            answer = "commit" if int(body.split("-")[-2]) % 2 == 0 else "rollback"
        emit({"checked": message.message_id, "body": body, "topic": message.topic, "answer": answer,
              "at": int(time.time() * 1000)})
        return TransactionResolution.COMMIT if answer == "commit" else TransactionResolution.ROLLBACK


def transact(args):
    producer = Producer(config(args), (args.topic,), AnsweringChecker(args.check_answer), tls_enable=args.tls)
    producer.startup()
    try:
        for i in range(args.count):
            msg = Message()
            msg.topic = args.topic
            msg.body = f"{args.key_prefix}body-{i}-{args.end}".encode()
            msg.tag = args.tag or "TxTag"
            msg.keys = f"{args.key_prefix}{i}"
            transaction = producer.begin_transaction()
            try:
                receipt = producer.send(msg, transaction)
                item = {"sent": i, "message_id": receipt.message_id, "transaction_id": receipt.transaction_id,
                        "body": msg.body.decode()}
                if args.end == "commit":
                    item["ended"] = bool(transaction.commit())
                elif args.end == "rollback":
                    item["ended"] = bool(transaction.rollback())
                emit(item)
            except Exception as exc:  # the test reads the failure
                emit({"sent": i, "error": str(exc)})
        time.sleep(args.linger)
    finally:
        producer.shutdown()
    emit({"done": args.count})


def describe(msg):
    return {"topic": msg.topic, "body": msg.body.decode("utf-8", "replace"), "tag": msg.tag,
            "keys": list(msg.keys or []), "message_id": msg.message_id, "attempt": msg.delivery_attempt,
            "group": msg.message_group, "properties": dict(msg.properties or {}),
            "handle": msg.receipt_handle, "received_at": int(time.time() * 1000)}


def consume(args):
    consumer = SimpleConsumer(config(args), args.group, {args.topic: FilterExpression(args.expr)},
                              await_duration=args.await_s, tls_enable=args.tls)
    consumer.startup()
    got = 0
    deadline = time.time() + args.timeout
    try:
        while got < args.expect and time.time() < deadline:
            for msg in consumer.receive(args.batch, args.invisible):
                got += 1
                item = describe(msg)
                if args.change_invisible is not None:
                    consumer.change_invisible_duration(msg, args.change_invisible)
                    item["changed"] = True
                if args.forward_dlq:
                    consumer._forward_message_to_dead_letter_queue(msg) if hasattr(
                        consumer, "_forward_message_to_dead_letter_queue") else None
                if args.ack == "all" or (args.ack == "odd" and got % 2 == 1):
                    consumer.ack(msg)
                    item["acked"] = True
                emit(item)
    finally:
        consumer.shutdown()
    emit({"done": got})


class RecordingListener(MessageListener):
    """Emits every delivery; with fail_first, fails the first delivery of each message."""

    def __init__(self, fail_first):
        self.fail_first = fail_first
        self.succeeded = set()
        self.seen = set()

    def consume(self, message):
        first = message.message_id not in self.seen
        self.seen.add(message.message_id)
        item = describe(message)
        item["result"] = "failure" if self.fail_first and first else "success"
        if item["result"] == "success":
            self.succeeded.add(message.message_id)
        emit(item)
        return ConsumeResult.FAILURE if item["result"] == "failure" else ConsumeResult.SUCCESS


def push(args):
    listener = RecordingListener(args.fail_first)
    consumer = PushConsumer(config(args), args.group, listener, {args.topic: FilterExpression(args.expr)})
    consumer.startup()
    deadline = time.time() + args.timeout
    try:
        while len(listener.succeeded) < args.expect and time.time() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # let the last acknowledgement go out
    finally:
        consumer.shutdown()
    emit({"done": len(listener.succeeded)})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["produce", "consume", "transact", "push"])
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--ak", default="", help="access key: sign every call (with --sk)")
    parser.add_argument("--sk", default="")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", default="rocketstore_test_group")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--tag", default=None)
    parser.add_argument("--key-prefix", default="k")
    parser.add_argument("--message-group", default=None)
    parser.add_argument("--delay-s", type=int, default=None)
    parser.add_argument("--prop", action="append", default=[])
    parser.add_argument("--body-size", type=int, default=0, help="produce: pad bodies with x to this many bytes")
    parser.add_argument("--expr", default="*")
    parser.add_argument("--expect", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=20)
    parser.add_argument("--await-s", type=int, default=5)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--invisible", type=int, default=15)
    parser.add_argument("--ack", choices=["all", "none", "odd"], default="all")
    parser.add_argument("--change-invisible", type=int, default=None)
    parser.add_argument("--forward-dlq", action="store_true")
    parser.add_argument("--end", choices=["commit", "rollback", "none"], default="commit")
    parser.add_argument("--check-answer", choices=["commit", "rollback", "alternate"], default="commit")
    parser.add_argument("--linger", type=float, default=0)
    parser.add_argument("--fail-first", action="store_true")
    parser.add_argument("--tls", action="store_true", help="connect with TLS")
    args = parser.parse_args()
    {"produce": produce, "consume": consume, "transact": transact, "push": push}[args.mode](args)


if __name__ == "__main__":
    main()
