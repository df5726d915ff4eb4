"""`Verifier`: what the doors and the other services may ask of Verify.

Owns the one interface the verify service and its result-cache wrapper
(leanrpc.cache.CachedVerifier) both offer, naming exactly the operations
their callers use: the gRPC and REST doors, Extract, the Prover, Formalize
and the composition root. A caller typed by it cannot reach the pool or the
service's internals. May import: config, pool (the snapshot type), results,
services.resolve, services.sessions. Never imports cache or edge.
"""

from __future__ import annotations

from typing import Protocol

from ..config import Config
from ..pool import PoolSnapshot
from ..results import VerifyResult
from .resolve import Resolved, Resolver, VerifyOptions
from .sessions import SessionService

__all__ = ["Verifier"]


class Verifier(Protocol):
    config: Config
    # The doors' one resolver (services.resolve), with the cache's keys when it is on.
    resolver: Resolver
    sessions: SessionService

    def admission(self, count: int = 1) -> None:
        """OverloadedError / NotServingError unless `count` more snippets may queue now."""

    def info(self) -> PoolSnapshot:
        """Size, worker states, queue, serving state and verifier identity."""

    async def run(self, request: Resolved) -> VerifyResult:
        """One resolved snippet's result."""

    async def verify(self, snippet_id: str, code: str, options: VerifyOptions, *, deadline: float | None = None,
                     client_id: str = "", stream_id: str = "") -> VerifyResult:
        """Resolve and run, for a service's own snippet (an assembled proof, a formalization)."""

    async def close(self) -> None:
        """Pending work flushed (the cache's writes)."""
