"""`Verifier`: what the doors and the other services may ask of Verify.

Owns the one interface the verify service and its result-cache wrapper
(leanrpc.cache.CachedVerifier) both offer, naming exactly the operations
their callers use: the gRPC and REST doors, Extract, the Prover, Formalize
and the composition root. A caller typed by it cannot reach the pool or the
service's internals. `VerifyBackend` is what the wrapper itself uses of the
service it wraps: the same interface, plus the verifier identity per
profile, a worker's pid and its end (provenance of stored verdicts). May import: config, pool (the snapshot type), results,
services.resolve, services.sessions. Never imports cache or edge.
"""

from __future__ import annotations

from typing import Protocol

from ..config import Config
from ..pool import PoolSnapshot
from ..results import VerifierIdentity, VerifyResult
from .resolve import Resolved, Resolver, VerifyOptions
from .sessions import SessionService

__all__ = ["VerifyBackend", "Verifier"]


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

    async def verify(
        self,
        snippet_id: str,
        code: str,
        options: VerifyOptions,
        *,
        deadline: float | None = None,
        client_id: str = "",
        stream_id: str = "",
    ) -> VerifyResult:
        """Resolve and run, for a service's own snippet (an assembled proof, a formalization)."""

    async def close(self) -> None:
        """Pending work flushed (the cache's writes)."""


class VerifyBackend(Verifier, Protocol):
    """The verify service as a wrapper (the result cache) sees it."""

    def identity_of(self, profile: str = "") -> VerifierIdentity | None:
        """The verifier identity of a REPL profile, None until one of its workers booted."""

    def worker_pid(self, name: str) -> int:
        """The process id of worker `name`, 0 when it is gone."""

    def add_worker_listener(self, listener) -> None:
        """`listener(info, old, new)` on every worker transition (a pool.WorkerInfo)."""
