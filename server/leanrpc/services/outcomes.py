"""Outcomes: one table from what the pool gave back to a VerifyResult.

Owns: running a job through the pool and turning its outcome or its worker
error into a result (`run_job`), Lean message and sorry conversion, and the
status rule (error -> INVALID, sorry -> SORRY, else VALID). Verify and
sessions both use it, so neither calls the other's internals. May import:
errors, results, pool. Never imports edge or `*_pb2`.
"""

from __future__ import annotations

import re
import time

from ..errors import HeaderLoadError, WorkerCrashed, WorkerError, WorkerOutOfMemory, WorkerTimeout
from ..pool import BodyOutcome, Job, Pool
from ..results import Message, Position, ReuseInfo, Severity, SorryInfo, Status, Timings, VerifyResult

__all__ = ["failure_result", "message_from_repl", "result_from_outcome", "run_job", "sorry_from_repl"]

# Both spellings: 'sorry' (Lean <= 4.27) and `sorry` (Lean >= 4.28).
_SORRY_WARNING = re.compile(r"declaration uses ['`]sorry['`]")

# Worker errors that become a result with this status (most specific first).
_STATUS_OF_ERROR: tuple[tuple[type[Exception], Status], ...] = (
    (WorkerTimeout, Status.TIMEOUT),
    (WorkerOutOfMemory, Status.OUT_OF_MEMORY),
    (WorkerCrashed, Status.CRASH),
    (HeaderLoadError, Status.REJECTED),
)


async def run_job(pool: Pool, job: Job, result_id: str) -> tuple[VerifyResult, BodyOutcome | None]:
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
    result = result_from_outcome(result_id, outcome)
    result.verifier = pool.identity
    result.timings.total_s = time.monotonic() - arrived
    return result, outcome


def failure_result(result_id: str, status: Status, exc: Exception, arrived: float, job: Job, pool: Pool) -> VerifyResult:
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
        reuse=ReuseInfo(attempts=max(1, job.attempts)),
        verifier=pool.identity,
    )


def result_from_outcome(result_id: str, outcome: BodyOutcome) -> VerifyResult:
    """The result of a body the REPL answered: status from Lean's messages.

    Messages on the open/set_option preamble come first, at their positions
    in the user's text; an error there makes the snippet INVALID, as Lean
    would for the whole file.
    """
    response = outcome.response
    result = VerifyResult(
        id=result_id,
        status=Status.VALID,
        timings=Timings(
            queue_s=outcome.queue_s, header_s=outcome.header_s, body_s=outcome.body_s, boot_s=outcome.boot_s
        ),
        reuse=ReuseInfo(
            warm_header=outcome.warm_header,
            reused_prefix_chars=outcome.reused_prefix_chars,
            worker=outcome.worker,
            attempts=outcome.attempts,
        ),
    )
    if "env" not in response and "message" in response:
        # A request-level REPL error ("Unknown environment.", exceptions).
        result.status = Status.REJECTED
        result.error = f"REPL error: {response['message']}"
        return result
    raw_messages = list(outcome.preamble_messages) + list(response.get("messages", []))
    result.messages = [message_from_repl(m) for m in raw_messages]
    result.sorries = [sorry_from_repl(s) for s in response.get("sorries", []) if "pos" in s or "goal" in s]
    if "infotree" in response:
        result.infotree = response["infotree"]
    has_error = any(m.severity is Severity.ERROR for m in result.messages)
    has_sorry = bool(result.sorries) or any(
        m.severity is Severity.WARNING and _SORRY_WARNING.search(m.text) for m in result.messages
    )
    if has_error:
        result.status = Status.INVALID
    elif has_sorry:
        result.status = Status.SORRY
    return result


def message_from_repl(raw: dict) -> Message:
    pos = raw.get("pos") or {"line": 0, "column": 0}
    end = raw.get("endPos")
    return Message(
        severity=Severity.from_repl(raw.get("severity", "info")),
        start=Position(int(pos.get("line", 0)), int(pos.get("column", 0))),
        end=Position(int(end.get("line", 0)), int(end.get("column", 0))) if end else None,
        text=str(raw.get("data", "")),
    )


def sorry_from_repl(raw: dict) -> SorryInfo:
    pos = raw.get("pos")
    end = raw.get("endPos")
    return SorryInfo(
        start=Position(pos["line"], pos["column"]) if pos else None,
        end=Position(end["line"], end["column"]) if end else None,
        goal=str(raw.get("goal", "")),
    )
