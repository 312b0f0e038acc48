"""The retention a store's settings apply, said in RocketMQ's names: what `serve` logs at start, and the
check of its `--delete-when` flag. The store's cleaner does the deleting; this module only describes it."""

from __future__ import annotations

from rocketstore.config import StoreConfig


def delete_hours(text: str) -> list[int]:
    """`"04"` or `"03;04"` (RocketMQ's deleteWhen) -> the local hours it names, sorted.

    Raises:
        ValueError: a part that is not an hour 0..23 of ASCII digits, or no hour at all.
    """
    hours = set()
    for part in text.split(";"):
        part = part.strip()
        if not part:
            continue
        if not (part.isascii() and part.isdigit() and len(part) <= 2 and 0 <= int(part) <= 23):
            raise ValueError(f"{part!r} is not an hour 00..23")
        hours.add(int(part))
    if not hours:
        raise ValueError("no hour given")
    return sorted(hours)


def describe_retention(config: StoreConfig, *, read_only: bool = False) -> str:
    """One line saying which files the retention of a store opened with `config` deletes (read-only: none)."""
    if read_only:
        return "retention: off (the store is open read-only: no file is deleted or written)"
    try:
        hours = ";".join(f"{hour:02d}" for hour in delete_hours(config.delete_when))
    except ValueError:
        hours = repr(config.delete_when)
    return (f"retention: commitlog files whose newest message is older than fileReservedTime="
            f"{config.file_reserved_hours} h are deleted at deleteWhen={hours} (local hour), or at any hour while "
            f"the disk is more than diskMaxUsedSpaceRatio={100 * config.disk_max_used_ratio:.0f}% used; every file "
            f"but the newest above diskSpaceCleanForciblyRatio={config.disk_clean_forcibly_ratio:g}; puts are "
            f"refused above diskSpaceWarningLevelRatio={config.disk_full_ratio:g}; consume-queue and index files "
            "follow their messages")
