"""The compiled helpers, when they are there: `speedups` is the `rocketstore._speedups` module or None.

The module is built at install time where a C compiler and the Python headers are found (setup.py,
optional). Every function in it has a pure-Python twin beside its caller that gives the same answers;
the callers pick one when they are imported. `ROCKETSTORE_PURE_PYTHON=1` in the environment makes them
pick the twins even where the module was built (to compare the two, or to rule the module out).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

PURE_PYTHON_VARIABLE = "ROCKETSTORE_PURE_PYTHON"


def _load() -> ModuleType | None:
    if os.environ.get(PURE_PYTHON_VARIABLE, "") not in ("", "0"):
        return None
    try:
        return importlib.import_module("rocketstore._speedups")
    except ImportError:
        return None


speedups: ModuleType | None = _load()
