"""The geometry a store records in config/rocketstore.json (file sizes, index slots, store host, delay
levels), checked against the config an open is given, or inferred from the files of a store that
recorded none (one RocketMQ wrote)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from rocketstore.config import StoreConfig
from rocketstore.errors import StoreLayoutError
from rocketstore.format.store_dirs import COMMITLOG_DIR, CONFIG_DIR, STORE_CONFIG_FILE
from rocketstore.log.geometry import infer_geometry
from rocketstore.log.json_config import StateFileProblem, load_state
from rocketstore.storage import fs


def resolve_config(root: Path, config: StoreConfig | None, *, read_only: bool = False,
                    inferred: dict[str, int] | None = None) -> StoreConfig:
    """The config to open with: `config` checked against the geometry the store recorded, or that one;
    for a read-only open of a store that recorded none (one RocketMQ wrote), the geometry its files
    give (`inferred_geometry`). With `config` given, a recorded geometry that cannot be read is left to
    the open, which sets it aside (`set_aside_damaged_record`) and records `config`'s.

    Raises:
        StoreLayoutError: `config/` is not a directory, the recorded geometry differs from `config`,
            or, without `config`, it is not readable (not JSON, an unknown field, a value that is not a
            positive int).
    """
    if (root / CONFIG_DIR).exists() and not (root / CONFIG_DIR).is_dir():
        raise StoreLayoutError(f"{root / CONFIG_DIR} is a file, not the store's config directory")
    recorded_path = root / CONFIG_DIR / STORE_CONFIG_FILE
    recorded: dict[str, int] = {}
    levels: Any = None
    if recorded_path.exists():
        try:
            data = json.loads(recorded_path.read_text(encoding="utf-8"))
            recorded = recorded_geometry(data)
            levels = data.get("delay_levels")
        except (ValueError, AttributeError, KeyError) as exc:
            if config is None:
                raise StoreLayoutError(f"{recorded_path}: {exc} (give the store's geometry to open it: "
                                       "`rocketstore recover` with its file sizes)") from None
    if config is None:
        if not recorded_path.exists() and read_only:
            recorded = inferred_geometry(root) if inferred is None else inferred  # the caller's, if it read them
        resolved = StoreConfig().with_geometry(recorded)
        if isinstance(levels, str) and levels != resolved.delay_levels:  # the levels the store was written with
            try:
                resolved = dataclasses.replace(resolved, delay_levels=levels)
                resolved.delay_level_millis()
            except (ValueError, KeyError, IndexError):
                raise StoreLayoutError(f"{recorded_path}: delay_levels {levels!r} is not a list of delays "
                                       "(give the levels to open it)") from None
        return resolved
    if recorded:
        differing = {k: (v, getattr(config, k)) for k, v in recorded.items()
                     if k in config.geometry() and int(v) != getattr(config, k)}
        if differing:
            detail = ", ".join(f"{k}: store has {a}, config says {b}" for k, (a, b) in differing.items())
            raise StoreLayoutError(f"{root}: geometry differs from the store's ({detail})")
    return config


def inferred_geometry(root: Path) -> dict[str, int]:
    """The geometry a store that recorded none (one RocketMQ wrote) is read with: what its files answer
    without doubt (`log.geometry.infer_geometry`) where it differs from RocketMQ's defaults; nothing
    for a store that recorded its own."""
    if (root / CONFIG_DIR / STORE_CONFIG_FILE).exists() or not (root / COMMITLOG_DIR).is_dir():
        return {}
    defaults = StoreConfig()
    return {name: value for name, value in infer_geometry(root).items() if value != getattr(defaults, name)}


def recorded_geometry(data: Any) -> dict[str, int]:
    """The geometry of `config/rocketstore.json`'s content.

    Raises:
        ValueError: not an object, an unknown field, a value that is not a positive int.
    """
    if not isinstance(data, dict):
        raise ValueError("not valid JSON: not an object")
    recorded = data.get("geometry", {})
    if not isinstance(recorded, dict):
        raise ValueError("geometry is not an object")
    geometry_fields = StoreConfig().geometry()
    for name, value in recorded.items():
        if name not in geometry_fields:
            raise ValueError(f"unknown geometry field {name!r} (known: {', '.join(geometry_fields)})")
        if type(value) is not int or value <= 0:
            raise ValueError(f"geometry field {name!r} is {value!r}, not a positive int")
    return recorded


def set_aside_damaged_record(root: Path, quarantine: Path | None) -> StateFileProblem | None:
    """A `config/rocketstore.json` that cannot be read (the open was given the geometry): copied to
    `quarantine` and removed, so that the open records the given geometry (a read-only open, with no
    `quarantine`, only reports it).

    Raises:
        OSError: the copy failed (the file is then still in place).
    """
    path = root / CONFIG_DIR / STORE_CONFIG_FILE
    _, problem = load_state(root, path, recorded_geometry, dict, quarantine=quarantine)
    return problem


def record_geometry(root: Path, config: StoreConfig) -> None:
    """Record the geometry and store host once, and the delay levels whenever they differ from the
    recorded ones (a record without them stands for the default levels): readers that compute the
    delivery tags codes of delayed records (`rocketstore verify`) take the levels from here."""
    path = root / CONFIG_DIR / STORE_CONFIG_FILE
    data: dict[str, Any]
    if path.exists():
        data = json.loads(path.read_text(encoding="utf-8"))  # readable: a damaged one was set aside
        if data.get("delay_levels", StoreConfig().delay_levels) == config.delay_levels:
            return
        data["delay_levels"] = config.delay_levels
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"geometry": config.geometry(), "store_host": config.store_host, "delay_levels": config.delay_levels}
    fs.atomic_write(path, json.dumps(data, indent=2).encode("utf-8"), keep_backup=False)
