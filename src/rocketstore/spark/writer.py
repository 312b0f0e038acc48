"""Writers: `df.write.format("rocketstore")` and `writeStream.format("rocketstore")`.

Concurrency model. A store has exactly one writer process (RocketMQ's POSIX lock on `lock`), so Spark
tasks never open the store. Each task turns its rows into `Message`s, checks them as `put()` would
(topic, sizes, properties) and stages them in its own file under `<staging>/<job id>/`; its commit
message names that file. The driver's `commit()` then opens the store once, appends the staged
messages of every successful task in partition order through one `MessageStore.put_batch` stream,
flushes, closes, and deletes the staging directory. `abort()` only deletes the staging directory, so
a failed or aborted job appends nothing, and a committed job appends each row once (files of failed or
speculative task attempts are never named in a commit message and are ignored).

Streaming sink. Spark may hand a micro-batch to `commit()` again after a restart. The sink records its
progress in `config/sparkSink.json` inside the store (`{sinkId: {batchId, state, startPhyOffset}}`,
written atomically): `appending` before the first put of a batch, `committed` after the flush. A batch
at or below a `committed` id is skipped; a batch found `appending` (a crash during the append) is
resumed after the records already in the log since `startPhyOffset`, so every row lands once. This
assumes the sink is the store's only writer while the query runs and that a replayed batch holds the
same rows in the same order (true for replayable sources such as files, Kafka or rocketstore).

Through a broker (option `broker`). The store is served, so its lock is the broker's and nothing but the
broker writes into it: `commit()` sends the staged messages with `broker_send.BrokerSender`. The
streaming sink keeps its progress in `<staging>/sparkSink-<sinkId>.json` (the same record plus the store
and broker), tags each message with `RS_SPARK_SINK_ROW` = `<sinkId>/<batchId>/<row>`, and on a batch found
`appending` reads the log read-only from `startPhyOffset` and sends only the rows not found there. A
POSIX lock on `<staging>/sparkSink-<sinkId>.lock` makes a commit wait for one still running.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Row
from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from rocketstore.format.store_dirs import CONFIG_DIR
from rocketstore.spark.options import WriteOptions

__all__ = [
    "SINK_STATE_FILE",
    "RocketStoreStreamWriter",
    "RocketStoreWriter",
    "StagedFile",
    "row_to_message",
]

SINK_STATE_FILE = "sparkSink.json"
"""Side file in the store's `config/` directory holding each streaming sink's last batch."""

_FRAME_ROWS = 1024


@dataclass(frozen=True)
class StagedFile(WriterCommitMessage):
    """What one task staged: the file and how many messages it holds."""

    path: str
    partition_id: int
    count: int


def _as_body(value: Any) -> bytes:
    if value is None:
        raise ValueError("Column 'body' is null; every row needs a body.")
    if isinstance(value, str):
        return value.encode("utf-8")
    return bytes(value)


def _as_keys(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(k for k in value.split(" ") if k)
    return tuple(str(k) for k in value if k)


def row_to_message(row: Mapping[str, Any], default_topic: str | None, default_queue_id: int = 0) -> Any:
    """The `rocketstore.Message` a row stands for.

    Columns: topic (or option `topic`), body (binary or string), and optional queueId (else
    `default_queue_id`; -1 lets the broker pick the queue), tags, keys (array or space-separated
    string), properties (map), flag.

    Raises:
        ValueError: no topic or no body.
        rocketstore.errors.InvalidMessageError: the message is not one `put()` accepts.
    """
    from rocketstore import Message

    topic = row.get("topic") or default_topic
    if not topic:
        raise ValueError("No topic: give a 'topic' column or the option 'topic'.")
    queue_id = row.get("queueId")
    properties = row.get("properties")
    return Message(
        str(topic),
        _as_body(row.get("body")),
        queue_id=int(queue_id) if queue_id is not None else default_queue_id,
        tags=row.get("tags"),
        keys=_as_keys(row.get("keys")),
        properties=dict(properties) if properties else None,
        flag=int(row.get("flag") or 0),
    )


def _stage(rows: Iterator[Row], opts: WriteOptions, job_dir: str) -> StagedFile:
    """Encode this task's rows into a staged file of pickled message frames."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    partition_id = ctx.partitionId() if ctx is not None else 0
    attempt = ctx.attemptNumber() if ctx is not None else 0
    os.makedirs(job_dir, exist_ok=True)
    path = os.path.join(job_dir, f"part-{partition_id:05d}-{attempt}-{uuid.uuid4().hex[:8]}.msgs")
    count = 0
    frame: list[Any] = []
    default_queue_id = -1 if opts.broker else 0
    with open(path, "wb") as fh:
        for row in rows:
            message = row_to_message(row.asDict(), opts.topic, default_queue_id)
            frame.append(message)
            count += 1
            if len(frame) >= _FRAME_ROWS:
                pickle.dump(frame, fh, protocol=pickle.HIGHEST_PROTOCOL)
                frame = []
        if frame:
            pickle.dump(frame, fh, protocol=pickle.HIGHEST_PROTOCOL)
        fh.flush()
        os.fsync(fh.fileno())
    return StagedFile(path, partition_id, count)


