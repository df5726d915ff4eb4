"""The whole-proof check: tactic mode closed every goal, so the proof is assembled and
verified as a normal snippet, pinned to the proof's own statement, and only VALID makes
the expansion COMPLETED.

Owns: `check_whole`. May import: reference (the pin), results, services.ports (the
Verifier), services.resolve (options), services.requests (the caller), services.prover.answers/assemble/outcomes/registry.
"""

from __future__ import annotations

import dataclasses

from ...reference import pin_of
from ...results import Status
from ..ports import Verifier
from ..requests import Caller
from ..resolve import VerifyOptions
from .answers import nest_tactics
from .assemble import assemble
from .outcomes import ProofStatus, TacticOutcome
from .proofs import ProofState

__all__ = ["check_whole"]


async def check_whole(
    verify: Verifier, out: TacticOutcome, state: ProofState, caller: Caller
) -> None:
    """Tactic mode closed the goal: verify the assembled proof as a normal snippet."""
    proof = state.proof
    start, end = proof.spans.get(state.path[0], (None, None))
    if start is None or end is None:
        out.status = ProofStatus.REFUTED
        out.error = "the sorry of this proof state has no position; the proof cannot be assembled"
        return
    tactics = nest_tactics(state.tactics)
    if tactics is None:
        out.status = ProofStatus.REFUTED
        out.error = "a sorry this state came from cannot be found in its tactic; the proof cannot be assembled"
        return
    out.proof_text = assemble(proof.code, start, end, tactics)
    # Pinned to the start statement (issue 25): a tactic that changes
    # the goal's meaning cannot make the whole proof COMPLETED.
    options = VerifyOptions(check_axioms=proof.check_axioms, reference=pin_of(proof.code))
    request = verify.resolver.resolve(
        f"{state.state_id}:whole",
        out.proof_text,
        options,
        deadline=caller.deadline,
        client_id=proof.client_id,
    )
    # On another idle worker than the one that found it, when there is one: that
    # worker holds the search's states, and its next expansions need it.
    result = await verify.run(dataclasses.replace(request, avoid_worker=out.worker))
    out.verification = result
    opened_left = state.other_sorries()  # sorries tactics on this path opened, off this path
    other_roots = len(proof.spans) > 1 or proof.roots > 1
    if result.status is Status.SORRY and opened_left:
        # Never COMPLETED while a tactic's own sorry stays in the text (a search that
        # proposes `sorry` must not find a "proof"); each of them is a state of its own.
        out.status = ProofStatus.INCOMPLETE
        out.error = (
            f"this goal is closed and the assembled proof checks up to {opened_left} sorr"
            f"{'y' if opened_left == 1 else 'ies'} a tactic on its path opened (states of their own)"
        )
    elif result.status is Status.VALID or (result.status is Status.SORRY and other_roots):
        out.status = ProofStatus.COMPLETED
    elif result.status in (Status.TIMEOUT, Status.CRASH, Status.OUT_OF_MEMORY):
        out.status = ProofStatus.REJECTED
        out.error = f"the whole-proof check could not run: {result.error}"
    else:
        out.status = ProofStatus.REFUTED
        out.error = (
            f"tactic mode closed every goal, but the assembled proof is {result.status.name}"
            + (f": {result.error}" if result.error else "")
        )
