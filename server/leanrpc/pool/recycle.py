"""A worker given back: back to idle, or recycled (after the recycle hooks).

Owns the release-time decision (`Recycler.release`: the worker's own drain
cause, `limits.max_requests_per_worker`, `limits.max_worker_rss_mb`, a
closing pool) and the recycle hooks (`add_hook`: the Prover moves proof
states off a worker before it goes; each hook bounds its own time and its
errors are logged, never keep a worker alive). Split from pool/pool.py,
which wires it. May import: config, worker, pool.slot, pool.supervisor (types).
The supervisor stops the worker (`Supervisor.retire`); this room never kills.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..worker.worker import ExitCause, Worker, WorkerState
from .slot import WorkerHandle

if TYPE_CHECKING:
    from .ports import PoolCore
    from .slot import Slots
    from .supervisor import Supervisor

__all__ = ["Recycler"]

log = logging.getLogger("leanrpc.pool")


class Recycler:
    def __init__(self, pool: PoolCore, supervisor: Supervisor, slots: Slots) -> None:
        self._pool = pool
        self._supervisor = supervisor
        self._slots = slots
        self._hooks: list = []

    def add_hook(self, hook) -> None:
        self._hooks.append(hook)

    def release(self, worker: Worker) -> None:
        """Decides at release time: back to idle, or recycle."""
        if not worker.reserved:
            return
        limits = self._pool.config.limits
        reason = worker.recycle_reason
        if (
            reason is None
            and limits.max_requests_per_worker
            and worker.requests_served >= limits.max_requests_per_worker
        ):
            reason = ExitCause.MAX_REQUESTS
        if reason is None and limits.max_worker_rss_mb > 0:
            limit = limits.max_worker_rss_mb * 2**20
            if worker.memory_at_release(limit) > limit:
                reason = ExitCause.OUT_OF_MEMORY
        if reason is not None or self._pool.closing:
            self.recycle(worker, reason or ExitCause.SHUTDOWN)  # shutdown: no hooks
        else:
            worker.release()

    def recycle(self, worker: Worker, cause: ExitCause) -> None:
        if not self._hooks or self._pool.closing or not worker.alive:
            return self._supervisor.retire(worker, cause)
        if worker.state in (WorkerState.IDLE, WorkerState.READY):
            worker.reserve()  # held while the hooks run: routing skips it
        self._supervisor.schedule(self._after_hooks(worker, cause), name=f"recycle-{worker.name}")

    async def _after_hooks(self, worker: Worker, cause: ExitCause) -> None:
        try:
            for hook in self._hooks:
                try:
                    await hook(WorkerHandle(worker, self._slots.of(worker.name)), cause)
                except Exception:  # noqa: BLE001 - a hook never keeps a worker alive
                    log.exception("recycle hook failed on %s", worker.name)
        finally:
            self._supervisor.retire(worker, cause)
            self._pool.poke()