def _staged_frames(messages: list[WriterCommitMessage | None]) -> Iterator[list[Any]]:
    """The staged messages of every committed task, in partition order."""
    staged = sorted((m for m in messages if isinstance(m, StagedFile)), key=lambda m: m.partition_id)
    for item in staged:
        with open(item.path, "rb") as fh:
            while True:
                try:
                    yield pickle.load(fh)
                except EOFError:
                    break


def _validate_all(store: Any, messages: list[WriterCommitMessage | None]) -> None:
    """Check every staged message as put() will, before the first is appended, so that an invalid
    row fails the job with nothing written (put_batch checks only its own batch up front).

    Raises:
        rocketstore.errors.InvalidMessageError: a message put() would reject.
    """
    for frame in _staged_frames(messages):
        for message in frame:
            store.check_message(message)


def _open_writable(opts: WriteOptions) -> Any:
    from rocketstore import MessageStore
    from rocketstore.spark._stores import make_config

    return MessageStore.open(opts.path, make_config(opts.geometry))


STALE_STAGING_SECONDS = 24 * 3600
"""Staging directories older than this are removed when a new job starts (tasks killed while a job
was aborted can leave files behind; they are never appended)."""


def _sweep_stale(staging_root: str) -> None:
    now = time.time()
    with suppress(FileNotFoundError):
        for entry in os.scandir(staging_root):
            if not entry.name.startswith(("job-", "stream-")):
                continue  # a sink's progress file (option `broker`) is never swept
            with suppress(FileNotFoundError):
                if entry.is_dir(follow_symlinks=False) and now - entry.stat().st_mtime > STALE_STAGING_SECONDS:
                    shutil.rmtree(entry.path, ignore_errors=True)


