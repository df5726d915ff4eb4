"""Moving proof states off a worker before the pool recycles it.

Owns: `StateMover.before_recycle`, the pool's recycle hook (max_requests,
memory at release, system memory). While the pool still holds the worker,
the live states only it holds are captured, deepest first and bounded
(`[prover] max_moved_states`, `move_timeout_s`):

* where its REPL pickles proof states, each is pickled and the bytes kept in
  the server's store (the registry), so the next expansion unpickles it on
  any worker instead of replaying its path;
* otherwise (no pickling, or a worker over its memory limit, which the
  memory watcher would kill at its next request), the deepest states are
  rebuilt eagerly on other workers (`RealizeCall` jobs, each rebuilding a
  state with all its ancestors), so no later expansion waits on the replay.

States the mover skips are still rebuilt lazily on their next expansion;
nothing is lost either way. May import: errors, pool, worker (states), services.resolve (the default timeout), services.requests (Caller),
services.prover.{registry, rebuild, calls, pickles}.
"""

from __future__ import annotations

import asyncio
import logging
import time

from ...errors import WorkerError
from ...pool import CallJob, PoolPort
from ...worker.worker import ExitCause
from ..requests import Caller
from ..resolve import default_timeout_s
from .calls import RealizeCall, job_of
from .pickles import pickle_state
from .proofs import Path, Proof
from .rebuild import Rebuilder
from .registry import StateRegistry

__all__ = ["StateMover"]

log = logging.getLogger("leanrpc.prover")

MOVER_CLIENT = "leanrpc:prover-moves"  # the fair-admission client of eager rebuilds


class StateMover:
    def __init__(
        self,
        pool: PoolPort,
        registry: StateRegistry,
        rebuilder: Rebuilder,
        *,
        max_states: int,
        timeout_s: float,
        max_pickle_bytes: int,
    ) -> None:
        self.pool = pool
        self.registry = registry
        self.rebuilder = rebuilder
        self.max_states = max_states
        self.timeout_s = timeout_s
        self.max_pickle_bytes = max_pickle_bytes
        self._background: set[asyncio.Task] = set()
        # (proof id, path) -> when it was last rebuilt eagerly. A state not
        # expanded since is not moved again: eager rebuilds are pool jobs that
        # count towards max_requests, and must not chase each other.
        self._moved: dict[tuple[str, Path], float] = {}

    def _only_here(self, worker_name: str) -> list[tuple[Proof, Path]]:
        """Live states `worker_name` holds that no other live worker holds, deepest first."""
        alive = self.pool.live_workers() - {worker_name}
        moves, seen = [], set()
        for state in self.registry.held_states(worker_name):
            proof, path = state.proof, state.path
            if (proof.proof_id, path) in seen or path in proof.pickles:
                continue
            seen.add((proof.proof_id, path))
            if any(path in proof.realized.get(n, ()) for n in alive):
                continue
            if self._moved.get((proof.proof_id, path), -1.0) >= state.last_used:
                continue
            moves.append((proof, path))
        return moves[: self.max_states]

    async def before_recycle(self, worker, cause: ExitCause) -> None:
        moves = self._only_here(worker.name)
        if not moves:
            return
        left = moves
        if cause is not ExitCause.OUT_OF_MEMORY and self.rebuilder.pickling(worker):
            left = await self._pickle_all(worker, moves)
        # Its REPL numbers are about to die: routing must not wait for it.
        self.registry.forget_worker(worker.name)
        self._rebuild_elsewhere(left)

    async def _pickle_all(
        self, worker, moves: list[tuple[Proof, Path]]
    ) -> list[tuple[Proof, Path]]:
        """Pickles what it can in the time allowed; returns the states not pickled."""
        end = time.monotonic() + self.timeout_s
        stats = self.registry.stats
        for index, (proof, path) in enumerate(moves):
            remaining = end - time.monotonic()
            state = proof.realized.get(worker.name, {}).get(path)
            if remaining <= 0 or not worker.alive:
                return moves[index:]
            if state is None:
                continue
            try:
                taken = await pickle_state(
                    worker, self.rebuilder.scratch, state, remaining, self.max_pickle_bytes
                )
            except WorkerError as exc:
                log.warning(
                    "pickling states of %s before its recycle stopped: %s", worker.name, exc
                )
                return moves[index:]
            if taken is not None:
                self.registry.store_pickle(proof, path, *taken)
                stats.states_pickled += 1
        return []

    def _rebuild_elsewhere(self, moves: list[tuple[Proof, Path]]) -> None:
        """Eager rebuilds of the deepest states; one rebuild covers its ancestors."""
        leaves: list[tuple[Proof, Path]] = []
        for proof, path in moves:  # deepest first
            if not any(p is proof and q[: len(path)] == path for p, q in leaves):
                leaves.append((proof, path))
        now = time.monotonic()
        for proof, path in moves:
            self._moved[(proof.proof_id, path)] = now
        if len(self._moved) > 16 * max(1, self.max_states):
            self._moved = {k: t for k, t in self._moved.items() if now - t < 3600}
        for proof, path in leaves:
            job = job_of(
                RealizeCall(proof, path, self.rebuilder),
                default_timeout_s(self.pool.config),
                Caller(MOVER_CLIENT),
            )
            task = asyncio.ensure_future(self._submit(job))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _submit(self, job: CallJob) -> None:
        try:
            await self.pool.submit(job)
        except Exception as exc:  # noqa: BLE001 - a full queue, a shutdown, a crash: lazily then
            log.info("eager rebuild of a proof state skipped: %s", getattr(exc, "message", exc))
            return
        self.registry.stats.states_moved_eagerly += 1

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
