"""The row schema of a RocketMQ message in Spark: `rocketstore.scan.records`' Arrow schema in Spark's types.

Column names are camelCase, as in RocketMQ's own Spark connector and the golden `expected.json`.
Readers yield `pyarrow.RecordBatch`es (2-3x faster than tuples through Spark's Python worker), built
column-wise by `rocketstore.scan.columnar.record_batch`; `to_record_batch` is the row-by-row reference
it falls back to.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from rocketstore.scan.records import ARROW_SCHEMA, COLUMNS, FIELDS, to_record_batch

__all__ = [
    "ARROW_SCHEMA",
    "COLUMNS",
    "MESSAGE_SCHEMA",
    "to_record_batch",
]

_SPARK_TYPES: dict[str, Any] = {
    "keys": ArrayType(StringType()),
    "properties": MapType(StringType(), StringType()),
    "body": BinaryType(),
}


def _spark_type(name: str, arrow_type: Any) -> Any:
    if name in _SPARK_TYPES:
        return _SPARK_TYPES[name]
    return {"string": StringType(), "int32": IntegerType(), "int64": LongType()}[str(arrow_type)]


MESSAGE_SCHEMA = StructType(
    [StructField(name, _spark_type(name, arrow_type), True) for name, arrow_type, _ in FIELDS]
    + [StructField("broker", StringType(), True)]
)
"""The Spark schema of `spark.read.format("rocketstore")`."""
