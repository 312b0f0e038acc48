"""`recover`, `rebuild` and `export`: the commands that repair or copy a store."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import click

from rocketstore.cli._errors import ProblemsFound, UsageProblem
from rocketstore.cli._output import show_fields
from rocketstore.cli._spark import master_option, show_result, spark_session
from rocketstore.cli._state import check_store_dir, global_options, open_store, option, state, store_argument


def _recovery_document(report: Any, *, dry_run: bool) -> dict[str, Any]:
    document = dict(report.to_dict())
    document["clean"] = report.clean
    document["dry_run"] = dry_run
    return document


def _recover_copy(store: Path) -> dict[str, Any]:
    """Recover a scratch copy of the store and report what recovery did there; the store is untouched."""
    with tempfile.TemporaryDirectory(prefix="rocketstore-recover-") as scratch:
        copy = Path(scratch) / "store"
        shutil.copytree(store, copy, ignore=shutil.ignore_patterns("lock"))
        with open_store(copy, read_only=False, repair=True) as opened:
            document = _recovery_document(opened.recovery, dry_run=True)
    for name in ("quarantined", "queues_rebuilt", "odd_files"):
        for moved in document.get(name, ()):
            moved["saved_to"] = str(store / Path(moved["saved_to"]).relative_to(copy))  # where it would go
    return document


@click.command()
@store_argument
@click.option("--dry-run", is_flag=True,
              help="Run recovery on a scratch copy (in the temp folder) and report; STORE is not touched.")
@global_options
def recover(store: Path, dry_run: bool) -> None:
    """Open STORE for writing so that recovery runs, and print its RecoveryReport: mode, where it started
    and ended, what was truncated, and what was moved aside to quarantine/. Exit 1 if anything was.
    (mqadmin has no equivalent: RocketMQ recovers when the broker starts.)

    Takes the store's lock: it fails while a broker or another writer has the store open.
    """
    check_store_dir(store)
    if dry_run:
        document = _recover_copy(store)
    else:
        with open_store(store, read_only=False, repair=True) as opened:
            document = _recovery_document(opened.recovery, dry_run=False)
    show_fields(document, title="recovery" + (" (dry run on a copy)" if dry_run else ""))
    if not document["clean"]:
        moved = sum(len(document.get(name, ())) for name in ("quarantined", "commitlog_files_removed", "odd_files"))
        rebuilt = len(document.get("queues_rebuilt", ()))
        outcome = "would move" if dry_run else "moved"
        where = "dry run: the store was not changed" if dry_run else f"see {store / 'quarantine'}"
        verb = "would rebuild" if dry_run else "rebuilt"
        queues = f" and {verb} {rebuilt} damaged consume queue(s)" if rebuilt else ""
        lost = f"; {'; '.join(document['lost'])}" if document.get("lost") else ""
        raise ProblemsFound(f"recovery {outcome} {moved} range(s) or file(s) aside{queues}{lost} ({where})")


@click.command()
@store_argument
@master_option
@global_options
def rebuild(store: Path, master: str | None) -> None:
    """Rebuild consumequeue/ and index/ from the commitlog as a Spark job. Takes the store's lock.
    (mqadmin has no equivalent: RocketMQ rebuilds only what recovery finds missing.)
    """
    from rocketstore.cli._geometry import geometry_for
    from rocketstore.spark.jobs import rebuild as rebuild_job
    from rocketstore.spark.progress import Progress

    check_store_dir(store)
    config = geometry_for(store, read_only=False)  # refuses a geometry the store's files contradict
    with Progress("rebuild") as progress, spark_session("rocketstore-rebuild", master=master,
                                                        debug=state().debug, progress=progress) as spark:
        report = rebuild_job(spark, store, config, progress=progress.stage)
    show_result({**report.to_dict(), "store": str(store)}, report.describe(), title="rebuild")


def _partition_columns(values: tuple[str, ...]) -> tuple[str, ...]:
    columns = tuple(c.strip() for v in values for c in v.split(",") if c.strip())
    return () if columns in ((), ("none",)) else columns


@click.command()
@store_argument
@click.argument("out", type=click.Path(path_type=Path))
@click.option("--format", "file_format", type=click.Choice(["parquet", "json", "orc"]), default="parquet",
              show_default=True, help="Output file format.")
@click.option("--partition-by", multiple=True, default=("topic",), show_default=True,
              help="Partition columns (comma list; 'none' for none).")
@option("--topic", "topics", aliases=("--topics",), default=None, help="Only these topics (comma list).")
@click.option("--overwrite", is_flag=True, help="Replace OUT if it exists.")
@master_option
@global_options
def export(store: Path, out: Path, file_format: str, partition_by: tuple[str, ...], topics: str | None,
           overwrite: bool, master: str | None) -> None:
    """Write every message of STORE as Parquet (or JSON, ORC) files under OUT, a Spark job.
    Columns are the Spark source's (topic, queueId, queueOffset, commitLogOffset, ..., body).
    (mqadmin has no equivalent.)
    """
    from rocketstore.spark.jobs import export as export_job
    from rocketstore.spark.progress import Progress

    check_store_dir(store)
    if out.exists() and not overwrite:
        raise UsageProblem(f"{out} exists: choose another OUT or give --overwrite")
    columns = _partition_columns(partition_by)
    options = _read_options(store, topics)
    with Progress("export") as progress, spark_session("rocketstore-export", master=master,
                                                       debug=state().debug, progress=progress) as spark:
        report = export_job(spark, store, out, file_format, columns, mode="overwrite" if overwrite else "error",
                            options=options, progress=progress.stage)
    show_result({**report.to_dict(), "store": str(store), "out": str(out)}, report.describe(), title="export")


def _read_options(store: Path, topics: str | None) -> dict[str, str]:
    """Options of the `rocketstore` Spark source from the geometry (given, or read off a RocketMQ store's
    files) and --topic."""
    from rocketstore.cli._geometry import geometry_for

    options: dict[str, str] = {}
    config = geometry_for(store, read_only=True)
    if config is not None:
        names = {"commitlog_file_size": "commitlogFileSize", "consume_queue_file_entries": "consumeQueueFileEntries",
                 "index_hash_slots": "indexHashSlots", "index_max_entries": "indexMaxEntries"}
        options.update({theirs: str(getattr(config, ours)) for ours, theirs in names.items()})
    if topics:
        options["topics"] = topics
    return options


COMMANDS = (recover, rebuild, export)
