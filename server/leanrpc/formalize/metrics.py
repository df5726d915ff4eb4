"""The nine evaluation metrics of the Formalize system, under their published names.

One *run* = one repair loop on one problem; the headline metrics use each
problem's first run (sample 0), so they describe the loop, not best-of-samples.

  well_formed         share of all candidates that pass the static checks
                      (extras: well_formed_first, iteration-1 candidates only)
  compile@k, k=1..5   share of problems whose first run type-checked (SORRY/VALID)
                      within k repair iterations
  pass@N              share of problems whose first run type-checked within the
                      iteration cap N (N = the run's max_iterations); with N = 5
                      it equals compile@5
  mean_iters_solved   mean iterations of the first run over the problems it solved
  faithfulness_code   mean `difflib` ratio between the canonical forms of the
                      produced statement and the reference, over solved problems
                      (extra faithfulness_code_all: every problem, its last
                      well-formed candidate, 0 if none)
  goal_exact_match    share of solved problems whose elaborated goal equals the
                      reference's, as Lean prints both (goalmatch.py); None when
                      no real REPL was asked (the stand-in does not elaborate)
  error_breakdown     over UNSOLVED problems: the category of the first error of
                      the last candidate Lean checked in the first run
                      (unknown_ident, syntax, typeclass, type_mismatch, other);
                      an unsolved problem with no candidate Lean checked (all
                      ill-formed, or infrastructure failure) counts as other
  tokens_per_sec      generated tokens / wall seconds of the evaluation
  peak_vram_bytes, gpu_util_percent
                      from NVML (gpumon.py) where a GPU exists; without one the
                      value is None and `gpu` says why (never 0)

Extras stand beside them under other names: `any_sample@S` (any of S runs
succeeded: the old pass@N), error_breakdown_per_iteration (failed candidates per
iteration), outcomes.

The canonical form drops comments, the theorem name, the proof, hypothesis names
(`h`, `h₀`, `hx'`...), and whitespace around symbols, and maps `∑ x in s` to
`∑ x ∈ s`, so the ratio measures content more than style.

Imports: formalize.diagnostics, formalize.types (plain data only).
"""

from __future__ import annotations

import collections
import dataclasses
import difflib
import re
from typing import Any, Iterable, Mapping

from .diagnostics import CATEGORIES
from .types import Candidate, Outcome, OutcomeStatus

_COMMENT = re.compile(r"/-.*?-/|--[^\n]*", re.S)
_HYP = re.compile(r"(?<=[(\[{⦃\s])h[\w₀-₉']*(?=[\s:])")
_BIG_IN = re.compile(r"([∑∏⋃⋂]\s*[^,]*?)\bin\b")
_SPACE_SYM = re.compile(r"\s*([^\w\s])\s*")

NINE = (
    "well_formed",
    "compile@k",
    "pass@N",
    "mean_iters_solved",
    "faithfulness_code",
    "goal_exact_match",
    "error_breakdown",
    "tokens_per_sec",
    "peak_vram_bytes/gpu_util_percent",
)


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

    def last_checked_category(self) -> str:
        for c in reversed(self.candidates):
            if c.verify_result is not None and c.error_category is not None:
                return c.error_category
        return "other"


def _share(hits: int, total: int) -> float:
    return hits / total if total else 0.0


def summarize(
    runs: Iterable[RunRecord],
    references: dict[str, str],
    *,
    samples: int,
    max_iterations: int = 5,
    k_max: int = 5,
    goal_matches: Mapping[str, bool] | None = None,
    generated_tokens: int | None = None,
    wall_s: float | None = None,
    gpu: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    by_problem: dict[str, list[RunRecord]] = collections.defaultdict(list)
    all_cands: list[Candidate] = []
    for r in runs:
        by_problem[r.problem].append(r)
        all_cands.extend(r.candidates)
    n = len(by_problem)
    first_runs = {p: min(rs, key=lambda r: r.sample) for p, rs in by_problem.items()}
    solved = {p: r for p, r in first_runs.items() if r.solved}

    compile_at = {
        f"compile@{k}": _share(sum(r.outcome.iterations <= k for r in solved.values()), n)
        for k in range(1, k_max + 1)
    }
    pass_n = _share(sum(r.outcome.iterations <= max_iterations for r in solved.values()), n)
    mean_iters = (
        sum(r.outcome.iterations for r in solved.values()) / len(solved) if solved else None
    )
    faith = [faithfulness(r.outcome.lean_statement, references[p]) for p, r in solved.items()]
    faith_all = []
    for p, r in first_runs.items():
        stmt = r.outcome.lean_statement if r.solved else r.last_well_formed()
        faith_all.append(faithfulness(stmt, references[p]) if stmt else 0.0)
    if goal_matches is None:
        goal_match = None
    else:
        goal_match = _share(sum(bool(goal_matches.get(p)) for p in solved), len(solved))

    breakdown = collections.Counter({c: 0 for c in CATEGORIES})
    for p, r in first_runs.items():
        if not r.solved:
            breakdown[r.last_checked_category()] += 1
    per_iter: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    for c in all_cands:
        if c.verify_result is not None and c.error_category is not None:
            per_iter[c.iteration][c.error_category] += 1
    statuses = collections.Counter(r.outcome.status.name for rs in by_problem.values() for r in rs)
    first = [c for c in all_cands if c.iteration == 1]
    if generated_tokens is None:
        generated_tokens = sum(r.outcome.generated_tokens for rs in by_problem.values() for r in rs)
    gpu = dict(gpu or {"available": False, "reason": "not measured"})
    return {
        "problems": n,
        "samples": samples,
        "candidates": len(all_cands),
        "well_formed": _share(sum(c.well_formed.ok for c in all_cands), len(all_cands)),
        "well_formed_first": _share(sum(c.well_formed.ok for c in first), len(first)),
        **compile_at,
        f"pass@{max_iterations}": pass_n,
        "mean_iters_solved": mean_iters,
        "faithfulness_code": (sum(faith) / len(faith)) if faith else None,
        "faithfulness_code_all": (sum(faith_all) / n) if n else None,
        "goal_exact_match": goal_match,
        "error_breakdown": dict(breakdown),
        "tokens_per_sec": round(generated_tokens / wall_s, 3) if wall_s else None,
        "peak_vram_bytes": gpu.get("peak_vram_bytes"),
        "gpu_util_percent": gpu.get("gpu_util_percent"),
        "gpu": gpu,
        f"any_sample@{samples}": _share(
            sum(any(r.solved for r in rs) for rs in by_problem.values()), n
        ),
        "error_breakdown_per_iteration": {str(i): dict(c) for i, c in sorted(per_iter.items())},
        "outcomes": dict(statuses),
    }
