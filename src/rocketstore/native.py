"""The compiled helpers, when they are there: `speedups` is the `rocketstore._speedups` module or None.

The module is built at install time where a C compiler and the Python headers are found (setup.py,
optional). Every function in it has a pure-Python twin beside its caller that gives the same answers;
the callers pick one when they are imported. `ROCKETSTORE_PURE_PYTHON=1` in the environment makes them
pick the twins even where the module was built (to compare the two, or to rule the module out).
`ROCKETSTORE_SPEEDUPS=/path/to/_speedups.so` loads the module from that file instead of the package (CI's
sanitizer build, kept apart from the normal one); a file that does not load is an error then, not a
silent fall back to the twins.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import os
import sys
from types import ModuleType

PURE_PYTHON_VARIABLE = "ROCKETSTORE_PURE_PYTHON"
MODULE_FILE_VARIABLE = "ROCKETSTORE_SPEEDUPS"
MODULE_NAME = "rocketstore._speedups"


def _load_file(path: str) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(MODULE_NAME, path)
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path, loader=loader)
    if spec is None:
        raise ImportError(f"{MODULE_FILE_VARIABLE}={path}: not a loadable extension module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[MODULE_NAME] = module
    loader.exec_module(module)
    return module


def _load() -> ModuleType | None:
    if os.environ.get(PURE_PYTHON_VARIABLE, "") not in ("", "0"):
        return None
    path = os.environ.get(MODULE_FILE_VARIABLE, "")
    if path:
        return _load_file(path)
    try:
        return importlib.import_module(MODULE_NAME)
    except ImportError:
        return None


speedups: ModuleType | None = _load()
