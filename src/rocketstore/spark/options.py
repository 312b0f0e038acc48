"""Spark string options -> frozen option dataclasses: `rocketstore.scan.options`, where the read core
parses them for Spark and for `rocketstore.arrow` alike."""

from rocketstore.scan.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    ReadOptions,
    StreamOptions,
    WriteOptions,
    geometry_config,
    resolve_paths,
)

__all__ = ["EARLIEST", "LATEST", "OffsetSpec", "ReadOptions", "StreamOptions", "WriteOptions", "geometry_config",
           "resolve_paths"]
