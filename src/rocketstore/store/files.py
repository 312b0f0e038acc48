"""The store's files for tools that work beside a `MessageStore` or without one: the Spark readers and
jobs, `verify`, the command line. They use the store's own classes and rules, reached through this one
module, so that the adapters depend on the store's public surface and never on its layers below.

* `CommitLog`, `ConsumeQueue`, `IndexFile`: a store's files, mapped read-only (readers) or written into
  a staging directory (rebuild);
* `find_end`: where the whole records of a commitlog end, as a read-only open finds it;
* `queue_messages`, `queue_runs`: the messages of a consume queue's range, read as `MessageStore.iter_queue`
  reads them (one by one, or in lists);
* `request_from_message`: what a record dispatches (its queue entry, the keys it is indexed under);
  `packed_from`: that for every record of a commitlog range, packed as the store's catch-up packs it
  (each queue's runs of entries, the index keys with their hashes), `DISPATCH_BATCH` records at a time;
* `StoreLock`: the lock a writer holds (a rebuild takes it);
* `atomic_write`: replace a small file (temporary file, fsync, rename), as the store writes its JSON;
  `read_json`: read one of RocketMQ's JSON files (fastjson's dialect), or its `.bak` when it is broken;
* `infer_geometry`: the file sizes a store directory's files say it was written with;
* `SubscriptionGroups`, `group_config`: the broker's subscription groups, kept beside the store's JSON
  state as RocketMQ's config/subscriptionGroup.json.
"""

from rocketstore.log.commitlog import CommitLog
from rocketstore.log.consume_queue import ConsumeQueue
from rocketstore.log.entry_run import queue_messages, queue_runs
from rocketstore.log.geometry import infer_geometry
from rocketstore.log.index_file import IndexFile
from rocketstore.log.json_config import read_json
from rocketstore.log.subscription_groups import SubscriptionGroups, group_config
from rocketstore.services.dispatch import DISPATCH_BATCH, DispatchRequest, packed_from, request_from_message
from rocketstore.services.recovery import find_end
from rocketstore.storage.fs import atomic_write
from rocketstore.storage.marker_files import StoreLock

__all__ = ["DISPATCH_BATCH", "CommitLog", "ConsumeQueue", "DispatchRequest", "IndexFile", "StoreLock",
           "SubscriptionGroups", "atomic_write", "find_end", "group_config", "infer_geometry", "packed_from",
           "queue_messages", "queue_runs", "read_json", "request_from_message"]
