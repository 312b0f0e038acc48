"""RocketMQ's broker JSON files (`config/*.json`): a lenient reader and a fastjson-style writer.

RocketMQ writes them with fastjson's pretty printer: TAB indentation, no space after the colon, bean
fields in alphabetical order, integer map keys unquoted and kept on the opening line
(`{0:250,1:251` newline `}`). Readers must accept that non-strict JSON; ours also accepts plain JSON.
Files are replaced atomically, the previous content kept in `<f>.bak`.

A file that does not parse, or whose values do not fit the Java types RocketMQ reads them into, is
damage (`load_state`): its content comes from `<f>.bak` when that one is good, else it starts empty;
a writable open copies the damaged bytes to the quarantine folder first and puts the good copy in
place, so that the next write cannot make a backup of the damage. Each case is a `StateFileProblem`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from rocketstore.format.json_text import quote_integer_keys
from rocketstore.format.layout import JAVA_INT_MAX as JAVA_INT_MAX  # re-exported
from rocketstore.format.layout import JAVA_LONG_MAX
from rocketstore.format.store_dirs import CONFIG_DIR  # noqa: F401 (re-exported)
from rocketstore.storage import fs

_T = TypeVar("_T")



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


@dataclass
class StateFileProblem:
    """A damaged state file and what the store used instead."""

    file: str  # relative to the store root, e.g. config/consumerOffset.json
    problem: str
    used: str  # "<file>.bak" or "nothing (empty)"
    saved_to: str | None  # the damaged bytes' copy; None when the open wrote nothing (read-only)


def java_int(value: Any, what: str, maximum: int = JAVA_LONG_MAX) -> int:
    """`value` as a non-negative integer a Java long (or int, with `maximum`) holds; JSON text of one too.

    Raises:
        ValueError: anything else, naming `what`.
    """
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if type(value) is not int or not 0 <= value <= maximum:
        raise ValueError(f"{what} is {value!r}, not an integer in [0, {maximum}]")
    return value


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _parsed(path: Path, parse: Callable[[dict[str, Any]], _T]) -> _T | None:
    """`parse` of the file's JSON object; None when the file is missing.

    Raises:
        ValueError: the file is empty, not JSON, not an object, or `parse` refused its values.
    """
    text = _read_text(path)
    if text is None:
        return None
    if not text.strip():
        raise ValueError("the file is empty")
    data = loads_lenient(text)
    if not isinstance(data, dict):
        raise ValueError(f"a JSON {type(data).__name__}, not an object")
    try:
        return parse(data)
    except (TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"unexpected shape: {exc}") from None


def load_state(root: Path, path: Path, parse: Callable[[dict[str, Any]], _T], empty: Callable[[], _T], *,
               quarantine: Path | None) -> tuple[_T, StateFileProblem | None]:
    """The state in `path` (missing: `<path>.bak`, else empty), and the problem when `path` was damaged.

    With `quarantine` (a writable open), the damaged bytes are copied there first and the file is
    replaced by its good backup (or removed when there is none); without it nothing is written.

    Raises:
        OSError: the quarantine copy or the restore failed (the damaged file is then still in place).
    """
    backup = path.with_name(path.name + ".bak")
    try:
        value = _parsed(path, parse)
        problem = None if value is not None else "missing" if backup.exists() else None
    except ValueError as exc:
        value, problem = None, str(exc)
    if problem is None:
        return (value if value is not None else empty()), None
    try:
        restored = _parsed(backup, parse)
    except ValueError:
        restored = None
    used = f"{backup.relative_to(root)}" if restored is not None else "nothing (empty)"
    saved: Path | None = None
    if quarantine is not None and problem != "missing":
        saved = _quarantine(path, quarantine)
    if quarantine is not None:
        if restored is not None:
            tmp = path.with_name(path.name + ".tmp")
            shutil.copyfile(backup, tmp)
            os.replace(tmp, path)
        else:
            path.unlink(missing_ok=True)
        fs.fsync_dir(path.parent)
    found = StateFileProblem(str(path.relative_to(root)), problem, used, None if saved is None else str(saved))
    return (restored if restored is not None else empty()), found


def _quarantine(path: Path, target: Path) -> Path:
    target.mkdir(parents=True, exist_ok=True)
    saved, attempt = target / f"{path.name}.damaged", 1
    while saved.exists():
        saved = target / f"{path.name}.damaged.{attempt}"
        attempt += 1
    fs.write_file(saved, path.read_bytes())
    fs.fsync_dir(target)
    return saved
