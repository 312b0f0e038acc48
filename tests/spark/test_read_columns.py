"""A Spark read given a schema of some message columns reads only those: the rows of a read of every column,
with and without pushed filters; a schema column that is not a message column, or has another type, errors."""

from __future__ import annotations

from typing import Any

import pytest

from rocketstore.errors import InvalidArgumentError
from rocketstore.spark import register
from rocketstore.spark.batch import schema_columns
from rocketstore.spark.schema import MESSAGE_SCHEMA
from tests.spark.spark_helpers import sample_messages, small_options

pytestmark = pytest.mark.spark


def _sorted(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted(tuple(repr(v) for v in row) for row in rows)


@pytest.mark.parametrize("pushdown", ["false", "true"])
def test_a_schema_of_some_columns_reads_those_columns_of_the_same_rows(spark, make_store, pushdown):
    register(spark)
    root = make_store("store", sample_messages(300, topics=("TopicA", "TopicB", "TopicC"), queues=3))
    options = {**small_options(), "filterPushdown": pushdown}

    def load(ddl: str | None = None) -> Any:  # one load() a query: pushed filters stay with the loaded frame
        reader = spark.read.format("rocketstore").options(**options)
        return (reader if ddl is None else reader.schema(ddl)).load(str(root))

    for ddl, columns in [("topic STRING", ["topic"]),
                         ("body BINARY, queueOffset BIGINT", ["body", "queueOffset"]),
                         ("tags STRING, storeSize INT, topic STRING", ["tags", "storeSize", "topic"])]:
        assert load(ddl).columns == columns
        got = load(ddl).collect()
        assert len(got) == 300
        assert _sorted(got) == _sorted(load().select(*columns).collect()), ddl
        if "topic" in columns:
            kept = load(ddl).where("topic = 'TopicB'").collect()
            assert len(kept) == 100
            assert _sorted(kept) == _sorted(load().where("topic = 'TopicB'").select(*columns).collect()), ddl


def test_a_schema_column_that_is_not_a_message_column_is_refused_naming_it():
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    assert schema_columns(MESSAGE_SCHEMA) is None
    assert schema_columns(StructType([StructField("topic", StringType())])) == ("topic",)
    with pytest.raises(InvalidArgumentError, match="schema column 'tpoic' is not a message column; the columns"):
        schema_columns(StructType([StructField("tpoic", StringType())]))
    with pytest.raises(InvalidArgumentError, match="schema column 'queueId' is int in the message schema, not bigint"):
        schema_columns(StructType([StructField("queueId", LongType())]))
