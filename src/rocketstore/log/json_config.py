"""RocketMQ's broker JSON files (`config/*.json`): a lenient reader and a fastjson-style writer.

RocketMQ writes them with fastjson's pretty printer: TAB indentation, no space after the colon, bean
fields in alphabetical order, integer map keys unquoted and kept on the opening line
(`{0:250,1:251` newline `}`). Readers must accept that non-strict JSON; ours also accepts plain JSON.
Files are replaced atomically, the previous content kept in `<f>.bak`, which the reader falls back to.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rocketstore.format.json_text import quote_integer_keys
from rocketstore.storage import fs

CONFIG_DIR = "config"


def loads_lenient(text: str) -> Any:
    """Parse RocketMQ's JSON dialect.

    Raises:
        ValueError: not parseable.
    """
    return json.loads(quote_integer_keys(text))


def read_json(path: Path) -> dict[str, Any] | None:
    """The content of `path`, or of `<path>.bak` when the file is missing, empty or broken."""
    for candidate in (path, path.with_name(path.name + ".bak")):
        try:
            text = candidate.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            continue
        if not text.strip():
            continue
        try:
            data = loads_lenient(text)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def _dump(value: Any, depth: int) -> str:
    if isinstance(value, dict):
        if not value:
            return "{}"
        if all(isinstance(k, int) for k in value):
            inner = ",".join(f"{k}:{_dump(v, depth + 1)}" for k, v in value.items())
            return "{" + inner + "\n" + "\t" * depth + "}"
        pad = "\t" * (depth + 1)
        inner = ",\n".join(f"{pad}{json.dumps(str(k), ensure_ascii=False)}:{_dump(v, depth + 1)}"
                           for k, v in value.items())
        return "{\n" + inner + "\n" + "\t" * depth + "}"
    if isinstance(value, (list, tuple)):
        if not value:
            return "[]"
        pad = "\t" * (depth + 1)
        inner = ",\n".join(pad + _dump(v, depth + 1) for v in value)
        return "[\n" + inner + "\n" + "\t" * depth + "]"
    return json.dumps(value, ensure_ascii=False)


def dumps_fastjson(value: Any) -> str:
    """Serialise like fastjson's pretty printer (callers sort bean fields alphabetically)."""
    return _dump(value, 0)


def write_json(path: Path, value: Any) -> None:
    """Replace `path` atomically with the fastjson-style text of `value`, keeping a `.bak`.

    Raises:
        OSError: the file could not be written; the old one is still in place.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fs.atomic_write(path, dumps_fastjson(value).encode("utf-8"))
