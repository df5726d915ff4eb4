"""Outcomes: one table from what the pool gave back to a VerifyResult.

Owns: running a job through the pool and turning its worker error into a
result (`run_job`, the table `_STATUS_OF_ERROR`); an answered body becomes a
result through `repl.classify`. Verify and sessions both use this room, so
neither calls the other's internals. May import: errors, results, repl,
pool. Never imports edge or `*_pb2`.
"""

from __future__ import annotations

import time

from ..errors import HeaderLoadError, WorkerCrashed, WorkerError, WorkerOutOfMemory, WorkerTimeout
from ..pool import BodyJob, BodyOutcome, PoolPort, SessionJob, SessionOutcome
from ..repl import classify, message_from_repl
from ..results import ReuseInfo, Status, Timings, VerifyResult

__all__ = ["failure_result", "run_job"]

# Worker errors that become a result with this status (most specific first;
# WorkerPoisoned is a WorkerCrashed). Anything else is raised to the edge.
_STATUS_OF_ERROR: tuple[tuple[type[Exception], Status], ...] = (
    (WorkerTimeout, Status.TIMEOUT),
    (WorkerOutOfMemory, Status.OUT_OF_MEMORY),
    (WorkerCrashed, Status.CRASH),
    (HeaderLoadError, Status.REJECTED),
)


async def run_job(
    pool: PoolPort, job: BodyJob | SessionJob, result_id: str, *, check_axioms: bool = False
) -> tuple[VerifyResult, BodyOutcome | SessionOutcome | None]:
    """Submits `job`; returns its result, and the pool's outcome when it ran.

    Worker failures and a header that does not load become results; only
    admission errors (overloaded, not serving, bad input) are raised.
    """
    arrived = time.monotonic()
    try:
        outcome = await pool.submit(job)
    except (WorkerError, HeaderLoadError) as exc:
        status = next((s for kind, s in _STATUS_OF_ERROR if isinstance(exc, kind)), None)
        if status is None:
            raise
        return failure_result(result_id, status, exc, arrived, job, pool), None
    result = classify(result_id, outcome, check_axioms)
    result.verifier = pool.identity_of(job.profile)
    result.timings.total_s = time.monotonic() - arrived
    return result, outcome


def failure_result(
    result_id: str,
    status: Status,
    exc: Exception,
    arrived: float,
    job: BodyJob | SessionJob,
    pool: PoolPort,
) -> VerifyResult:
    """The result of a job whose worker failed it (or whose header did not load)."""
    error = getattr(exc, "message", str(exc))
    tail = getattr(exc, "stderr_tail", "")
    if tail:
        error = f"{error}\n--- REPL stderr (tail) ---\n{tail[-2000:]}"
    return VerifyResult(
        id=result_id,
        status=status,
        error=error,
        messages=[message_from_repl(m) for m in getattr(exc, "messages", [])],
        timings=Timings(total_s=time.monotonic() - arrived),
        reuse=ReuseInfo(attempts=max(1, getattr(exc, "attempts", 0))),
        verifier=pool.identity_of(job.profile),
    )
