"""Evaluation metrics for the Formalize harness (benchmarks/formalize_eval.py).

Definitions (one *run* = one repair loop on one problem; `samples` runs per problem):

* well_formed: share of all candidates that pass the static checks;
  well_formed_first: the same for iteration-1 candidates.
* compile@k (k = 1..5): share of problems whose first run type-checked
  (SORRY/VALID) within k iterations.
* pass@N: share of problems where any of the N runs succeeded.
* mean_iters_solved: mean iterations of the first successful run, over solved problems.
* faithfulness: mean `difflib` ratio between the canonical forms of the produced
  statement and the reference, over solved problems; faithfulness_all counts
  every problem (its last well-formed candidate, 0 if none).
* error_breakdown: category of the first error of each verified, failed candidate
  (unknown_ident, syntax, typeclass, type_mismatch, other), overall and per iteration.

The canonical form drops comments, the theorem name, the proof, hypothesis names
(`h`, `h₀`, `hx'`...), and whitespace around symbols, and maps `∑ x in s` to
`∑ x ∈ s`, so the ratio measures content more than style.
"""

from __future__ import annotations

import collections
import dataclasses
import difflib
import re
from typing import Any, Iterable

from .diagnostics import CATEGORIES
from .types import Candidate, Outcome, OutcomeStatus

_COMMENT = re.compile(r"/-.*?-/|--[^\n]*", re.S)
_HYP = re.compile(r"(?<=[(\[{⦃\s])h[\w₀-₉']*(?=[\s:])")
_BIG_IN = re.compile(r"([∑∏⋃⋂]\s*[^,]*?)\bin\b")
_SPACE_SYM = re.compile(r"\s*([^\w\s])\s*")


def canonical(statement: str) -> str:
    s = _COMMENT.sub(" ", statement)
    s = re.sub(r"^\s*(?:theorem|lemma)\s+[^\s:({\[⦃]+", "", s.strip())
    # cut the proof: everything from the last `:=`
    cut = s.rfind(":=")
    if cut >= 0:
        s = s[:cut]
    s = _BIG_IN.sub(r"\1∈", s)
    s = _HYP.sub("_", " " + s)
    s = " ".join(s.split())
    s = _SPACE_SYM.sub(r"\1", s)
    return s.strip()


def faithfulness(statement: str, reference: str) -> float:
    return difflib.SequenceMatcher(
        None, canonical(statement), canonical(reference), autojunk=False
    ).ratio()


@dataclasses.dataclass
class RunRecord:
    """One repair-loop run on one problem."""

    problem: str
    sample: int
    outcome: Outcome
    candidates: list[Candidate]
    wall_s: float = 0.0

    @property
    def solved(self) -> bool:
        return self.outcome.status == OutcomeStatus.FORMALIZED

    def last_well_formed(self) -> str:
        for c in reversed(self.candidates):
            if c.well_formed.ok:
                return c.lean_statement
        return ""


def summarize(
    runs: Iterable[RunRecord], references: dict[str, str], *, samples: int, k_max: int = 5
) -> dict[str, Any]:
    by_problem: dict[str, list[RunRecord]] = collections.defaultdict(list)
    all_cands: list[Candidate] = []
    for r in runs:
        by_problem[r.problem].append(r)
        all_cands.extend(r.candidates)
    n = len(by_problem) or 1
    first_runs = {p: min(rs, key=lambda r: r.sample) for p, rs in by_problem.items()}

    compile_at = {}
    for k in range(1, k_max + 1):
        compile_at[f"compile@{k}"] = (
            sum(r.solved and r.outcome.iterations <= k for r in first_runs.values()) / n
        )
    pass_n = sum(any(r.solved for r in rs) for rs in by_problem.values()) / n

    solved_first = [
        min((r for r in rs if r.solved), key=lambda r: r.sample)
        for rs in by_problem.values()
        if any(r.solved for r in rs)
    ]
    mean_iters = (
        (sum(r.outcome.iterations for r in solved_first) / len(solved_first))
        if solved_first
        else None
    )
    faith = [faithfulness(r.outcome.lean_statement, references[r.problem]) for r in solved_first]
    faith_all = []
    for p, r in first_runs.items():
        stmt = r.outcome.lean_statement if r.solved else r.last_well_formed()
        faith_all.append(faithfulness(stmt, references[p]) if stmt else 0.0)

    breakdown = collections.Counter({c: 0 for c in CATEGORIES})
    per_iter: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for c in all_cands:
        if c.verify_result is not None and c.error_category is not None:
            breakdown[c.error_category] += 1
            per_iter[c.iteration][c.error_category] += 1
    statuses = collections.Counter(r.outcome.status.name for rs in by_problem.values() for r in rs)
    first = [c for c in all_cands if c.iteration == 1]
    return {
        "problems": len(by_problem),
        "samples": samples,
        "candidates": len(all_cands),
        "well_formed": (sum(c.well_formed.ok for c in all_cands) / len(all_cands))
        if all_cands
        else 0.0,
        "well_formed_first": (sum(c.well_formed.ok for c in first) / len(first)) if first else 0.0,
        **compile_at,
        f"pass@{samples}": pass_n,
        "mean_iters_solved": mean_iters,
        "faithfulness": (sum(faith) / len(faith)) if faith else None,
        "faithfulness_all": sum(faith_all) / n,
        "error_breakdown": dict(breakdown),
        "error_breakdown_per_iteration": {str(i): dict(c) for i, c in sorted(per_iter.items())},
        "outcomes": dict(statuses),
    }
