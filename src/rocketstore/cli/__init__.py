"""The `rocketstore` command line: query, inspect, verify, rebuild, export and report on a store.

An adapter over the library (layer: adapters, beside `spark` and `broker`). Every command opens the
store through `rocketstore.MessageStore` (read-only for anything that only reads) or calls a job of
`rocketstore.spark.jobs` / `rocketstore.report`; no store logic lives here. The entry point is
`rocketstore.cli.main.main`.
"""
