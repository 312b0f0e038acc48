"""Spark adapter: RocketMQ stores as a PySpark data source (`format("rocketstore")`) and Spark jobs.

    from rocketstore.spark import register
    register(spark)
    df = spark.read.format("rocketstore").load("/data/store")

Needs the `spark` extra (pyspark, pyarrow). The core package never imports this one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocketstore.spark.schema import MESSAGE_SCHEMA
from rocketstore.spark.source import RocketStoreDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MESSAGE_SCHEMA", "RocketStoreDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the `rocketstore` format with `spark` (also found automatically through the
    top-level `pyspark_rocketstore` package when it is importable)."""
    spark.dataSource.register(RocketStoreDataSource)