class RocketStoreWriter(DataSourceWriter):
    """Batch writer: tasks stage, the driver appends on commit (see module docstring)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.job_dir = os.path.join(options.staging_root, f"job-{uuid.uuid4().hex}")
        _sweep_stale(options.staging_root)

    def write(self, iterator: Iterator[Row]) -> StagedFile:
        """Stage this task's rows.

        Raises:
            ValueError: a row without topic or body; InvalidMessageError: a row put() would reject.
        """
        return _stage(iterator, self.options, self.job_dir)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Append every staged message through one store, then drop the staging directory.

        Raises:
            rocketstore.errors.StoreLockedError: another process owns the store.
            rocketstore.spark.broker_send.BrokerSendError: (option `broker`) the broker cannot be reached
                or refused a send.
        """
        try:
            if self.options.broker:
                _send_through_broker(self.options, messages)
                return
            with _open_writable(self.options) as store:
                _validate_all(store, messages)
                for frame in _staged_frames(messages):
                    store.put_batch(frame)
                store.flush()
        finally:
            shutil.rmtree(self.job_dir, ignore_errors=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Drop the staging directory; nothing reaches the store."""
        shutil.rmtree(self.job_dir, ignore_errors=True)


def _state_path(opts: WriteOptions) -> str:
    return os.path.join(opts.path, CONFIG_DIR, SINK_STATE_FILE)


def load_sink_state(store_root: str) -> dict[str, dict[str, Any]]:
    """Every sink's record from `config/sparkSink.json` ({} when there is none)."""
    path = os.path.join(store_root, CONFIG_DIR, SINK_STATE_FILE)
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        return {}
    return data if isinstance(data, dict) else {}


def _save_sink_state(opts: WriteOptions, record: dict[str, Any]) -> None:
    from pathlib import Path

    from rocketstore.store.files import atomic_write

    state = load_sink_state(opts.path)
    state[opts.sink_id] = record
    os.makedirs(os.path.dirname(_state_path(opts)), exist_ok=True)
    atomic_write(Path(_state_path(opts)), json.dumps(state, indent=1, sort_keys=True).encode("utf-8"),
                 keep_backup=False)


class RocketStoreStreamWriter(DataSourceStreamWriter):
    """Streaming sink: one staged append per micro-batch, replays skipped (see module docstring)."""

    def __init__(self, options: WriteOptions) -> None:
        self.options = options
        self.run_dir = os.path.join(options.staging_root, f"stream-{options.sink_id}-{uuid.uuid4().hex}")

    def write(self, iterator: Iterator[Row]) -> StagedFile:
        """Stage this task's rows of the micro-batch."""
        return _stage(iterator, self.options, self.run_dir)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Append the micro-batch unless this sink already committed it.

        Raises:
            rocketstore.errors.StoreLockedError: another process owns the store.
            rocketstore.spark.broker_send.BrokerSendError: (option `broker`) the broker cannot be reached
                or refused a send.
        """
        try:
            if self.options.broker:
                _commit_through_broker(self.options, messages, batchId)
            else:
                self._commit(messages, batchId)
        finally:
            for item in messages:
                if isinstance(item, StagedFile):
                    with suppress(FileNotFoundError):
                        os.remove(item.path)

    def _commit(self, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
        record = load_sink_state(self.options.path).get(self.options.sink_id)
        if record is not None and (
            record["batchId"] > batch_id or (record["batchId"] == batch_id and record["state"] == "committed")
        ):
            return
        with _open_writable(self.options) as store:
            skip = 0
            if record is not None and record["batchId"] == batch_id:
                start = int(record["startPhyOffset"])
                skip = sum(1 for _ in store.scan(start))
            else:
                _validate_all(store, messages)
                start = store.max_phy_offset
                _save_sink_state(self.options, {"batchId": batch_id, "state": "appending", "startPhyOffset": start})
            for frame in _staged_frames(messages):
                if skip >= len(frame):
                    skip -= len(frame)
                    continue
                store.put_batch(frame[skip:])
                skip = 0
            store.flush()
        _save_sink_state(self.options, {"batchId": batch_id, "state": "committed", "startPhyOffset": start})

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Drop the batch's staged files; nothing reaches the store."""
        for item in messages:
            if isinstance(item, StagedFile):
                with suppress(FileNotFoundError):
                    os.remove(item.path)


# --- Through a broker (option `broker`) ---------------------------------------------------------------


def progress_path(opts: WriteOptions) -> str:
    """Where a sink writing through a broker keeps its progress: `<staging>/sparkSink-<sinkId>.json`."""
    return os.path.join(opts.staging_root, f"sparkSink-{opts.sink_id}.json")


def load_progress(opts: WriteOptions) -> dict[str, Any] | None:
    """The progress record of a sink writing through a broker, None when it has none.

    Raises:
        ValueError: the record belongs to another store (option 'sinkId' reused in this 'stagingDir').
    """
    try:
        with open(progress_path(opts), encoding="utf-8") as fh:
            record = json.load(fh)
    except FileNotFoundError:
        return None
    if not isinstance(record, dict):
        raise ValueError(f"Option 'sinkId': {progress_path(opts)} does not hold a sink's progress record.")
    if record.get("store") != opts.path:
        raise ValueError(
            f"Option 'sinkId': sink {opts.sink_id!r} in stagingDir {opts.staging_root} records the progress "
            f"of store {record.get('store')!r}, not of {opts.path!r}; give each query its own sinkId."
        )
    return record


def _save_progress(opts: WriteOptions, batch_id: int, state: str, start: int) -> None:
    from pathlib import Path

    from rocketstore.store.files import atomic_write

    record = {"store": opts.path, "broker": opts.broker, "batchId": batch_id, "state": state,
              "startPhyOffset": start}
    os.makedirs(opts.staging_root, exist_ok=True)
    atomic_write(Path(progress_path(opts)), json.dumps(record, indent=1, sort_keys=True).encode("utf-8"),
                 keep_backup=False)


class _SinkLock:
    """POSIX lock on `<staging>/sparkSink-<sinkId>.lock` for the whole commit: a commit of a driver that
    was killed while one of its processes still sends (an orphaned Python worker) ends before the
    restarted query reads the progress and the log."""

    def __init__(self, opts: WriteOptions) -> None:
        os.makedirs(opts.staging_root, exist_ok=True)
        self.path = os.path.join(opts.staging_root, f"sparkSink-{opts.sink_id}.lock")

    def __enter__(self) -> _SinkLock:
        import fcntl

        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self._fd)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self._fd)  # closing releases the lock


