"""RocketStoreDataSource: the `rocketstore` format of Spark's Python Data Source API.

`name()` is `"rocketstore"`. The data source parses its options once on the driver into frozen
dataclasses (`rocketstore.spark.options`) and hands them to readers and writers, which hold nothing
else and so pickle to the executors.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from rocketstore.spark.batch import RocketStoreBatchReader, RocketStorePushdownReader, schema_columns
from rocketstore.spark.options import ReadOptions, StreamOptions, WriteOptions
from rocketstore.spark.schema import MESSAGE_SCHEMA
from rocketstore.spark.streaming import RocketStoreStreamReader
from rocketstore.spark.writer import RocketStoreStreamWriter, RocketStoreWriter

__all__ = ["RocketStoreDataSource"]


class RocketStoreDataSource(DataSource):
    """RocketMQ store directories as a Spark data source (batch and streaming, read and write).

    >>> spark.read.format("rocketstore").option("topics", "TopicA").load("/data/store")  # doctest: +SKIP
    """

    @classmethod
    def name(cls) -> str:
        """The short name used with `format(...)`."""
        return "rocketstore"

    def schema(self) -> StructType:
        """The message schema (`rocketstore.spark.schema.MESSAGE_SCHEMA`)."""
        return MESSAGE_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch reader; with option `filterPushdown=true` one that prunes by the filters Spark pushes. A
        schema given to the read (`.schema("topic STRING, queueId INT")`) of some of the message
        schema's columns makes it read only those.

        Raises:
            ValueError: a missing or malformed option, or a given schema's column that is not one of the
                message schema or has another type, naming it.
        """
        options = ReadOptions.parse(self.options)
        columns = schema_columns(schema)
        if options.filter_pushdown:
            return RocketStorePushdownReader(options, columns)
        return RocketStoreBatchReader(options, columns)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Streaming reader with per-queue offsets.

        Raises:
            ValueError: a missing or malformed option, naming it.
        """
        return RocketStoreStreamReader(StreamOptions.parse(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """Batch writer (append only: a message store cannot be overwritten).

        Raises:
            ValueError: mode overwrite, or a missing or malformed option.
        """
        if overwrite:
            raise ValueError("Option 'mode': a store only takes appends; use mode('append').")
        return RocketStoreWriter(WriteOptions.parse(self.options))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Streaming sink (append output mode).

        Raises:
            ValueError: complete output mode, or a missing or malformed option.
        """
        if overwrite:
            raise ValueError("Option 'outputMode': a store only takes appends; use outputMode('append').")
        return RocketStoreStreamWriter(WriteOptions.parse(self.options))
