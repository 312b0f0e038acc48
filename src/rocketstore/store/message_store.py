"""MessageStore: the facade over commitlog, consume queues, index, checkpoint and services, put together
from its parts (core.py: shared state; lifecycle.py: opening and closing; write_path.py; read_path.py)."""

from __future__ import annotations

from rocketstore.store.lifecycle import StoreLifecycle
from rocketstore.store.read_path import StoreReadPath
from rocketstore.store.write_path import StoreWritePath


class MessageStore(StoreLifecycle, StoreWritePath, StoreReadPath):
    """A RocketMQ broker store directory, opened for reading and (unless read-only) writing.

    Use `MessageStore.open()`; the store is a context manager and safe to share between threads
    (puts are serialised, reads run concurrently).
    """
