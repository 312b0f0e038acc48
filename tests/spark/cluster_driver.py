"""A Spark driver on `local-cluster[2,1,1024]`: a standalone master, a worker and two executor JVMs, each
with its own Python workers, so nothing can lean on state of the driver's process.

Run by tests/spark/test_local_cluster.py as `python cluster_driver.py SPEC.json OUT.json`; SPEC names the
stores and output folders, OUT receives what each job answered. One cluster serves every job (starting it
costs seconds).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any


def _session() -> Any:
    import pyspark

    os.environ["SPARK_HOME"] = os.path.dirname(pyspark.__file__)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local-cluster[2,1,1024]").appName("rocketstore-cluster-tests")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "4")
               .config("spark.executor.memory", "768m").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def _digest(rows: list[Any]) -> str:
    lines = sorted(f"{r.topic}\t{r.queueId}\t{r.queueOffset}\t{r.body.hex()}" for r in rows)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def main(spec_path: str, out_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    options: dict[str, str] = spec["options"]
    spark = _session()
    from rocketstore.spark.jobs import export, rebuild

    out: dict[str, Any] = {"driver_pid": os.getpid()}
    out["executor_pids"] = sorted(set(spark.sparkContext.parallelize(range(8), 8)
                                      .map(lambda _: os.getpid()).collect()))

    rows = spark.read.format("rocketstore").options(**options).load(spec["store"]).collect()
    out["read"] = {"count": len(rows), "digest": _digest(rows)}

    from pyspark.sql.types import ArrayType, IntegerType, StringType, StructField, StructType

    schema = StructType([StructField("topic", StringType()), StructField("body", StringType()),
                         StructField("queueId", IntegerType()), StructField("keys", ArrayType(StringType()))])
    data = [(f"W{i % 2}", f"written-{i}", i % 3, [f"w-{i}"]) for i in range(spec["write_rows"])]
    (spark.createDataFrame(data, schema).repartition(4).write.format("rocketstore").options(**options)
     .mode("append").save(spec["write_store"]))

    report = rebuild(spark, spec["rebuild_store"], None)
    out["rebuild"] = {"queues": report.queues, "queue_entries": report.queue_entries,
                      "index_files": report.index_files}

    export(spark, spec["store"], spec["export_out"], options=options)

    stream = (spark.readStream.format("rocketstore").options(**options).option("startingOffsets", "earliest")
              .load(spec["store"]))
    query = (stream.writeStream.format("parquet").option("path", spec["stream_out"])
             .option("checkpointLocation", spec["stream_checkpoint"]).trigger(availableNow=True).start())
    query.awaitTermination(300)
    spark.stop()
    Path(out_path).write_text(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
