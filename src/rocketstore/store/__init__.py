"""The store: `MessageStore`, a facade over parts that own their state.

    message_store.py    `MessageStore`: argument checks, open and close, each call handed to a part
    running_flags.py    open or closed, writable or read-only and why
    queues.py           the consume queues, the next offset of each, misplaced entries seen
    write_path.py       put, put_nowait, put_batch, the broker's records; the dispatch of what was appended
      prepare.py          a message checked and shaped into the parts of its record (`Prepared`)
      append_run.py       a run of prepared messages packed into one commitlog file's records
      pending_put.py      puts queued for SYNC group commit
    read_path.py        get, query, offsets by time, iteration, records by offset or message id
    open_recovery.py    recovery and the catch-up at an open, or a read-only open's end
    background.py       the flush, retention and delayed-delivery services
    geometry_record.py  config/rocketstore.json: the geometry recorded, checked or inferred
    topic_delete.py     a topic's queues deleted
    checks.py           the argument checks every part makes
"""

from rocketstore.store.message_store import MessageStore
from rocketstore.store.prepare import message_checker

__all__ = ["MessageStore", "message_checker"]
