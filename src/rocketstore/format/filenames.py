"""File names: 20-digit zero-padded start offsets, and index files' yyyyMMddHHmmssSSS creation times."""

from __future__ import annotations

import time

OFFSET_NAME_DIGITS = 20


def offset_to_name(offset: int) -> str:
    """`00000000001073741824` for 1073741824."""
    return f"{offset:0{OFFSET_NAME_DIGITS}d}"


def name_to_offset(name: str) -> int | None:
    """The start offset a file name stands for, None when it is not an offset name."""
    if len(name) != OFFSET_NAME_DIGITS or not name.isdigit():
        return None
    return int(name)


def index_file_name(timestamp_ms: int) -> str:
    """Index file name for a creation time, in the local time zone as the JVM names them."""
    seconds, millis = divmod(timestamp_ms, 1000)
    return time.strftime("%Y%m%d%H%M%S", time.localtime(seconds)) + f"{millis:03d}"
