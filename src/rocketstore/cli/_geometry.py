"""Which geometry a command opens a store with: the one given (`--config`, the geometry flags), the one
the store recorded (`config/rocketstore.json`), or, for a store RocketMQ wrote, the one its files give.

A store that recorded its geometry checks what the options say against it when it opens. For a store
that recorded nothing, what the files answer without doubt (`rocketstore.log.geometry.infer_geometry`:
the commitlog and consume-queue file sizes; the index file size only at RocketMQ's ratio of 4 entries
per hash slot) is checked here, before the store is opened:

* an option that contradicts the commitlog or consume-queue file size is refused in one line;
* a read-only command takes the fields no option gave from the files, and says so on stderr;
* a writable command (it records the geometry for good) takes nothing from the files: a file size the
  options leave at a value the files contradict is refused, naming the flag to give. Index files the
  options do not fit are refused too, since a writable open would set them aside and rebuild them.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from rocketstore.cli._errors import UsageProblem
from rocketstore.cli._state import GEOMETRY_FLAGS, state

if TYPE_CHECKING:
    from rocketstore import StoreConfig

_FLAG_OF = {name: flag for flag, name in GEOMETRY_FLAGS.items()}
# Geometry field -> how the note on stderr says what the files gave.
_SAID = {
    "commitlog_file_size": "commitlog files of {} bytes",
    "consume_queue_file_entries": "consume-queue files of {} entries",
    "index_hash_slots": "index files of {} hash slots",
    "index_max_entries": "{} entries (RocketMQ's ratio of 4 entries per slot)",
}
_CERTAIN = ("commitlog_file_size", "consume_queue_file_entries")  # the file size alone gives them


def geometry_for(path: Path, *, read_only: bool) -> StoreConfig | None:
    """The StoreConfig to open the store at `path` with; None to let the store use what it recorded (or
    its defaults). Prints a note on stderr when a read-only command took geometry from the files.

    Raises:
        UsageProblem: the config file cannot be read, an option contradicts the store's files, or (for a
            writable open) the options leave a geometry the files contradict.
    """
    from rocketstore import StoreConfig
    from rocketstore.format.store_dirs import STORE_CONFIG_FILE
    from rocketstore.store.files import infer_geometry

    cli = state()
    given = cli.store_config()
    if (path / "config" / STORE_CONFIG_FILE).exists() or not (path / "commitlog").is_dir():
        return given  # the store checks the options against the geometry it recorded
    inferred = infer_geometry(path)
    explicit = cli.explicit_geometry()
    for name in _CERTAIN:
        if name in explicit and name in inferred and explicit[name][0] != inferred[name]:
            raise UsageProblem(f"{explicit[name][1]} does not match the geometry of the store's files: "
                               f"{_SAID[name].format(inferred[name])}")
    base = given or StoreConfig()
    if not read_only:
        _check_writable(path, base, inferred, explicit)
        return given
    taken = {name: value for name, value in inferred.items() if name not in explicit}
    if "index_hash_slots" in explicit or "index_max_entries" in explicit:  # an index pair is taken whole
        taken.pop("index_hash_slots", None)
        taken.pop("index_max_entries", None)
    config = base.with_geometry(taken)
    said = [_SAID[name].format(value) for name, value in taken.items() if value != getattr(StoreConfig(), name)]
    if said:
        click.echo(f"rocketstore: note: geometry inferred from the files: {', '.join(said)}", err=True)
    _note_index_default(path, config, inferred, explicit)
    return None if given is None and config == StoreConfig() else config


def _check_writable(path: Path, config: StoreConfig, inferred: dict[str, int],
                    explicit: dict[str, tuple[int, str]]) -> None:
    """Refuse a writable open whose geometry the store's files contradict, before it moves anything.

    Raises:
        UsageProblem: naming the flags (and values) the store needs.
    """
    wrong = [name for name in GEOMETRY_FLAGS.values()
             if name in inferred and name not in explicit and getattr(config, name) != inferred[name]]
    if wrong or not _index_fits(path, config):
        wanted = " ".join(f"{_FLAG_OF[name]} {inferred[name]}" for name in wrong) or \
            f"{_FLAG_OF['index_hash_slots']} N {_FLAG_OF['index_max_entries']} M"
        raise UsageProblem(f"the store's files do not have the geometry this command would record: give {wanted} "
                           "(or --config with its broker.conf)")


def _index_sizes(path: Path) -> set[int]:
    index = path / "index"
    return {p.stat().st_size for p in index.iterdir() if p.is_file() and p.name.isdigit()} if index.is_dir() else set()


def _index_fits(path: Path, config: StoreConfig) -> bool:
    from rocketstore.format.index import index_file_size

    sizes = _index_sizes(path) - {0}
    return not sizes or sizes == {index_file_size(config.index_hash_slots, config.index_max_entries)}


def _note_index_default(path: Path, config: StoreConfig, inferred: dict[str, int],
                        explicit: dict[str, tuple[int, str]]) -> None:
    """Say so when the index files fit no geometry the files answer and the options gave none."""
    if "index_hash_slots" in inferred or "index_hash_slots" in explicit or "index_max_entries" in explicit:
        return
    if not _index_fits(path, config):
        click.echo("rocketstore: note: the index files' size (40 + 4 x slots + 20 x entries bytes) gives no "
                   f"geometry at 4 entries per slot: kept {config.index_hash_slots} slots x "
                   f"{config.index_max_entries} entries; give --index-hash-slots and --index-max-entries", err=True)
