"""A Spark Connect client: `SparkSession.builder.remote("local[2]")` starts a local Spark Connect server
and the client talks to it over gRPC only (no JVM on the client's side, no sparkContext), as a client of
a remote Connect server does.

Run by tests/spark/test_connect.py as `python connect_driver.py STORE NEW_STORE EXPORT OUT.json`; OUT
receives what each step answered.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def _rows(df: Any) -> list[list[Any]]:
    return sorted([r.topic, r.queueId, r.queueOffset, r.body.decode(), r.tags, list(r.keys)] for r in df.collect())


def main(store: str, new_store: str, export_dir: str, out_path: str) -> None:
    os.environ["PYSPARK_PYTHON"] = sys.executable  # the server's Python workers import rocketstore
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    from rocketstore.spark import RocketStoreDataSource, jobs

    spark = SparkSession.builder.remote("local[2]").getOrCreate()
    out: dict[str, Any] = {"session": type(spark).__module__}
    spark.dataSource.register(RocketStoreDataSource)  # ships the class to the server
    df = spark.read.format("rocketstore").load(store)
    out["read"] = _rows(df)
    df.select("topic", "queueId", "body", "tags", "keys").write.format("rocketstore").mode("append").save(new_store)
    jobs.export(spark, store, export_dir, "parquet", ("topic",))
    out["export"] = sorted([r.topic, r.queueOffset] for r in spark.read.parquet(export_dir).collect())
    query = (spark.readStream.format("rocketstore").option("startingOffsets", "earliest").load(store)
             .writeStream.format("memory").queryName("streamed").trigger(availableNow=True).start())
    query.awaitTermination(120)
    out["stream"] = spark.sql("select count(*) as n from streamed").collect()[0].n
    try:
        jobs.rebuild(spark, store)
        out["rebuild"] = "ran"
    except Exception as exc:  # the answer to record: a clear error naming Spark Connect
        out["rebuild"] = f"{type(exc).__name__}: {exc}"
    spark.stop()
    Path(out_path).write_text(json.dumps(out))


if __name__ == "__main__":
    main(*sys.argv[1:5])
