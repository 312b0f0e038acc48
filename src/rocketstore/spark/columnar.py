"""Whole records -> Arrow record batches, column by column: `rocketstore.scan.columnar`, shared with
`rocketstore.arrow`."""

from rocketstore.scan.columnar import BATCH_BYTES, BATCH_ROWS, batches, record_batch, run_batches

__all__ = ["BATCH_BYTES", "BATCH_ROWS", "batches", "record_batch", "run_batches"]
