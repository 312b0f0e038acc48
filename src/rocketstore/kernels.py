"""The compiled kernels of the put path behind one boundary, with their pure-Python twins as reference.

The backend is picked once, here, at import: `compiled` when the module `rocketstore._speedups` was built
(setup.py) and `ROCKETSTORE_PURE_PYTHON` is not set to 1, else `python`. With the pure backend every
kernel below is None and its caller runs the twin beside it (`Preparer.prepare_py`, `pack_run_py`,
`put_results_py`, `WritePath._put_one_py`, `WritePath._put_behind_py`), which gives the same answers
and bytes (the tests hold each pair equal).

What crosses the boundary: messages and prepared tuples in, buffers (a commitlog file's mapping),
integers, the store's own tables (the queue offsets dict, packed index keys) and the slot descriptors of
the classes a kernel fills in, results, counts and packed bytes out; and the state types. A kernel that
keeps state keeps it in a type of its own: `Appender` holds the write position of the plain ASYNC put in
the file it is attached to. The state a kernel reads and writes on the
store's objects is held by compiled types those objects are (a base class): `MappedFileState`
(storage.mapped_file), `FileQueueState` (storage.mapped_file_queue), `ConsumeQueueState`
(log.consume_queue), `IndexFileState` (log.index_file) and `WriteMarks` (store.write_path, the marks a put
moves on), each with a pure-Python twin of the same
`__slots__` picked once at import. The C reads their struct fields after a type check and reads no
attribute of the store's objects by name; handed any other object, a kernel declines. The callers hold
the store lock, but for `Appender.put_behind`, which takes it itself: the store lock is then the
compiled `StoreLock` (`store_lock`), a lock of the module's own with threading.Lock's interface.

A kernel declines what it does not take (nothing written, None answered) and the caller's twin does it;
`declines` counts the declines by kernel name, so a test can tell that the common message (a bytes
body, keys as a tuple, a topic, a queue id) and the one the broker makes of a send (a properties dict
of str to str without DELAY, an IPv4 born host) took the compiled path.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, cast

from rocketstore.native import speedups

if TYPE_CHECKING:
    from rocketstore._speedups import Appender as AppenderType
    from rocketstore._speedups import StoreLock as StoreLockType

BACKEND: Final[str] = "python" if speedups is None else "compiled"
"""`compiled` or `python`: which backend the put path's kernels come from."""

prepare_plain: Callable[..., Any] | None = None if speedups is None else speedups.prepare_plain
"""Preparer.prepare for the common and the broker's message; None (declined) for any other."""

prepare_many: Callable[..., tuple[list[Any], int]] | None = None if speedups is None else speedups.prepare_many
"""prepare_plain for each message of a sequence, with the count of those it declined."""

pack_run: Callable[..., tuple[int, bytes]] | None = None if speedups is None else speedups.pack_run
"""The write loop of a batch put over the messages that fit one commitlog file."""

put_one: Callable[..., Any] | None = None if speedups is None else speedups.put_one
"""The writes of a single put that dispatches at once, when they are the plain case."""

put_results: Callable[..., list[Any]] | None = None if speedups is None else speedups.put_results
"""The PutResults of a batch."""

fill_slots: Callable[..., Any] | None = None if speedups is None else speedups.fill_slots
"""A new instance of a slotted class with each value stored through its slot descriptor."""

Appender: type[AppenderType] | None = None if speedups is None else speedups.Appender
"""The plain ASYNC put's record writer (see rocketstore._speedups.Appender)."""

StoreLock: type[StoreLockType] | None = None if speedups is None else speedups.StoreLock
"""The compiled store lock (see `store_lock`)."""


def store_lock() -> threading.Lock:
    """A new store lock: the compiled `StoreLock`, which `Appender.put_behind` takes inside its call (a
    lock of the module's own, used by Python code as a threading.Lock; a signal does not interrupt a
    wait for it), or a threading.Lock with the pure backend."""
    return threading.Lock() if speedups is None else cast(threading.Lock, speedups.StoreLock())

declines: Counter[str] = Counter()
"""Kernel name -> how many times it declined and the twin ran instead, since import (or the last
`declines.clear()`)."""


def declined(kernel: str, count: int = 1) -> None:
    """Count `count` declines of `kernel` (called where the caller falls back to the twin)."""
    declines[kernel] += count
