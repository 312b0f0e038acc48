"""Spark looks up Python data sources in top-level `pyspark_*` modules with a `DefaultSource`.

With rocketstore installed, `spark.read.format("rocketstore")` works without calling
`rocketstore.spark.register(spark)` first.
"""

from rocketstore.spark.source import RocketStoreDataSource as DefaultSource

__all__ = ["DefaultSource"]
