"""Infotree -> clean, non-overlapping tactic steps (training data for tree search).

Pure Python (no grpc, no asyncio). The services layer sends the body with
`infotree: "original"` and calls `extract_declarations(infotree, code)` on
the user's full text; positions need no remapping because the body is
padded with newlines to its place in the file.

What a declaration's steps look like (see `_extract` for the rule):

* every step's `text` is exactly `slice_source(source, start, end)`,
  trimmed of whitespace and comments; steps are sorted, never overlap and
  lie inside the declaration's command span, so steps plus the gaps between
  them rebuild the proof text exactly;
* an ordinary tactic (including `t <;> u`, `all_goals t`, `exact (by t)`)
  is one step with its node's recorded goalsBefore/goalsAfter;
* the `by` that opens a declaration's proof is in the gap before the first
  step (`theorem onepp : 1+1 = 2:= by rfl` gives the single step `rfl`);
* `have h : P := by …` gives the head `have h : P := by` (goals: the have's
  goalsBefore -> the goals before the first inner step, i.e. `⊢ P`), then
  the inner steps; `·`, `case x =>`, `next =>`, `focus`, `conv =>` and
  `| alt =>` work the same way; `calc` gives one piece per calc step
  (`calc a = b := by`, `_ = c := by`, …) with the inner steps in between;
* a piece of a structural tactic starts from that tactic's goalsBefore and
  ends at the goals before the next inner step (its goalsAfter for a
  trailing piece). Goals are always recorded strings, never re-rendered.

Owns: turning a declaration's infotree into tactic steps (`extract_declarations`).
May import: leanrpc.core, leanrpc.results and the standard library.
"""

from ._extract import ExtractedDeclaration, TacticStep, extract_declarations
from ._source import slice_source
from ._units import ReplayUnit

__all__ = [
    "ExtractedDeclaration",
    "ReplayUnit",
    "TacticStep",
    "extract_declarations",
    "slice_source",
]
