"""Small type aliases shared by every layer; imports nothing of ours."""

from __future__ import annotations

import mmap
from collections.abc import Callable
from typing import NewType

PhyOffset = NewType("PhyOffset", int)
"""Byte offset in the logical concatenation of all commitlog files."""

QueueOffset = NewType("QueueOffset", int)
"""Entry number inside one consume queue."""

Buffer = bytes | bytearray | memoryview | mmap.mmap
"""Anything the codecs can read from: bytes, or a store file's mapping."""

Clock = Callable[[], int]
"""Returns the current time in epoch milliseconds."""
