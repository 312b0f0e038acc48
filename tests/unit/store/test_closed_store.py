"""After `close()` every public call of a MessageStore that touches the store raises StoreClosedError,
found by introspection: a method or property added later is held to it without being named here. A
commit_offset racing close either lands on disk or raises."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from rocketstore import Message, MessageStore, StoreConfig
from rocketstore.errors import StoreClosedError

CONFIG = StoreConfig(commitlog_file_size=1 << 16, consume_queue_file_entries=64, index_hash_slots=64,
                     index_max_entries=256)

WORK_AFTER_CLOSE = {
    "close": "idempotent: a second close does nothing",
    "open": "a classmethod: opens another store object",
    "config_of": "a staticmethod: reads a store directory, not this store object",
}
"""Public calls that legitimately work on a closed store, with the reason."""

ATTRIBUTES = {
    "path": "where the store is: data, readable after close for a caller's messages",
    "config": "the settings it was opened with (a frozen value)",
    "read_only": "how it was opened (a bool)",
    "clock": "the clock it was given",
    "recovery": "the RecoveryReport of the open, a value for the caller to read after close",
    "geometry_inferred": "what a read-only open took from the files, a value as the RecoveryReport is",
    "commitlog": "a component (the store's own reads go through the calls above)",
    "index": "a component",
    "offsets": "a component",
    "topics": "a component",
    "checkpoint": "a component",
}
"""The public instance attributes: values and components, not calls (a new one must be added here, which
is the moment to decide whether it should be a call that checks the store is open)."""

ARGUMENTS: dict[str, Any] = {
    "message": Message("T", b"x"), "messages": [Message("T", b"x")], "topic": "T", "queue_id": 0, "offset": 0,
    "group": "G", "key": "k", "phy_offset": 0, "msg_id": "7F00000100002A9F0000000000000000", "timestamp_ms": 0,
    "queue_offset": 0, "queue_nums": 1, "read_queue_nums": 1, "write_queue_nums": 1, "perm": 6,
    "callback": lambda *args: None, "max_count": 1, "begin_ms": 0, "end": 2**63 - 1, "any_time": True,
}
"""A value for each required parameter name of the public methods (a new name must be added here)."""


def _public_calls() -> dict[str, Any]:
    """Every public method and property of MessageStore, as found on the class."""
    return {name: inspect.getattr_static(MessageStore, name) for name in dir(MessageStore)
            if not name.startswith("_")}


def _call(store: MessageStore, name: str, member: Any) -> Callable[[], object]:
    """A call of `name` with plausible arguments (iterators are consumed: their first step runs)."""
    if isinstance(member, property):
        return lambda: getattr(store, name)
    method = getattr(store, name)
    arguments = {}
    for parameter in inspect.signature(method).parameters.values():
        if parameter.default is inspect.Parameter.empty and parameter.kind not in (
                inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            assert parameter.name in ARGUMENTS, f"add a value for {name}({parameter.name}) to ARGUMENTS"
            arguments[parameter.name] = ARGUMENTS[parameter.name]

    def call() -> object:
        answer = method(**arguments)
        if hasattr(answer, "__next__"):
            next(answer, None)
        return answer
    return call


def test_every_public_call_raises_after_close(tmp_path):
    store = MessageStore.open(tmp_path, CONFIG)
    store.put(Message("T", b"x", keys=("k",)))
    store.commit_offset("G", "T", 0, 1)
    store.close()
    calls = _public_calls()
    assert {"put", "get", "commit_offset", "max_offset", "min_phy_offset", "scan", "query"} <= set(calls)
    for name, member in calls.items():
        if name in WORK_AFTER_CLOSE:
            continue
        assert isinstance(member, (property, staticmethod, classmethod)) or inspect.isfunction(member), name
        with pytest.raises(StoreClosedError):
            _call(store, name, member)()
            pytest.fail(f"MessageStore.{name} answered after close")
    store.close()  # idempotent, as is leaving the context again
    store.__exit__(None, None, None)
    bound = {name for name in vars(store) if name in calls}  # put, get, query: their part's bound methods
    assert bound == {"put", "get", "query"}
    public_attributes = {name for name in vars(store) if not name.startswith("_")} - bound
    assert public_attributes == set(ATTRIBUTES), "decide for a new public attribute: a value, or a call"
    with MessageStore.open(tmp_path, CONFIG) as reopened:
        assert reopened.committed_offset("G", "T", 0) == 1
        assert [m.body for m in reopened.get("T", 0, 0).messages] == [b"x"]


def test_the_calls_that_work_after_close_are_still_public_calls():
    calls = _public_calls()
    assert set(WORK_AFTER_CLOSE) <= set(calls)


@pytest.mark.parametrize("run", range(15))
def test_a_commit_racing_close_lands_on_disk_or_raises(tmp_path, run):
    """Threads commit rising offsets while the store closes: each thread's last commit that returned is
    what the reopened store holds, and every later commit raised StoreClosedError."""
    store = MessageStore.open(tmp_path, CONFIG)
    landed: dict[int, int] = {}
    started = threading.Barrier(5)
    closed = threading.Event()
    failures: list[BaseException] = []

    def commit(queue_id: int) -> None:
        started.wait()
        offset = 0
        try:
            while not closed.is_set():
                offset += 1
                store.commit_offset("G", "T", queue_id, offset)
                landed[queue_id] = offset
            offset += 1
            store.commit_offset("G", "T", queue_id, offset)  # once more after close returned: it must raise
            landed[queue_id] = offset
        except StoreClosedError:
            pass
        except BaseException as exc:  # anything else fails the test
            failures.append(exc)

    threads = [threading.Thread(target=commit, args=(q,)) for q in range(4)]
    for thread in threads:
        thread.start()
    started.wait()
    while len(landed) < 4:
        time.sleep(0.0001)
    store.close()
    closed.set()
    for thread in threads:
        thread.join()
    assert not failures
    with MessageStore.open(tmp_path, CONFIG) as reopened:
        assert {q: reopened.committed_offset("G", "T", q) for q in range(4)} == landed