def _checked_queue_nums(opts: WriteOptions, messages: list[WriterCommitMessage | None],
                        extra: Any = None) -> dict[str, int]:
    """Check every staged message before the first send; per topic, the queue count to ask the broker
    for when it creates the topic (one more than the highest queue id given, at least 4 as RocketMQ's
    producers ask).

    Raises:
        InvalidMessageError: a message put() would reject; BrokerSendError: a topic brokers refuse.
    """
    from rocketstore.spark.broker_send import LocalCheck

    assert opts.broker is not None
    check = LocalCheck(opts.path, opts.geometry, opts.broker)
    queue_nums: dict[str, int] = {}
    row = 0
    for frame in _staged_frames(messages):
        for message in frame:
            check.check(message, extra(row) if extra else None)
            queue_nums[message.topic] = max(queue_nums.get(message.topic, 4), message.queue_id + 1)
            row += 1
    return queue_nums


def _send_through_broker(opts: WriteOptions, messages: list[WriterCommitMessage | None]) -> None:
    from rocketstore.spark.broker_send import BrokerSender

    assert opts.broker is not None
    queue_nums = _checked_queue_nums(opts, messages)
    with BrokerSender(opts.broker, queue_nums) as sender:
        sender.send((m, None) for frame in _staged_frames(messages) for m in frame)


def _commit_through_broker(opts: WriteOptions, messages: list[WriterCommitMessage | None], batch_id: int) -> None:
    """One micro-batch through the broker, exactly once across replays (see module docstring)."""
    from rocketstore.spark.broker_send import SINK_ROW_PROPERTY, BrokerSender, log_end, sent_rows, sink_row_value

    assert opts.broker is not None

    def extra(row: int) -> dict[str, str]:
        return {SINK_ROW_PROPERTY: sink_row_value(opts.sink_id, batch_id, row)}

    with _SinkLock(opts):
        record = load_progress(opts)
        if record is not None and (
            record["batchId"] > batch_id or (record["batchId"] == batch_id and record["state"] == "committed")
        ):
            return
        queue_nums = _checked_queue_nums(opts, messages, extra)
        if record is not None and record["batchId"] == batch_id:
            start = int(record["startPhyOffset"])
            done = sent_rows(opts.path, opts.geometry, start, f"{opts.sink_id}/{batch_id}/")
        else:
            start = log_end(opts.path, opts.geometry)
            done = set()
            _save_progress(opts, batch_id, "appending", start)

        def pending() -> Iterator[tuple[Any, dict[str, str]]]:
            row = 0
            for frame in _staged_frames(messages):
                for message in frame:
                    if row not in done:
                        yield message, extra(row)
                    row += 1

        with BrokerSender(opts.broker, queue_nums) as sender:
            sender.send(pending())
        _save_progress(opts, batch_id, "committed", start)
