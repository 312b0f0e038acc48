"""Service: a background loop around one `run_once()` step that tests can call without threads."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Service:
    """Calls `run_once()` every `interval_ms` (or sooner when woken) on a daemon thread.

    Errors escaping `run_once()` stop the loop, are kept in `error` and are handed to `on_error` (the
    store turns read-only there) so that the owner acts on them at once.
    """

    name = "service"

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.error: BaseException | None = None
        self.on_error: Callable[[BaseException], None] | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def run_once(self) -> None:
        """One step of the service."""
        raise NotImplementedError

    def start(self) -> None:
        """Start the loop thread."""
        self._thread = threading.Thread(target=self._loop, name=f"rocketstore-{self.name}", daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        """Run the next step now."""
        if not self._wake.is_set():  # setting takes a lock: a put asks for every group commit
            self._wake.set()

    def stop(self) -> None:
        """Stop the loop and wait for the thread (the owner runs a last step itself if needed)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval_ms / 1000)
            self._wake.clear()
            if self._stop.is_set():
                break
            try:
                self.run_once()
            except BaseException as exc:  # a service loop records and stops
                self.fail(exc)
                return

    def fail(self, exc: BaseException) -> None:
        """Record a failure of a step and tell the owner (also for owners that drive `run_once()`)."""
        self.error = exc
        if self.on_error is not None:
            self.on_error(exc)
