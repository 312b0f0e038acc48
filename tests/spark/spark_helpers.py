"""Helpers of the Spark tests: small store geometry, sample messages, geometry read options."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SMALL_GEOMETRY = {
    "commitlog_file_size": 16 * 1024,
    "consume_queue_file_entries": 10,
    "index_hash_slots": 16,
    "index_max_entries": 9,
}
"""Tiny files so that small test stores roll commitlog, consume-queue and index files."""


def geometry_options(config: Any) -> dict[str, str]:
    """Read options naming the geometry of `config`."""
    return {
        "commitlogFileSize": str(config.commitlog_file_size),
        "consumeQueueFileEntries": str(config.consume_queue_file_entries),
        "indexHashSlots": str(config.index_hash_slots),
        "indexMaxEntries": str(config.index_max_entries),
    }


def small_config(**overrides: Any) -> Any:
    from rocketstore import StoreConfig

    return StoreConfig(**{**SMALL_GEOMETRY, **overrides})


def small_options() -> dict[str, str]:
    """Read options for a store written with `small_config()`."""
    return geometry_options(small_config())


def sample_messages(count: int, topics: Sequence[str] = ("TopicA", "TopicB"), queues: int = 2,
                    start: int = 0) -> list[Any]:
    """`count` messages spread over topics and queues, with tags, keys and a property each."""
    from rocketstore import Message

    messages = []
    for i in range(start, start + count):
        messages.append(
            Message(
                topics[i % len(topics)],
                f"body-{i}".encode() * (1 + i % 5),
                queue_id=(i // len(topics)) % queues,
                tags=("TagA", "TagB", None)[i % 3],
                keys=(f"k{i}", f"group{i % 4}") if i % 7 else (),
                properties={"n": str(i)},
            )
        )
    return messages


def row_schema() -> Any:
    """The writer's input rows: topic, body, queueId, tags, keys, properties."""
    from pyspark.sql.types import ArrayType, IntegerType, MapType, StringType, StructField, StructType

    return StructType([
        StructField("topic", StringType()),
        StructField("body", StringType()),
        StructField("queueId", IntegerType()),
        StructField("tags", StringType()),
        StructField("keys", ArrayType(StringType())),
        StructField("properties", MapType(StringType(), StringType())),
    ])
