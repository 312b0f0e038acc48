"""PageWarmer: the pages of the commitlog file being written are made resident ahead of the writer.

The first write into a page of a freshly mapped file costs a page fault that allocates and zeroes the
page in the page cache; measured here it is about 2 us per 4 KiB page, as much as the rest of a 1 KiB
put. RocketMQ can warm a whole new file by writing zeros into it when it is created (its
`warmMapedFileEnable`, off by default). The warmer does it lazily and off the writer's thread: it
keeps the pages from the write position to `ahead` bytes past it faulted in, a chunk at a time, with
madvise(MADV_POPULATE_WRITE), a system call that runs without the interpreter lock, on the second core.

No byte changes: the pages hold the zeros the file holds, and recovery reads them as unwritten space.
The pages become dirty, so the kernel may write some zeros back before the records land on them.
Warming is an optimisation only: where the call is not supported (kernels before 5.14, not Linux) or
fails, the warmer turns itself off (`disabled_reason`) and the store goes on without it.
"""

from __future__ import annotations

import threading

from rocketstore.services.service import Service
from rocketstore.storage import fs
from rocketstore.storage.mapped_file import MappedFile

NEVER = 2**63 - 1
CHUNK = 1 << 20  # one system call per MiB


class PageWarmer(Service):
    """Faults in the commitlog's current file up to `ahead` bytes past its write position.

    The writer calls `advance(mf)` (under the store lock) whenever its position passes the offset the
    previous call returned; the thread does the rest. The store stops the warmer before it closes its
    files. (Retention never deletes the file being written; should it delete the previous one while
    the warmer still works on it, the call fails with ENOMEM and the warmer turns itself off.)
    """

    name = "page-warmer"

    def __init__(self, ahead: int, interval_ms: int = 1000) -> None:
        super().__init__(interval_ms)
        self.ahead = ahead
        self.disabled_reason: str | None = None
        self.warmed_bytes = 0  # pages made resident in all, for tests and reports
        self._lock = threading.Lock()
        self._file: MappedFile | None = None
        self._address = 0
        self._warmed = 0  # file position up to which the pages are resident
        self._target = 0  # file position up to which they are wanted

    def advance(self, mf: MappedFile) -> int:
        """Ask for the pages of `mf` up to `ahead` bytes past its write position.

        Returns:
            the commitlog offset at which the writer should call again.
        """
        if self.disabled_reason is not None:
            return NEVER
        position = mf.wrote_position
        with self._lock:
            if self._file is not mf:
                self._file = mf
                self._address = fs.mapping_address(mf.mm)
                self._warmed = position - position % fs.PAGE_SIZE
            self._target = min(position + self.ahead, mf.file_size)
        self.wakeup()
        return min(mf.file_from_offset + position + self.ahead // 2, mf.file_from_offset + mf.file_size)

    def run_once(self) -> None:
        """Fault in the wanted pages, a chunk per call, until they are all resident or the warmer stops."""
        while not self._stop.is_set() and self.disabled_reason is None:
            with self._lock:
                mf, address, start, target = self._file, self._address, self._warmed, self._target
            if mf is None or start >= target:
                return
            start -= start % fs.PAGE_SIZE
            end = min(start + CHUNK, target)
            try:
                fs.populate_write(address + start, end - start)
            except OSError as exc:
                self.disabled_reason = f"madvise(MADV_POPULATE_WRITE) failed: {exc}"
                return
            with self._lock:
                if self._file is mf and end > self._warmed:
                    self.warmed_bytes += end - self._warmed
                    self._warmed = end

    def fail(self, exc: BaseException) -> None:
        """An unexpected error turns the warmer off, never the store read-only: it wrote nothing."""
        self.error = exc
        self.disabled_reason = f"stopped by {type(exc).__name__}: {exc}"
