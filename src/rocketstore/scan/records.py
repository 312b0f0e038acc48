"""The row of a RocketMQ message as Arrow: its columns, their types, and StoredMessage -> record batches.

Column names are camelCase, as in RocketMQ's own Spark connector and the golden `expected.json`. Readers
yield `pyarrow.RecordBatch`es built column-wise by `columnar.record_batch`; `to_record_batch` is the
row-by-row reference it falls back to. The Spark schema (`rocketstore.spark.schema`) is this one in
Spark's types.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from rocketstore import StoredMessage

__all__ = ["ARROW_SCHEMA", "COLUMNS", "FIELDS", "to_record_batch"]

FIELDS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("topic", pa.string(), "topic"),
    ("queueId", pa.int32(), "queue_id"),
    ("queueOffset", pa.int64(), "queue_offset"),
    ("commitLogOffset", pa.int64(), "phy_offset"),
    ("storeSize", pa.int32(), "size"),
    ("msgId", pa.string(), "msg_id"),
    ("uniqKey", pa.string(), "uniq_key"),
    ("tags", pa.string(), "tags"),
    ("keys", pa.list_(pa.string()), "keys"),
    ("properties", pa.map_(pa.string(), pa.string()), "properties"),
    ("body", pa.binary(), "body"),
    ("flag", pa.int32(), "flag"),
    ("sysFlag", pa.int32(), "sys_flag"),
    ("bornTimestamp", pa.int64(), "born_timestamp"),
    ("bornHost", pa.string(), "born_host"),
    ("storeTimestamp", pa.int64(), "store_timestamp"),
    ("storeHost", pa.string(), "store_host"),
    ("reconsumeTimes", pa.int32(), "reconsume_times"),
    ("bodyCRC", pa.int32(), "body_crc"),
)
"""(column, Arrow type, StoredMessage attribute) of every column but `broker`, in schema order."""

COLUMNS: tuple[str, ...] = tuple(c[0] for c in FIELDS) + ("broker",)
"""Column names in schema order."""

ARROW_SCHEMA = pa.schema([pa.field(name, arrow_type) for name, arrow_type, _ in FIELDS]).append(
    pa.field("broker", pa.string())
)
"""The schema of the record batches readers yield (`broker`: the store root a row came from)."""


def to_record_batch(messages: Sequence[StoredMessage], broker: str) -> pa.RecordBatch:
    """One Arrow record batch holding `messages`, each row tagged with `broker`."""
    arrays: list[pa.Array] = []
    for name, arrow_type, attr in FIELDS:
        if name == "properties":
            values: list[Any] = [list(m.properties.items()) for m in messages]
        elif name == "keys":
            values = [list(m.keys) for m in messages]
        else:
            values = [getattr(m, attr) for m in messages]
        arrays.append(pa.array(values, type=arrow_type))
    arrays.append(pa.array([broker] * len(messages), type=pa.string()))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
