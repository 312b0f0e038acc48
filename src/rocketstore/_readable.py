"""Sizes and durations as a person reads them, for the summaries of the command line, the jobs and the
report."""

from __future__ import annotations


def human_bytes(count: int) -> str:
    """`512 B`, `10.2 KiB`, `3.0 MiB`, `1.2 GiB`."""
    if count < 1024:
        return f"{count} B"
    size = float(count)
    for unit in ("KiB", "MiB"):
        size /= 1024
        if size < 1024:
            return f"{size:.1f} {unit}"
    return f"{size / 1024:.1f} GiB"


def human_seconds(seconds: float) -> str:
    """`0.4 s`, `38 s`, `2 min 05 s`."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"
