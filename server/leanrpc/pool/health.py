"""Why the pool cannot take a job, for health (NOT_SERVING with a reason).

Owns: `no_worker_reason`, the one pure reading of the worker list that says
every slot is held by a worker stuck stopping and no new one may start. The
pool passes what it knows (its workers, when each entered its state, its free
slots); nothing here holds state. May import: worker (types).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..worker.worker import Worker, WorkerState

__all__ = ["no_worker_reason"]


def no_worker_reason(
    workers: Iterable[Worker],
    state_since: Mapping[str, float],
    free_slots: int,
    stuck_after_s: float,
    now: float,
) -> str:
    """ "" when a worker can take a job; else which workers are stuck stopping."""
    if free_slots > 0:
        return ""
    stuck = []
    for worker in workers:
        since = now - state_since.get(worker.name, now)
        if worker.state is WorkerState.STOPPING and since >= stuck_after_s:
            stuck.append(f"{worker.name} stuck stopping for {since:.0f} s")
        elif worker.state is WorkerState.STOPPING or worker.alive:
            return ""
    if not stuck:
        return ""
    return f"no worker can take a job: {'; '.join(stuck)}"
