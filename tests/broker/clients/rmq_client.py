"""Drives the real RocketMQ C++ client (PyPI `rocketmq` 0.4.4) for the broker tests.

Runs inside the client's own virtual environment, never imports rocketstore, and prints one JSON
object per line: every send result (with its latency and wall-clock end, ms) or received message (push:
with the wall-clock ms it arrived), then a final {"done": ...} line.

    python rmq_client.py produce --namesrv H:P --topic T --count N [--tags A,B] [--key-prefix k] [--ak AK --sk SK]
    python rmq_client.py push --namesrv H:P --topic T --group G [--expr E] --expect N --timeout S [--fail-first]
                              [--orderly]
    python rmq_client.py pull --namesrv H:P --topic T --group G [--expr E]
"""

import argparse
import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def describe(msg):
    return {"topic": text(msg.topic), "tags": text(msg.tags), "keys": text(msg.keys), "body": text(msg.body),
            "queue_id": msg.queue_id, "queue_offset": msg.queue_offset, "reconsume_times": msg.reconsume_times,
            "id": text(msg.id), "retry_topic": text(msg.get_property("RETRY_TOPIC"))}


def credentials(client, args):
    if args.ak is not None:
        client.set_session_credentials(args.ak, args.sk, "ALIYUN")


def produce_batch(args, producer, tags):
    messages = []
    for i in range(args.count):
        msg = Message(args.topic)
        msg.set_keys(f"{args.key_prefix}{i}")
        msg.set_tags(tags[i % len(tags)])
        msg.set_body(f"{args.key_prefix}-body-{i}".encode())
        messages.append(msg)
    result = producer.send_batch(messages)
    emit({"batch": args.count, "status": int(result.status), "offset": result.offset})


def produce(args):
    producer = Producer(args.group or "rocketstore_test_producer", timeout=args.send_timeout_ms)
    producer.set_namesrv_addr(args.namesrv)
    credentials(producer, args)
    producer.start()
    tags = args.tags.split(",")
    if args.batch:
        produce_batch(args, producer, tags)
        producer.shutdown()
        emit({"done": "produce", "failures": 0})
        return
    failures = 0
    for i in range(args.count):
        msg = Message(args.topic)
        key = f"{args.key_prefix}{i}"
        body = f"{args.key_prefix}-body-{i}"
        body += "x" * max(0, args.body_size - len(body))
        msg.set_keys(key)
        msg.set_tags(tags[i % len(tags)])
        msg.set_body(body.encode())
        started = time.monotonic()
        try:
            result = producer.send_sync(msg)
        except Exception as exc:  # the client raises on any broker refusal
            failures += 1
            emit({"key": key, "error": type(exc).__name__, "detail": str(exc)[:300]})
            continue
        emit({"key": key, "body": body, "tag": tags[i % len(tags)], "status": int(result.status),
              "msg_id": result.msg_id, "offset": result.offset,
              "latency_ms": (time.monotonic() - started) * 1000, "sent_at": int(time.time() * 1000)})
    producer.shutdown()
    emit({"done": "produce", "failures": failures})


def push(args):
    consumer = PushConsumer(args.group, orderly=args.orderly)
    consumer.set_namesrv_addr(args.namesrv)
    credentials(consumer, args)
    lock = threading.Lock()
    ready = set()
    finished = threading.Event()

    def on_message(msg):
        info = describe(msg)
        info["received_at"] = int(time.time() * 1000)
        emit(info)
        if args.fail_first and msg.reconsume_times == 0:
            raise RuntimeError("failing on purpose to get the message again")
        with lock:
            ready.add(info["body"])
            if len(ready) >= args.expect:
                finished.set()

    consumer.subscribe(args.topic, on_message, args.expr)
    consumer.start()
    emit({"started": args.group})
    deadline = time.monotonic() + args.timeout
    while not finished.is_set() and time.monotonic() < deadline:
        if args.stop_file and os.path.exists(args.stop_file):
            break
        finished.wait(0.2)
    time.sleep(args.linger)  # catch duplicates that would arrive after the last expected message
    consumer.shutdown()
    emit({"done": "push", "distinct": len(ready)})


def pull(args):
    consumer = PullConsumer(args.group)
    consumer.set_namesrv_addr(args.namesrv)
    credentials(consumer, args)
    consumer.start()
    count = 0
    for msg in consumer.pull(args.topic, args.expr):
        emit(describe(msg))
        count += 1
    consumer.shutdown()
    emit({"done": "pull", "count": count})


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["produce", "push", "pull"])
    parser.add_argument("--namesrv", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group")
    parser.add_argument("--count", type=int, default=10)
    parser.add_argument("--tags", default="TagA,TagB")
    parser.add_argument("--key-prefix", default="k")
    parser.add_argument("--expr", default="*")
    parser.add_argument("--expect", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=30)
    parser.add_argument("--linger", type=float, default=1.5)
    parser.add_argument("--fail-first", action="store_true")
    parser.add_argument("--stop-file", help="push: stop once this file exists")
    parser.add_argument("--orderly", action="store_true", help="orderly push consumer (locks its queues)")
    parser.add_argument("--batch", action="store_true", help="produce: send all messages in one send_batch")
    parser.add_argument("--body-size", type=int, default=0, help="pad bodies with x to this many bytes")
    parser.add_argument("--send-timeout-ms", type=int, default=3000)
    parser.add_argument("--ak")
    parser.add_argument("--sk")
    args = parser.parse_args()
    {"produce": produce, "push": push, "pull": pull}[args.mode](args)


if __name__ == "__main__":
    main()
