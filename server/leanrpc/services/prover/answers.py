"""Reading a REPL's tactic-mode answer, for every released REPL version.

Owns: `read_tactic` (one tactic answer -> `TacticReading`: what the answer
says about the proof, before any whole-proof check), `opened_sorries` (the
proof states a tactic's own `sorry`s opened) and `proof_sorries` (a command
answer's sorries without the zero-width `rootGoals` entries) and
`nest_tactics` (a tactic path with sorry steps as the tactic texts of a
whole proof). Pure functions. May import: repl, services.prover.{assemble,
registry}.

What real REPLs send (docs/PROVER.md, REPL-PROTOCOL.md 5.5):

* `proofStatus` exists only from REPL v4.19.0 (PR #63). Tags v4.3.0 to
  v4.18.0 and v4.19.0-rc2 answer a finished proof `{"proofState": n,
  "goals": []}`: no goals and no status is CLOSED, and the whole-proof check
  decides, as it does for `Completed`.
* `Error: kernel type check failed: ...` (and the other `Error: ...` texts)
  is the REPL's kernel refusing the assembled term: REFUTED with that reason.
* A tactic with its own `sorry`s (`induction n with | zero => sorry | ...`)
  lists them in `sorries`, each with its own proof state id and goal (no
  position in tactic mode): each is a state of its own.
* On a state a tactic's own `sorry` opened (`have h : x > 0 := by sorry`,
  then a tactic on that sorry's state), the REPL's status judges the wrong
  root: v4.33.0-rc2 answers a finished goal `Incomplete: contains
  metavariable(s)` with no goals, the fork at v4.8.0-rc1 `Error: Goal not
  assigned` (test/name_generator in both). There, no goals, no error and no
  sorry of its own is CLOSED, and the whole-proof check decides, as on
  REPLs without `proofStatus` (issue 41).
* `rootGoals: true` adds zero-width entries (`pos == endPos`) to a command's
  `sorries`; they are the tactic blocks' starting goals, not sorries.
"""

from __future__ import annotations

import dataclasses
import enum
import re

from ... import repl
from .assemble import _code_only, assemble
from .proofs import SorryStep

__all__ = [
    "Opened",
    "Reading",
    "TacticReading",
    "nest_tactics",
    "opened_sorries",
    "proof_sorries",
    "read_tactic",
    "sorry_spans",
]

_SORRY = re.compile(r"(?<![\w.'])sorry(?![\w'!?])")


class Reading(enum.Enum):
    ERROR = "error"  # Lean rejected the tactic: no new state
    OPEN = "open"  # goals remain, or the proof contains sorry / metavariables
    CLOSED = "closed"  # no goals: the whole-proof check decides
    REFUTED = "refuted"  # the REPL's own kernel check refused the proof


@dataclasses.dataclass(frozen=True)
class Opened:
    """A proof state a tactic's own `sorry` opened: its REPL id, goal, and
    where the sorry is in the tactic text ((1-based line, column) pairs)."""

    index: int
    proof_state: int
    goal: str
    start: tuple[int, int] | None = None
    end: tuple[int, int] | None = None


@dataclasses.dataclass
class TacticReading:
    kind: Reading
    goals: list[str]
    repl_status: str
    error: str = ""
    opened: list[Opened] = dataclasses.field(default_factory=list)


def proof_sorries(response: repl.Response) -> list[repl.ReplSorry]:
    """A command answer's sorries that are sorries: `rootGoals` entries
    (zero width, `pos == endPos`) are left out."""
    return [
        s
        for s in response.sorries
        if not (s.pos is not None and s.end_pos is not None and s.pos == s.end_pos)
    ]


def sorry_spans(tactic: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where each `sorry` of a tactic text is, in source order ((line, column) pairs)."""
    spans = []
    for match in _SORRY.finditer(_code_only(tactic)):
        before = tactic[: match.start()]
        line = before.count("\n") + 1
        column = match.start() - (before.rfind("\n") + 1)
        spans.append(((line, column), (line, column + 5)))
    return spans


def opened_sorries(response: repl.Response, tactic: str) -> list[Opened]:
    """The proof states the tactic's own sorries opened, with goal and position."""
    spans = sorry_spans(tactic)
    opened = []
    for sorry in response.sorries:
        if sorry.proof_state is None:
            continue
        index = len(opened)
        if sorry.pos is not None and sorry.end_pos is not None:
            start, end = (
                (sorry.pos.line, sorry.pos.column),
                (sorry.end_pos.line, sorry.end_pos.column),
            )
        elif index < len(spans):
            start, end = spans[index]
        else:
            start = end = None
        opened.append(Opened(index, sorry.proof_state, sorry.goal, start, end))
    return opened


def read_tactic(
    response: repl.Response, tactic: str = "", *, sorry_opened: bool = False
) -> TacticReading:
    """What one tactic answer says, on any REPL version. `sorry_opened`: the
    tactic ran on a state a tactic's own `sorry` opened (or one below it),
    where the REPL's `proofStatus` cannot be taken at its word."""
    status = response.proof_status
    if response.proof_state is None or response.errors:
        error = response.message or "; ".join(m.data for m in response.errors)
        return TacticReading(Reading.ERROR, [], status or "", error=error)
    goals = list(response.goals or [])
    opened = opened_sorries(response, tactic)
    reading = TacticReading(Reading.OPEN, goals, status or "", opened=opened)
    if sorry_opened and not goals and not opened:
        # The status judged the sorry's metavariable, not this proof: the
        # whole-proof check decides (it alone can make a proof COMPLETED).
        reading.kind = Reading.CLOSED
    elif status is not None and status.startswith("Error:"):
        reading.kind = Reading.REFUTED
        reading.error = f"the REPL's kernel check refused the proof: {status}"
    elif goals:
        reading.kind = Reading.OPEN
    elif status is None:
        # Before REPL v4.19.0: no status at all. No goals and no sorry of
        # its own: finished, pending the whole-proof check.
        reading.kind = Reading.OPEN if opened else Reading.CLOSED
    elif status == "Completed" or status.startswith("Not verified"):
        reading.kind = Reading.CLOSED
    return reading


def nest_tactics(tactics: tuple[str, ...]) -> tuple[str, ...] | None:
    """The tactics of a path as whole-proof text: the steps after a sorry
    step replace that sorry in the tactic that opened it. None when a sorry
    cannot be found in its tactic's text (the proof cannot be assembled)."""
    for m, step in enumerate(tactics):
        if not isinstance(step, SorryStep):
            continue
        inner = nest_tactics(tactics[m + 1 :])
        spans = sorry_spans(tactics[m - 1]) if m > 0 else []
        if inner is None or step.index >= len(spans):
            return None
        start, end = spans[step.index]
        opener = assemble(tactics[m - 1], start, end, inner) if inner else tactics[m - 1]
        return tactics[: m - 1] + (opener,)
    return tuple(tactics)
