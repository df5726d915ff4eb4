"""The per-client concurrency limit, one for every door.

Owns: counting each client's calls in flight and refusing the one over
`server.max_concurrent_per_client`, with one refusal text. The gRPC doors
use it through edge/interceptors/auth.py's ClientConcurrencyInterceptor
(RESOURCE_EXHAUSTED), the REST gateway in gateway/server.py (429); who a
client is, is edge/identity.py's rule at both. Plain Python, no I/O.
May import: the standard library only.
"""

from __future__ import annotations

import collections
import contextlib

__all__ = ["ClientLimiter", "LimitExceeded"]


class LimitExceeded(Exception):
    """The client already holds `limit` calls; `message` says so (one text for every door)."""

    def __init__(self, held: int, limit: int) -> None:
        self.held = held
        self.limit = limit
        self.message = (
            f"this client already has {held} calls in flight, the limit "
            f"(server.max_concurrent_per_client) is {limit}; wait for one to finish"
        )
        super().__init__(self.message)


class ClientLimiter:
    """At most `limit` calls in flight per client key (0: no limit)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight: collections.Counter[str] = collections.Counter()

    def refusal(self, key: str) -> LimitExceeded | None:
        """Why `key`'s next call would be refused, or None when it may enter."""
        held = self.in_flight[key]
        if self.limit > 0 and held >= self.limit:
            return LimitExceeded(held, self.limit)
        return None

    def enter(self, key: str) -> None:
        """Counts one call of `key`; raises LimitExceeded (nothing counted) when full."""
        refused = self.refusal(key)
        if refused is not None:
            raise refused
        self.in_flight[key] += 1

    def leave(self, key: str) -> None:
        self.in_flight[key] -= 1
        if self.in_flight[key] <= 0:
            del self.in_flight[key]

    @contextlib.contextmanager
    def holding(self, key: str):
        """`enter` … `leave` around a block (LimitExceeded before it runs)."""
        self.enter(key)
        try:
            yield
        finally:
            self.leave(key)
