"""What the pool says about itself: size, states, serving or not, identities, metrics.

Owns `PoolReport`, the read-only half of the pool (a mixin of `pool.Pool`,
split from pool/pool.py by responsibility: nothing here changes a worker, a
job or the queue). May import: config, results, worker (types), pool.admission,
pool.features, pool.health, pool.stats, pool.supervisor (types).
"""

from __future__ import annotations

import collections
import time
from typing import TYPE_CHECKING

from ..results import VerifierIdentity
from ..worker.worker import Worker, WorkerState
from .health import no_worker_reason
from .stats import PoolMetrics, PoolSnapshot, PoolStats, WorkerReport

if TYPE_CHECKING:
    from ..config import Config
    from .admission import Admission
    from .features import Features
    from .supervisor import Supervisor

__all__ = ["PoolReport"]


class PoolReport:
    """Read-only views of the pool's state (the pool sets these attributes)."""

    config: Config
    supervisor: Supervisor
    features: Features
    admission: Admission
    stats: PoolStats
    workers: list[Worker]
    closing: bool
    _state_since: dict[str, float]

    @property
    def size(self) -> int:
        return self.config.pool.workers

    @property
    def identity(self) -> VerifierIdentity | None:
        return self.supervisor.identity

    @property
    def incrementality(self) -> bool:
        """The default profile's (each profile has its own: `features`)."""
        return self.features.of("").incrementality

    @property
    def elab_async(self) -> bool:
        return self.features.of("").elab_async

    @property
    def queue_depth(self) -> int:
        return len(self.admission)

    def worker_states(self) -> dict[str, int]:
        counts = collections.Counter(w.state.value for w in self.workers)
        return {state.value: counts.get(state.value, 0) for state in WorkerState}

    @property
    def serving(self) -> bool:
        return not self.not_serving_reason

    @property
    def not_serving_reason(self) -> str:
        if self.closing:
            return "shutting down"
        if not self.supervisor.breaker.allow():
            return self.supervisor.breaker.reason
        # Every slot held by a worker stuck stopping, and no new one may start (pool/health.py).
        return self.supervisor.boot_reason() or no_worker_reason(
            self.workers,
            self._state_since,
            self.free_slots(),
            self.config.pool.stuck_after_s,
            time.monotonic(),
        )

    def identity_of(self, profile: str) -> VerifierIdentity | None:
        """The identity of a profile's REPL ("" = default; None before its first boot)."""
        return self.supervisor.identities.get(profile)

    def profile_identities(self) -> dict:
        """Each configured profile ("" = default) and its identity, if known."""
        return {
            name: self.supervisor.identities.get(name) for name in self.config.repl.profile_names
        }

    def check_profile(self, name: str) -> None:
        """ConfigError for an unknown profile (the caller maps it to bad input)."""
        self.config.repl.profile(name)

    def worker_pid(self, name: str) -> int:
        """The process id of live worker `name`, 0 when it is gone."""
        for worker in self.workers:
            if worker.name == name:
                return worker.pid or 0
        return 0

    def live_workers(self) -> frozenset[str]:
        return frozenset(w.name for w in self.workers if w.alive)

    def metrics(self, *, memory: bool = True) -> PoolMetrics:
        """The published snapshot (PoolOwner.metrics): read on the event loop."""
        workers = tuple(
            WorkerReport(w.name, w.state.value, w.pid, w.tree_rss() if memory else 0)
            for w in list(self.workers)
            if w.pid
        )
        return PoolMetrics(self.snapshot(), self.stats.copy(), workers)

    def snapshot(self) -> PoolSnapshot:
        return PoolSnapshot(
            size=self.size,
            worker_states=self.worker_states(),
            queue_depth=self.queue_depth,
            queue_limit=self.admission.queue_limit,
            serving=self.serving,
            not_serving_reason=self.not_serving_reason,
            identity=self.identity,
            profiles=self.profile_identities(),
        )

    def free_slots(self) -> int:
        # A stopping worker still holds its process, so it still takes a slot.
        return self.size - sum(
            1 for w in self.workers if w.alive or w.state is WorkerState.STOPPING
        )
