"""Helpers of the adversarial tests: a store's bytes, to prove a refusal changed nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path


def digests(root: Path) -> dict[str, str]:
    """sha256 of every file under `root`, by relative path."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}
