"""What an agent reads: internal results as plain JSON-able dicts (structured tool results).

Owns: the shape of every tool's structured result (a verdict with its checks
and levels, axioms, messages with positions, goals, proof states, tactic
steps) and of a tool error (code, whether and when to retry). Pure: no I/O,
no MCP types; the door (agents/door.py) wraps these dicts in MCP results and
fits them to the output budget (agents/budget.py). Error codes and reasons
come from the one table, edge/errors.py. May import: errors, results,
services.prover (its outcome types), edge.errors.
"""

from __future__ import annotations

from typing import Any

from .. import errors
from ..edge.errors import reason_for, status_for
from ..results import (
    STAND_IN_KIND,
    Message,
    Position,
    Status,
    VerifierIdentity,
    VerifyResult,
    checks_of,
)
from ..services.prover import TacticOutcome

__all__ = [
    "error_of",
    "identity_of",
    "message_of",
    "position_of",
    "result_of",
    "state_of",
    "tactic_of",
]

STAND_IN_NOTE = (
    "verdict from leanrpc's embedded stand-in REPL, not from Lean: "
    "configure [repl] command for real Lean"
)

# Errors an agent may send again unchanged (the server, not the request, was the problem).
_RETRYABLE = {
    "OVERLOADED": "the server or this agent's share is full: wait retry_after_s, then send it again",
    "NOT_SERVING": "the server is not serving now (starting, or stopping): try again later",
    "WORKER_FAILED": "a REPL process failed under this call: sending it again is safe",
    "WORKER_TIMEOUT": "the REPL ran out of time: send it again only with a larger timeout_s",
    "WORKER_OUT_OF_MEMORY": "the REPL ran out of memory: simplify the code before sending it again",
    "INTERNAL": "a server bug: report it; sending it again may fail the same way",
}
_NOT_RETRYABLE = "the request itself is at fault: change it before sending it again"


def position_of(position: Position | tuple[int, int] | None) -> dict | None:
    if position is None:
        return None
    if isinstance(position, tuple):
        return {"line": position[0], "column": position[1]}
    return {"line": position.line, "column": position.column}


def message_of(message: Message) -> dict:
    return {
        "severity": message.severity.name.lower(),
        "start": position_of(message.start),
        "end": position_of(message.end),
        "text": message.text,
    }


def identity_of(identity: VerifierIdentity | None) -> dict | None:
    if identity is None:
        return None
    out = {
        "kind": identity.kind,
        "lean_version": identity.lean_version,
        "repl_revision": identity.repl_revision,
        "project_revision": identity.project_revision,
    }
    if identity.warning:
        out["warning"] = identity.warning
    if identity.kind == STAND_IN_KIND:
        out["note"] = STAND_IN_NOTE
    return out


def result_of(result: VerifyResult, allowed_axioms: frozenset[str]) -> dict[str, Any]:
    """One verdict: status, the checks behind it and their levels, axioms, messages, sorries."""
    checks = checks_of(result, allowed_axioms)
    out: dict[str, Any] = {
        "status": result.status.name,
        "checks": {
            "policy": checks.policy,
            "axioms": checks.axioms.name,
            "statement": checks.statement.name,
            "judge": checks.judge.name,
        },
        "axioms": list(result.axioms),
        "messages": [message_of(m) for m in result.messages],
        "sorries": [
            {"start": position_of(s.start), "end": position_of(s.end), "goal": s.goal}
            for s in result.sorries
        ],
        "elapsed_s": round(result.timings.total_s, 4),
        "verifier": identity_of(result.verifier),
    }
    if result.error:
        out["error"] = result.error
    if result.reference is not None:
        out["statement_check"] = {
            "passed": result.reference.passed,
            "reason": result.reference.reason.name,
            "declaration": result.reference.declaration,
            "detail": result.reference.detail,
        }
    if result.retry_after_s is not None:
        out["retry"] = {"retryable": True, "retry_after_s": result.retry_after_s}
    if result.status is Status.REJECTED and result.retry_after_s is None:
        out["retry"] = {"retryable": False, "hint": _NOT_RETRYABLE}
    return out


def state_of(state) -> dict:
    """A proof state an agent may run tactics on (services.prover ProofState)."""
    return {
        "state_id": state.state_id,
        "goals": list(state.goals),
        "start": position_of(getattr(state, "start", None)),
        "end": position_of(getattr(state, "end", None)),
    }


def tactic_of(out: TacticOutcome, allowed_axioms: frozenset[str]) -> dict[str, Any]:
    """One tactic's outcome: status, the new state and its goals, states it opened."""
    shaped: dict[str, Any] = {
        "tried": out.tactic,  # (not "tactic": that key is a REPL request's, repl/protocol.py)
        "status": out.status.name,
        "state_id": out.state_id,
        "goals": list(out.goals),
        "messages": [message_of(m) for m in out.messages],
        "opened": [state_of(s) for s in out.opened],
    }
    if out.error:
        shaped["error"] = out.error
    if out.proof_text:
        shaped["proof_text"] = out.proof_text
    if out.verification is not None:
        shaped["verification"] = result_of(out.verification, allowed_axioms)
    return shaped


def error_of(exc: BaseException) -> dict[str, Any]:
    """A tool error: the code of edge/errors.py's table, the message, and whether and when to retry."""
    reason = reason_for(exc)
    message = exc.message if isinstance(exc, errors.LeanServiceError) else str(exc)
    retry: dict[str, Any] = {"retryable": reason in _RETRYABLE}
    retry["hint"] = _RETRYABLE.get(reason, _NOT_RETRYABLE)
    if reason == "WORKER_TIMEOUT":
        retry["retryable"] = False  # the same call would time out again
    if isinstance(exc, errors.OverloadedError):
        retry["retry_after_s"] = round(max(exc.retry_after_s, 0.05), 3)
    elif reason in ("NOT_SERVING", "WORKER_FAILED"):
        retry["retry_after_s"] = 1.0
    shaped: dict[str, Any] = {
        "code": status_for(exc).name,
        "reason": reason,
        "message": message,
        "retry": retry,
    }
    field = getattr(exc, "field", "")
    if field:
        shaped["field"] = field
    return {"error": shaped}
