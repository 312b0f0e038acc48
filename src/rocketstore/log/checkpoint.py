"""StoreCheckpoint: the 4 KiB `checkpoint` file, values kept in memory and written on flush()."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from rocketstore.format.checkpoint import FIELDS_V4, PAGE_SIZE, Checkpoint
from rocketstore.format.store_dirs import CHECKPOINT_FILE
from rocketstore.storage import fs


class StoreCheckpoint:
    """The checkpoint file of a store.

    Raises:
        OSError: (at open) the file cannot be created or mapped.
    """

    def __init__(self, root: Path, *, read_only: bool = False) -> None:
        self.path = root / CHECKPOINT_FILE
        self.read_only = read_only
        self.values = Checkpoint()
        self.mm: mmap.mmap | None = None
        if read_only:
            if self.path.exists():
                self.values = Checkpoint.unpack(self.path.read_bytes()[:PAGE_SIZE])
            return
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size < PAGE_SIZE:
                os.ftruncate(fd, PAGE_SIZE)
            self.mm = mmap.mmap(fd, PAGE_SIZE, access=mmap.ACCESS_WRITE)
        finally:
            os.close(fd)
        self.values = Checkpoint.unpack(self.mm)

    def flush(self) -> None:
        """Write the values (RocketMQ 4.9.8's three fields) and force them to disk.

        Raises:
            OSError: the disk did not accept them.
        """
        if self.mm is None:
            return
        self.mm[:FIELDS_V4.size] = self.values.pack_v4()
        fs.msync(self.mm, 0, PAGE_SIZE)

    def close(self) -> None:
        """Unmap."""
        if self.mm is not None:
            self.mm.close()
            self.mm = None
