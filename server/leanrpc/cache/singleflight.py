"""Single-flight: identical work in flight at once runs once.

Owns only the map of flights; imports nothing from leanrpc.

`SingleFlight.run(key, work)` starts `work()` as a task when no flight holds
`key`, or joins the one that does; every caller awaits the same task. The
task is shielded from each caller's cancellation: a caller that leaves (a
stream cancel, a dropped client) only stops waiting. When the last caller
has left, the task is cancelled, so work nobody waits for does not run on.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Hashable


class _Flight:
    __slots__ = ("task", "waiters")

    def __init__(self, task: asyncio.Task) -> None:
        self.task = task
        self.waiters = 0


class SingleFlight:
    def __init__(self) -> None:
        self._flights: dict[Hashable, _Flight] = {}

    def __len__(self) -> int:
        return len(self._flights)

    def running(self, key: Hashable) -> bool:
        return key in self._flights

    async def run(self, key: Hashable, work: Callable[[], Awaitable[Any]]) -> tuple[Any, bool]:
        """(work's value, True if this caller joined a flight already running)."""
        flight = self._flights.get(key)
        joined = flight is not None
        if flight is None:
            flight = _Flight(asyncio.ensure_future(work()))
            self._flights[key] = flight
            flight.task.add_done_callback(lambda _t, k=key, f=flight: self._landed(k, f))
        flight.waiters += 1
        try:
            value = await asyncio.shield(flight.task)
        finally:
            flight.waiters -= 1
            if flight.waiters == 0 and not flight.task.done():
                # Forget it first: a caller arriving now starts a new flight
                # instead of joining one that is being cancelled.
                if self._flights.get(key) is flight:
                    del self._flights[key]
                flight.task.cancel()
        return value, joined

    def _landed(self, key: Hashable, flight: _Flight) -> None:
        if self._flights.get(key) is flight:
            del self._flights[key]
        if not flight.task.cancelled():
            flight.task.exception()  # retrieved: callers re-raise it, nobody else must log it
