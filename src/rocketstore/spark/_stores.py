"""Opening stores from Spark code: `rocketstore.scan.stores`, shared with `rocketstore.arrow`."""

from rocketstore.scan.stores import (
    LogReader,
    commitlog_extent,
    make_config,
    open_read_only,
    record_starts,
    store_config,
)

__all__ = ["LogReader", "commitlog_extent", "make_config", "open_read_only", "record_starts", "store_config"]
