"""What one expansion comes to: the Prover's outcome types, and a tactic's REPL answer read
into an outcome (new states for the goals left and for the sorries the tactic opened).

Owns: `ProofStatus`, `StartedProof`, `TacticOutcome`, `read_run` (a `TacticRun` as an
outcome, registering its states), `failed` (an expansion that could not run). May import:
repl (messages), results, services.prover.answers/calls/registry.
"""

from __future__ import annotations

import dataclasses
import enum
import time

from ...repl import message_from_repl
from ...results import Message, VerifierIdentity, VerifyResult
from .answers import Reading, read_tactic
from .calls import TacticRun
from .proofs import ProofState, SorryStep
from .registry import StateRegistry

__all__ = ["ProofStatus", "StartedProof", "TacticOutcome", "failed", "read_run"]


class ProofStatus(enum.IntEnum):
    """Mirrors leanrpc.v1.ProofStatus (same numbers)."""

    COMPLETED = 1
    INCOMPLETE = 2
    ERROR = 3
    REFUTED = 4
    REJECTED = 5


@dataclasses.dataclass
class StartedProof:
    proof_id: str
    states: list[ProofState]
    messages: list[Message]
    verifier: VerifierIdentity | None
    elapsed_s: float


@dataclasses.dataclass
class TacticOutcome:
    parent_state_id: str
    tactic: str
    status: ProofStatus
    state_id: str = ""
    goals: list[str] = dataclasses.field(default_factory=list)
    messages: list[Message] = dataclasses.field(default_factory=list)
    error: str = ""
    repl_status: str = ""
    elapsed_s: float = 0.0
    proof_text: str = ""
    verification: VerifyResult | None = None
    rebuilt: bool = False
    worker: str = ""
    request_id: str = ""
    # States for the sorries the tactic itself opened (`induction … | zero => sorry`).
    opened: list[ProofState] = dataclasses.field(default_factory=list)


def failed(
    state: ProofState, tactic: str, exc: Exception, request_id: str, arrived: float
) -> TacticOutcome:
    why = getattr(exc, "message", str(exc))
    return TacticOutcome(
        parent_state_id=state.state_id,
        tactic=tactic,
        status=ProofStatus.REJECTED,
        request_id=request_id,
        elapsed_s=time.monotonic() - arrived,
        error=f"the expansion could not run: {why}",
    )


def read_run(
    registry: StateRegistry, state: ProofState, tactic: str, run: TacticRun, request_id: str
) -> tuple[TacticOutcome, ProofState | None]:
    """One tactic's answer as an outcome; with the new state when tactic mode
    closed every goal (the whole-proof check decides then)."""
    response = run.response
    out = TacticOutcome(
        parent_state_id=state.state_id,
        tactic=tactic,
        status=ProofStatus.REJECTED,
        request_id=request_id,
        rebuilt=run.rebuilt,
        worker=run.worker,
    )
    out.messages = [message_from_repl(m) for m in response.messages]
    sorry_opened = any(isinstance(step, SorryStep) for step in state.path)
    reading = read_tactic(response, tactic, sorry_opened=sorry_opened)
    out.repl_status = reading.repl_status
    if reading.kind is Reading.ERROR:
        out.status = ProofStatus.ERROR
        out.error = reading.error
        return out, None
    if reading.kind is Reading.REFUTED:
        # The REPL's kernel refused the term (v4.19.0 on): no state to go on from.
        out.status = ProofStatus.REFUTED
        out.error = reading.error
        out.goals = reading.goals
        return out, None
    proof = state.proof
    goals = reading.goals
    path = state.path + (tactic,)
    child = registry.add(proof, path, goals, out.repl_status, state.ttl_s)
    out.state_id, out.goals = child.state_id, goals
    for sorry in reading.opened:
        # Each sorry the tactic opened is a state of its own (its goal, where it is in the tactic).
        out.opened.append(
            registry.add(
                proof,
                path + (SorryStep(sorry.index, len(reading.opened)),),
                [sorry.goal] if sorry.goal else [],
                "Incomplete: open goals remain",
                state.ttl_s,
                start=sorry.start,
                end=sorry.end,
            )
        )
    if reading.kind is Reading.OPEN:
        out.status = ProofStatus.INCOMPLETE
        return out, None
    return out, child
