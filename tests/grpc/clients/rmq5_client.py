"""Drives the official RocketMQ 5 Python client (PyPI `rocketmq-python-client` 5.1.2) for the gRPC tests.

Runs inside the client's own virtual environment, never imports rocketstore, and prints one JSON object
per line: every send receipt (with its latency, ms) or received message, then a final {"done": ...} line.

    python rmq5_client.py produce --endpoint H:P --topic T --count N [--tag A] [--key-prefix k]
                                  [--message-group G] [--delay-s S] [--prop K=V] [--body-size B]
    python rmq5_client.py consume --endpoint H:P --topic T --group G [--expr E] --expect N --timeout S
                                  [--invisible S] [--ack all|none|odd] [--change-invisible S] [--forward-dlq]
"""

import argparse
import json
import sys
import time

from rocketmq.v5.client import ClientConfiguration, Credentials
from rocketmq.v5.consumer import SimpleConsumer
from rocketmq.v5.model import FilterExpression, Message
from rocketmq.v5.producer import Producer


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def config(args):
    credentials = Credentials(args.ak, args.sk) if args.ak else Credentials()
    return ClientConfiguration(args.endpoint, credentials, request_timeout=5)


def produce(args):
    producer = Producer(config(args), (args.topic,))
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


def describe(msg):
    return {"topic": msg.topic, "body": msg.body.decode("utf-8", "replace"), "tag": msg.tag,
            "keys": list(msg.keys or []), "message_id": msg.message_id, "attempt": msg.delivery_attempt,
            "group": msg.message_group, "properties": dict(msg.properties or {}),
            "handle": msg.receipt_handle, "received_at": int(time.time() * 1000)}


def consume(args):
    consumer = SimpleConsumer(config(args), args.group, {args.topic: FilterExpression(args.expr)},
                              await_duration=args.await_s)
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["produce", "consume"])
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
    args = parser.parse_args()
    {"produce": produce, "consume": consume}[args.mode](args)


if __name__ == "__main__":
    main()
