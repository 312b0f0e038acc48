"""numpy, an optional speed-up, imported on its first use rather than with rocketstore.

Some walks over whole files (a consume queue's entries where the compiled module is not built, Java
hashes of a batch of keys) run faster as numpy array operations when numpy is installed; the pure-Python
twin beside each gives the same answers without it. Importing numpy takes 0.1-0.15 s here and starts
OpenBLAS's threads, which a store that never takes those paths does not pay for.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any


@functools.cache
def numpy_or_none() -> Any:
    """The numpy module, imported on the first call; None when it is not installed."""
    try:
        return importlib.import_module("numpy")
    except ImportError:  # pragma: no cover - exercised where numpy is absent
        return None
