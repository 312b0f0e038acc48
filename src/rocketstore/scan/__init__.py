"""The read core: a read's partitions over RocketMQ stores (`plan`), the filters that prune them
(`filters`), and their rows as Arrow record batches (`columnar`, `records`). Spark's source
(`rocketstore.spark`) and `rocketstore.arrow` are adapters over it; it imports neither, nor pyspark.
Needs pyarrow and numpy (the `spark` extra)."""
