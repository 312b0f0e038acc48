"""The store: `MessageStore` over commitlog, consume queues, index, checkpoint and services.

    core.py           shared state: files, services, locks, the queue table, state files, common checks
    lifecycle.py      opening (lock, odd files, recovery or the read-only end, services) and closing
    write_path.py     put, put_nowait, put_batch, the broker's records; dispatch of what was appended
      prepare.py        a message checked and shaped into the parts of its record (`Prepared`)
      append_run.py     a run of prepared messages packed into one commitlog file's records
      pending_put.py    puts queued for SYNC group commit
    read_path.py      get, query, offsets by time, iteration, records by offset or message id
    message_store.py  `MessageStore`, the parts put together
"""

from rocketstore.store.message_store import MessageStore
from rocketstore.store.prepare import message_checker

__all__ = ["MessageStore", "message_checker"]
