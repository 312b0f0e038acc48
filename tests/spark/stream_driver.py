"""A streaming query as its own driver process: rocketstore -> Parquet, until a stop file appears.

    python stream_driver.py STORE OUT CHECKPOINT STOP_FILE [--master local[2]]

Run by the live-broker tests, which kill it with SIGKILL in the middle and start it again from its
checkpoint. STORE may be a glob or a comma-separated list of stores. The query reads every message from
the earliest offset, one micro-batch a second.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("store")
    p.add_argument("out")
    p.add_argument("checkpoint")
    p.add_argument("stop_file")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--available-now", action="store_true", help="read what is there, then end")
    args = p.parse_args()
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master(args.master).appName("rocketstore-stream-driver")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    stream = (spark.readStream.format("rocketstore").option("startingOffsets", "earliest")
              .option("maxMessagesPerTrigger", "400").load(args.store))
    writer = (stream.writeStream.format("parquet").option("path", args.out)
              .option("checkpointLocation", args.checkpoint))
    if args.available_now:
        writer.trigger(availableNow=True).start().awaitTermination(300)
    else:
        query = writer.trigger(processingTime="1 second").start()
        while not os.path.exists(args.stop_file) and query.isActive:
            time.sleep(0.2)
        query.processAllAvailable()
        query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
