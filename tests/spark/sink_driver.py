"""A streaming query as its own driver process: a rocketstore source -> the rocketstore sink through a
broker (option `broker`), until the source's messages are all written (`availableNow`).

    python sink_driver.py SOURCE TARGET BROKER STAGING CHECKPOINT [--per-trigger N] [--master local[2]]

Run by tests/spark/test_broker_sink.py, which kills it with SIGKILL in the middle of a micro-batch and
starts it again from its checkpoint.
"""

from __future__ import annotations

import argparse
import os
import sys


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("source")
    p.add_argument("target")
    p.add_argument("broker")
    p.add_argument("staging")
    p.add_argument("checkpoint")
    p.add_argument("--per-trigger", default="1000")
    p.add_argument("--sink-id", default="copy")
    p.add_argument("--master", default="local[2]")
    args = p.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("rocketstore-sink-driver")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    stream = (spark.readStream.format("rocketstore").option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", args.per_trigger).load(args.source)
              .select("topic", "queueId", "tags", "keys", "properties", "body", "flag"))
    query = (stream.writeStream.format("rocketstore").option("broker", args.broker)
             .option("stagingDir", args.staging).option("sinkId", args.sink_id)
             .option("checkpointLocation", args.checkpoint).trigger(availableNow=True).start(args.target))
    query.awaitTermination(300)
    spark.stop()


if __name__ == "__main__":
    main()
