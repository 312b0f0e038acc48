"""Service: a background loop around one `run_once()` step that tests can call without threads."""

from __future__ import annotations

import threading


class Service:
    """Calls `run_once()` every `interval_ms` (or sooner when woken) on a daemon thread.

    Errors escaping `run_once()` stop the loop and are kept in `error` for the owner to act on.
    """

    name = "service"

    def __init__(self, interval_ms: int) -> None:
        self.interval_ms = interval_ms
        self.error: BaseException | None = None
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
            except BaseException as exc:  # noqa: BLE001 - a service loop records and stops
                self.error = exc
                return
