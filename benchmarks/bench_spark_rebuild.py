"""Rebuild and export throughput: consume queues and index rebuilt from the commitlog of a store of at
least 1 GiB, and every message exported to Parquet by topic.

Measured in the same run, on the same store:

* `spark rebuild`      - `rocketstore.spark.jobs.rebuild` (parallel dispatch, per-queue writes, index
                         files built per key range);
* `one process`        - the same work without Spark: `consumequeue/` and `index/` deleted, then one
                         writable `MessageStore.open`, whose start-up catch-up dispatches every record
                         (the store's own rebuild);
* `binaryFile ceiling` - `spark.read.format("binaryFile")` over the commitlog files (raw I/O).

After each rebuild the consume-queue files are compared byte for byte with the ones the store wrote
when it was built, and the index files by content; a mismatch stops the script.

Export, on the same store and in the same rounds:

* `spark export`            - `rocketstore.spark.jobs.export` to Parquet partitioned by topic;
* `one process export`      - the same without Spark: one read-only open, `scan()` into the source's
                              Arrow batches (`spark.columnar.batches`), `pyarrow.parquet.write_to_dataset`
                              partitioned by topic.

Both outputs are read back and must hold every message.

    python benchmarks/bench_spark_rebuild.py                       # builds ~1.1 GiB in a temp dir
    python benchmarks/bench_spark_rebuild.py --index-max-entries 400000 --index-hash-slots 100000
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_spark_read as b
from rocketstore import MessageStore, StoreConfig


def digest(root: Path) -> tuple[dict[str, str], list[str]]:
    """sha256 of every consume-queue file by path, and of every index file in name order."""
    queues = {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted((root / "consumequeue").rglob("*"))
        if p.is_file()
    }
    index = [hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((root / "index").iterdir())]
    return queues, index


def drop_derived(root: Path) -> None:
    shutil.rmtree(root / "consumequeue", ignore_errors=True)
    shutil.rmtree(root / "index", ignore_errors=True)


def one_process_rebuild(root: Path, config: StoreConfig) -> None:
    with MessageStore.open(root, config):
        pass


def spark_rebuild(spark: Any, root: Path, config: StoreConfig) -> None:
    from rocketstore.spark.jobs import rebuild

    print(rebuild(spark, root, config), file=sys.stderr)


def spark_export(spark: Any, root: Path, out: Path) -> None:
    from rocketstore.spark.jobs import export

    shutil.rmtree(out, ignore_errors=True)
    export(spark, root, out, "parquet", ("topic",))


def one_process_export(root: Path, out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rocketstore.spark.columnar import batches

    shutil.rmtree(out, ignore_errors=True)
    with MessageStore.open(root, read_only=True) as store:
        for batch in batches(store.scan(), str(root)):
            pq.write_to_dataset(pa.Table.from_batches([batch]), str(out), partition_cols=["topic"])


def exported_rows(out: Path) -> int:
    import pyarrow.parquet as pq

    return int(pq.ParquetDataset(str(out)).read(columns=["queueOffset"]).num_rows)


def main() -> None:
    p = b.base_parser(__doc__.splitlines()[0])
    p.add_argument("--index-hash-slots", type=int, default=None)
    p.add_argument("--index-max-entries", type=int, default=None)
    args = p.parse_args()
    base = b.bench_config

    def config_of(a: Any) -> StoreConfig:
        cfg = base(a)
        extra = {k: v for k, v in (("index_hash_slots", a.index_hash_slots),
                                   ("index_max_entries", a.index_max_entries)) if v is not None}
        return StoreConfig(**{**cfg.geometry(), **extra})

    b.bench_config = config_of  # the built store takes the index geometry too

    def run(root: Path, notes: list[str]) -> None:
        with MessageStore.open(root, read_only=True) as store:
            config = store.config
        nbytes, messages = b.store_extent(root)
        reference = digest(root)
        spark = b.spark_session(args.master)
        b.warm_up(spark, root)
        results: dict[str, list[float]] = {"spark rebuild": [], "one process (no Spark)": [], "binaryFile ceiling": [],
                                           "spark export": [], "one process export": []}
        exported = Path(tempfile.mkdtemp(prefix="rsbench-export-", dir=args.dir)) / "out"
        for _ in range(args.repeat):
            drop_derived(root)
            results["spark rebuild"].append(b.timed(lambda: spark_rebuild(spark, root, config)))
            if digest(root) != reference:
                raise SystemExit("spark rebuild differs from the files the store wrote")
            drop_derived(root)
            results["one process (no Spark)"].append(b.timed(lambda: one_process_rebuild(root, config)))
            if digest(root) != reference:
                raise SystemExit("the store's own rebuild differs from the files it wrote")
            results["binaryFile ceiling"].append(b.timed(lambda: b.binary_file_ceiling(spark, root)))
            results["spark export"].append(b.timed(lambda: spark_export(spark, root, exported)))
            if exported_rows(exported) != messages:
                raise SystemExit("spark export lost or added messages")
            results["one process export"].append(b.timed(lambda: one_process_export(root, exported)))
            if exported_rows(exported) != messages:
                raise SystemExit("the one-process export lost or added messages")
        shutil.rmtree(exported.parent, ignore_errors=True)
        spark.stop()
        geometry = (f"index files: {config.index_hash_slots} slots x {config.index_max_entries} entries; "
                    f"{args.master}; outputs identical to the store's own files")
        text = b.report("bench_spark_rebuild", list(results.items()), nbytes, messages, [*notes, geometry])
        print(text)
        if args.save:
            b.save("bench_spark_rebuild", text)

    b.with_store(args, run)


if __name__ == "__main__":
    main()
