"""The put path's kernels behind one boundary (rocketstore.kernels): the backend is picked once by the
environment; the common message (a bytes body, keys as a tuple, a topic, a queue id) takes the compiled
path for `put` left behind the log, `put` dispatched at once and `put_batch`, with no decline counted;
what a kernel declines is counted and written by the twin; and the `Appender` writes a buffer it is
given, the bytes the twin encodes, holding its own position."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rocketstore import FlushMode, Message, MessageStore, StoreConfig, kernels
from rocketstore.results import PutStatus
from rocketstore.store import write_path
from rocketstore.store.append_run import encode_record

CONFIG = StoreConfig(commitlog_file_size=256 * 1024, consume_queue_file_entries=1024, index_hash_slots=101,
                     index_max_entries=4096, deliver_delayed_messages=False)
SRC = Path(__file__).resolve().parents[2] / "src"
compiled_only = pytest.mark.skipif(kernels.BACKEND != "compiled",
                                   reason="the compiled module is not built (or ROCKETSTORE_PURE_PYTHON is set)")


def _common(i: int) -> Message:
    return Message("KernelTopic", b"body-%04d" % i, queue_id=i % 3, tags="TagA", keys=(f"key-{i}",))


def _backend_with(pure: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "ROCKETSTORE_PURE_PYTHON"}
    if pure is not None:
        env["ROCKETSTORE_PURE_PYTHON"] = pure
    env["PYTHONPATH"] = str(SRC)
    code = ("from rocketstore import kernels; "
            "print(kernels.BACKEND, kernels.Appender is None, kernels.pack_run is None, kernels.put_one is None)")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_pure_python_variable_picks_the_twins_for_every_kernel():
    assert _backend_with("1") == "python True True True"


@compiled_only
def test_without_the_variable_the_compiled_backend_is_picked():
    assert _backend_with(None) == "compiled False False False"
    assert _backend_with("0") == "compiled False False False"


def _bodies(store: MessageStore, topic: str, queues: int) -> list[bytes]:
    got = []
    for q in range(queues):
        offset = 0
        while messages := (result := store.get(topic, q, offset, 32)).messages:
            got.extend(m.body for m in messages)
            offset = result.next_offset
    return sorted(got)


@compiled_only
def test_the_common_message_put_behind_takes_the_compiled_appender(tmp_path):
    with MessageStore.open(tmp_path, CONFIG) as store:
        store.put(_common(0))  # the first put creates the log's first file: the twin writes it and attaches
        appender = store._writes._appender
        assert appender is not None
        kernels.declines.clear()
        written = appender.written
        results = [store.put(_common(i)) for i in range(1, 201)]
        assert appender.written - written == 200
        assert sum(kernels.declines.values()) == 0, dict(kernels.declines)
        assert [r.status for r in results] == [PutStatus.PUT_OK] * 200
        assert _bodies(store, "KernelTopic", 3) == sorted(b"body-%04d" % i for i in range(201))
        assert [list(m.keys) for m in store.query("KernelTopic", "key-150")] == [["key-150"]]


@compiled_only
def test_put_behind_results_follow_the_queue_table_and_the_log(tmp_path):
    with MessageStore.open(tmp_path, CONFIG) as store:
        results = [store.put(_common(i)) for i in range(12)]
        assert [r.queue_offset for r in results] == [i // 3 for i in range(12)]
        assert all(b.phy_offset == a.phy_offset + a.size for a, b in zip(results, results[1:], strict=False))
        assert store.commitlog.max_offset == results[-1].phy_offset + results[-1].size


@compiled_only
def test_the_common_message_put_at_once_takes_the_compiled_put_one(tmp_path):
    with MessageStore.open(tmp_path, CONFIG) as store:
        store.add_arrival_listener(lambda topic, queue_id, offset: None)  # a listener: puts dispatch at once
        for i in range(3):
            store.put(_common(i))  # the first entries create each queue's and the index's first files
        kernels.declines.clear()
        for i in range(3, 103):
            store.put(_common(i))
        assert sum(kernels.declines.values()) == 0, dict(kernels.declines)
        assert _bodies(store, "KernelTopic", 3) == sorted(b"body-%04d" % i for i in range(103))


@compiled_only
@pytest.mark.parametrize("flush", [FlushMode.ASYNC, FlushMode.SYNC])
def test_the_common_message_put_batch_takes_the_compiled_prepare_and_run(tmp_path, flush):
    config = StoreConfig(commitlog_file_size=CONFIG.commitlog_file_size, flush_mode=flush,
                         deliver_delayed_messages=False)
    with MessageStore.open(tmp_path, config) as store:
        kernels.declines.clear()
        results = store.put_batch([_common(i) for i in range(64)])
        assert sum(kernels.declines.values()) == 0, dict(kernels.declines)
        assert len(results) == 64
        assert _bodies(store, "KernelTopic", 3) == sorted(b"body-%04d" % i for i in range(64))


def _broker_shaped(i: int) -> Message:
    """A message as `rocketstore serve` makes it of a Java producer's send: a properties mapping and a
    born host."""
    properties = {"KEYS": f"key-{i} other-{i}", "UNIQ_KEY": f"FD0000000000000000000000000000{i:02X}",
                  "WAIT": "true", "TAGS": "TagA", "CLUSTER": "DefaultCluster"}
    return Message("KernelTopic", b"body-%04d" % i, queue_id=i % 3, properties=properties,
                   born_host=f"127.0.0.{1 + i % 2}:{50000 + i}")


@compiled_only
@pytest.mark.parametrize("flush", [FlushMode.ASYNC, FlushMode.SYNC])
def test_the_broker_shaped_message_takes_the_compiled_prepare(tmp_path, flush):
    config = StoreConfig(commitlog_file_size=CONFIG.commitlog_file_size, flush_mode=flush,
                         deliver_delayed_messages=False)
    with MessageStore.open(tmp_path, config) as store:
        for i in range(3):
            store.put(_common(i))  # the topic passes its check once; each queue has its first file
        kernels.declines.clear()
        singles = [store.put(_broker_shaped(i)) for i in range(3, 11)]
        batch = store.put_batch([_broker_shaped(i) for i in range(11, 43)])
        assert sum(kernels.declines.values()) == 0, dict(kernels.declines)
        assert all(r.status is PutStatus.PUT_OK for r in singles + batch)
        assert _bodies(store, "KernelTopic", 3) == sorted(b"body-%04d" % i for i in range(43))
        stored = store.get("KernelTopic", 1, 1, 1).messages[0]  # _broker_shaped(4)
        assert (stored.properties, stored.born_host) == (_broker_shaped(4).properties, "127.0.0.1:50004")
        assert [m.body for m in store.query("KernelTopic", "other-7")] == [b"body-0007"]


@compiled_only
def test_a_message_the_kernels_decline_is_counted_and_written_by_the_twin(tmp_path):
    with MessageStore.open(tmp_path, CONFIG) as store:
        store.put(_common(0))
        kernels.declines.clear()
        odd = Message("KernelTopic", b"with properties", queue_id=1, properties={"colour": "blue"},
                      born_host="[::1]:9876")  # an IPv6 born host the store has not parsed yet
        result = store.put(odd)
        assert kernels.declines["put_behind"] == 1
        assert kernels.declines["prepare"] == 1  # the twin's prepare, after the appender's
        assert [m.properties.get("colour") for m in store.get("KernelTopic", 1, result.queue_offset, 1).messages] \
            == ["blue"]
        kernels.declines.clear()
        store.put(_common(3))  # the twin attached the appender where it wrote: the next common one is compiled
        assert sum(kernels.declines.values()) == 0, dict(kernels.declines)


def _file_state(mapping: object, file_from: int, position: int, size: int = 4096) -> object:
    """A bare MappedFileState (the compiled base of MappedFile) of `size` bytes over `mapping`."""
    from rocketstore.native import speedups

    assert speedups is not None
    state = speedups.MappedFileState()
    state._mm, state.file_from_offset, state.wrote_position, state.touched = mapping, file_from, position, False
    state.file_size = size
    return state


@compiled_only
def test_the_appender_writes_the_twins_bytes_and_moves_the_file_and_the_marks_on(tmp_path):
    from rocketstore.native import speedups

    assert speedups is not None
    with MessageStore.open(tmp_path, CONFIG, clock=lambda: 1_700_000_000_123) as store:
        w = store._writes
        lock = speedups.StoreLock()
        appender = write_path.appender_for(w.preparer, w._store_ip, w._store_port, w._msg_id_prefix,
                                           store._queues.next_offsets, store.clock, lock)
        assert appender is not None
        assert write_path.appender_for(w.preparer, w._store_ip, w._store_port, w._msg_id_prefix,
                                       store._queues.next_offsets, store.clock, threading.Lock()) is None
        buffer = bytearray(4096)
        file = _file_state(buffer, 8192, 100)
        marks = speedups.WriteMarks()
        marks.behind_to, marks.dispatched_to, marks.last_store_timestamp, marks.putting_behind = 5, 5, 7, False
        appender.attach(file)
        message = _common(7)
        assert appender.put_behind(message, marks) is None  # the store stopped putting behind: nothing written
        assert buffer == bytearray(4096) and appender.declined == 0 and not lock.locked()
        marks.putting_behind = True
        file.wrote_position = 99  # type: ignore[attr-defined]
        assert appender.put_behind(message, marks) is None  # the file moved under it: declined, nothing written
        assert buffer == bytearray(4096) and appender.declined == 1
        assert (marks.behind_to, marks.last_store_timestamp, file.touched) == (5, 7, False)  # type: ignore[attr-defined]
        file.wrote_position = 100  # type: ignore[attr-defined]
        result = appender.put_behind(message, marks)
        assert result is not None
        assert (result.phy_offset, result.queue_offset, result.store_timestamp) == (8292, 0, 1_700_000_000_123)
        prepared = store._writes.preparer.prepare_py(message)
        record = encode_record(prepared, 8292, 0, 1_700_000_000_123, w._store_ip, w._store_port)
        assert bytes(buffer[100:100 + len(record)]) == record
        assert buffer[:100] == bytes(100) and not any(buffer[100 + len(record):])
        assert (appender.position, appender.written) == (100 + len(record), 1)
        assert (file.wrote_position, file.touched) == (100 + len(record), True)  # type: ignore[attr-defined]
        assert (marks.behind_to, marks.dispatched_to, marks.last_store_timestamp) == \
            (8292 + len(record), 5, 1_700_000_000_123)
        assert store._queues.next_offsets[("KernelTopic", 1)] == 1
        assert not lock.locked()  # given back after every call
        with pytest.raises(TypeError, match="WriteMarks"):
            appender.put_behind(message, object())
        with pytest.raises(TypeError, match="MappedFile"):
            appender.attach(buffer)
        with pytest.raises(ValueError, match="shorter than the file"):
            appender.attach(_file_state(bytearray(10), 0, 0))
        with pytest.raises(ValueError, match="not mapped"):
            appender.attach(_file_state(None, 0, 0))
        with pytest.raises(BufferError):
            appender.attach(_file_state(b"read-only bytes", 0, 0, 15))


@compiled_only
def test_the_store_lock_is_a_lock():
    """The compiled store lock answers as threading.Lock does: one holder at a time, a non-blocking or
    timed acquire that fails while another thread holds it, RuntimeError on releasing it unheld, `with`."""
    from rocketstore.native import speedups

    assert speedups is not None
    lock = speedups.StoreLock()
    assert not lock.locked() and lock.acquire() and lock.locked()
    assert lock.acquire(blocking=False) is False and lock.acquire(timeout=0.01) is False
    lock.release()
    with pytest.raises(RuntimeError, match="unlocked"):
        lock.release()
    with pytest.raises(ValueError, match="non-blocking"):
        lock.acquire(False, 1)
    with pytest.raises(ValueError, match="non-negative"):
        lock.acquire(timeout=-2)
    with lock:
        assert lock.locked()
    assert not lock.locked()
    counts = [0]

    def add() -> None:
        for _ in range(2000):
            with lock:
                seen = counts[0]
                time.sleep(0) if seen % 97 == 0 else None  # a switch inside the held lock now and then
                counts[0] = seen + 1

    threads = [threading.Thread(target=add) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counts[0] == 8000


@compiled_only
def test_a_plain_put_waits_for_the_store_lock_another_thread_holds(tmp_path):
    """The compiled put takes the store lock itself: while another thread holds it, the put writes
    nothing and waits (without the interpreter lock), then writes once the lock is given back."""
    with MessageStore.open(tmp_path, CONFIG) as store:
        store.put(_common(1))  # attaches the appender
        kernels.declines.clear()
        lock = store._writes._lock
        assert isinstance(lock, kernels.StoreLock)
        before = store.max_phy_offset
        done: list[object] = []
        with lock:
            putter = threading.Thread(target=lambda: done.append(store.put(_common(2))))
            putter.start()
            time.sleep(0.2)
            assert not done and store.commitlog.max_offset == before  # waiting, nothing written
        putter.join(5)
        assert done and done[0].status == PutStatus.PUT_OK and done[0].phy_offset == before  # type: ignore[attr-defined]
        assert sum(kernels.declines.values()) == 0, dict(kernels.declines)
