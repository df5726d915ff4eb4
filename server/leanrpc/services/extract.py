"""Extract: verify with an infotree, cut the proof into tactic steps, and
optionally replay the steps in tactic mode (the replay check).

Owns: the composition, and the replay check: each declaration's proof is
replaced by `sorry` to get its start state (through the Prover), then every
*unit* (an outermost tactic: a leaf step, or a structural tactic with all its
pieces and inner steps, `ReplayUnit`) is run in tactic mode in order, and the
goals the REPL gives after it are compared with the infotree's goalsAfter of
that tactic. Every step of a unit gets the unit's verdict. May import:
results, extract, services.ports, services.resolve, services.requests,
services.prover.
"""

from __future__ import annotations

import dataclasses
import enum
import time

from ..errors import LeanServiceError, RequestError
from ..results import Position, VerifyResult
from .ports import Verifier
from .requests import Caller
from .resolve import Resolved

__all__ = ["DeclarationReplay", "ExtractService", "ReplayVerdict", "StepReplay", "goals_match"]


class ReplayVerdict(enum.IntEnum):
    """Mirrors leanrpc.v1.ReplayVerdict (same numbers)."""

    MATCH = 1  # the REPL's goals after the unit are the infotree's
    MISMATCH = 2  # the tactic ran, the goals differ (`goals_after` holds the REPL's)
    ERROR = 3  # the REPL rejected the unit's text (`error`)
    NOT_RUN = 4  # an earlier unit failed or the start state could not be built


@dataclasses.dataclass
class StepReplay:
    verdict: ReplayVerdict
    tactic: str = ""  # the unit's text that was run
    goals_after: list[str] = dataclasses.field(default_factory=list)  # the REPL's
    error: str = ""


@dataclasses.dataclass
class DeclarationReplay:
    ran: bool = False
    start_goals: list[str] = dataclasses.field(default_factory=list)
    start_goals_match: bool = False
    error: str = ""
    elapsed_s: float = 0.0
    steps: list[StepReplay] = dataclasses.field(default_factory=list)  # one per step


def _norm(goal: str) -> str:
    return "\n".join(line.rstrip() for line in goal.strip().split("\n"))


def goals_match(replayed: list[str], recorded: list[str]) -> bool:
    """Same goals in the same order (trailing spaces of lines ignored)."""
    return [_norm(g) for g in replayed] == [_norm(g) for g in recorded]


class ExtractService:
    def __init__(self, verify: Verifier, prover=None) -> None:
        self.verify_service = verify
        self.prover = prover  # services.prover.ProverService; needed by the replay check

    def attach_prover(self, prover) -> None:
        self.prover = prover

    async def extract(self, request: Resolved, *, replay: bool = False):
        """Returns (VerifyResult, list of leanrpc.extract.ExtractedDeclaration,
        list of DeclarationReplay (one per declaration; empty unless `replay`))
        for a request the door resolved (services.resolve; its infotree mode
        "original" unless it asks for another)."""
        from ..extract import extract_declarations

        if replay and self.prover is None:
            raise RequestError("replay needs the Prover service, which this server does not run")
        code, options = request.code, request.options
        # The replay's proof states are the caller's, on its quota.
        caller = Caller(request.client_id or "extract", request.deadline)
        result: VerifyResult = await self.verify_service.run(request)
        declarations = []
        if result.infotree is not None:
            # Positions are already in the user's text: the body was sent
            # padded to its line in the file.
            declarations = extract_declarations(result.infotree, code)
        replays = []
        if replay:
            for declaration in declarations:
                replays.append(await self._replay(code, declaration, options.timeout_s, caller))
        return result, declarations, replays

    async def _replay(
        self, code: str, declaration, timeout_s: float, caller: Caller
    ) -> DeclarationReplay:
        from ..extract import slice_source
        from .prover import ProofStatus

        arrived = time.monotonic()
        report = DeclarationReplay(
            steps=[StepReplay(ReplayVerdict.NOT_RUN) for _ in declaration.steps]
        )
        if not declaration.steps:
            return report
        first, last = declaration.steps[0], declaration.steps[-1]
        lines = code.split("\n")
        before = slice_source(code, Position(1, 0), first.start)
        after = slice_source(code, last.end, Position(len(lines), len(lines[-1])))
        start_code = before + "sorry" + after
        prover = self.prover
        proof_id = ""
        owner = caller.client_id
        try:
            # Resolved by the Prover's door rules (services.resolve), once per request.
            started = await prover.start_proof(
                prover.resolve_start(start_code, timeout_s=timeout_s, caller=caller)
            )
            proof_id = started.proof_id
            here = (first.start.line, first.start.column)
            state = next((s for s in started.states if s.start == here), None)
            if state is None:
                report.error = "the REPL gave no proof state at the declaration's first step"
                return report
            report.ran = True
            report.start_goals = list(state.goals)
            report.start_goals_match = goals_match(state.goals, first.goals_before)
            state_id = state.state_id
            for unit in declaration.units:
                step = prover.resolve_expand(
                    state_id, (unit.text,), timeout_s=timeout_s, caller=caller, check_whole=False
                )
                outcome = await prover.run_tactic(step)
                # REFUTED here is the REPL's own kernel check (check_whole is off): no state to go on.
                if outcome.status in (ProofStatus.ERROR, ProofStatus.REJECTED, ProofStatus.REFUTED):
                    verdict = StepReplay(
                        ReplayVerdict.ERROR, unit.text, [], outcome.error or outcome.repl_status
                    )
                else:
                    same = goals_match(outcome.goals, unit.goals_after)
                    verdict = StepReplay(
                        ReplayVerdict.MATCH if same else ReplayVerdict.MISMATCH,
                        unit.text,
                        list(outcome.goals),
                    )
                for k in range(unit.first, unit.last + 1):
                    report.steps[k] = verdict
                if verdict.verdict is ReplayVerdict.ERROR:
                    break
                state_id = outcome.state_id
        except LeanServiceError as exc:
            report.error = f"the replay stopped: {getattr(exc, 'message', None) or exc}"
        finally:
            if proof_id:
                prover.release((), (proof_id,), client_id=owner)
            report.elapsed_s = time.monotonic() - arrived
        return report
