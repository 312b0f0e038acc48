"""Held pull requests: a pull that finds nothing waits here until a message arrives, its consumer
leaves, or time runs out."""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Hashable


class Wakeup(enum.Enum):
    """Why a held pull stopped waiting."""

    ARRIVED = "arrived"  # a message landed in its queue
    RELEASED = "released"  # its consumer unregistered or its connection closed
    TIMEOUT = "timeout"


class PullWaiters:
    """One asyncio event per (topic, queue id) with held pulls, and one per owner (connection and
    consumer group) so a leaving consumer gets its held pulls answered at once."""

    def __init__(self) -> None:
        self._events: dict[tuple[str, int], asyncio.Event] = {}
        self._waiting: dict[tuple[str, int], int] = {}
        self._owners: dict[Hashable, asyncio.Event] = {}

    async def wait(self, topic: str, queue_id: int, timeout_s: float, owner: Hashable | None = None) -> Wakeup:
        """Wait until `notify(topic, queue_id)`, `release(owner)` or the timeout."""
        key = (topic, queue_id)
        event = self._events.setdefault(key, asyncio.Event())
        self._waiting[key] = self._waiting.get(key, 0) + 1
        waits = [asyncio.ensure_future(event.wait())]
        owner_event = self._owners.setdefault(owner, asyncio.Event()) if owner is not None else None
        if owner_event is not None:
            waits.append(asyncio.ensure_future(owner_event.wait()))
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()
            self._waiting[key] -= 1
            if self._waiting[key] == 0:
                del self._waiting[key]
                self._events.pop(key, None)
        if event.is_set():
            return Wakeup.ARRIVED
        return Wakeup.RELEASED if owner_event is not None and owner_event.is_set() else Wakeup.TIMEOUT

    def notify(self, topic: str, queue_id: int) -> None:
        """Wake every pull held on (topic, queue id)."""
        event = self._events.pop((topic, queue_id), None)
        if event is not None:
            event.set()

    def release(self, owner: Hashable) -> None:
        """Answer every pull `owner` holds now (its consumer is leaving)."""
        event = self._owners.pop(owner, None)
        if event is not None:
            event.set()

    def release_matching(self, predicate: Callable[[Hashable], bool]) -> None:
        """Release every owner for which `predicate(owner)` is true."""
        for owner in [o for o in self._owners if predicate(o)]:
            self.release(owner)

    @property
    def held(self) -> int:
        """Pulls currently held."""
        return sum(self._waiting.values())
