"""The search both sides of the proof-search benchmark run: one tree, whoever expands it.

Owns the fixed tactic list, the best-first order (fewest goals first, ties in
the order states were made), the round structure (up to `width` states per
round, all their tactics, results taken in request order, so the tree does
not depend on which expansion finished first), the assembly of a found proof
for the `:= by sorry` statements, and a digest of the whole tree so two
targets can show they searched the same one. Stdlib only: the LeanInteract
runner imports it from the peers venv. May import: benchmarks.workloads (stdlib
only too: the shared folder, $LEANRPC_SHARED, and the no-data exit).
"""

from __future__ import annotations

import dataclasses
import hashlib
import heapq
import itertools
from pathlib import Path

from .workloads import no_data, require_data, shared_dir

REPO = Path(__file__).resolve().parents[1]
DATASET = ("datasets", "minif2f-lean4-yangky11", "MiniF2F", "Test")  # under the shared folder


def dataset_dir() -> Path:
    """The miniF2F Test statements under $LEANRPC_SHARED (else the shared/ above the checkout)."""
    try:
        return shared_dir().joinpath(*DATASET)
    except FileNotFoundError as exc:
        no_data(str(exc))


# The fixed tactic list tried on every state (no model). On the stand-in a closing
# tactic closes any goal, so the only closers here are focused on a case tag that
# exists only after `by_cases`: a proof is by_cases + one closer per case (depth 3),
# found among states made by `intro`/`have` (new states), `rw` (no progress: a
# duplicate, dropped) and a closer with an unknown lemma (an error).
TACTICS = (
    "intro h",
    "have h2 : 0 ≤ 1 := by norm_num",
    "by_cases hc : 0 < 1",
    "case pos => norm_num",
    "case neg => linarith",
    "rw [mul_comm]",
    "simp [Nat.unknown_lemma]",
)
WIDTH = 4
MAX_EXPANSIONS = 128

COMPLETED, INCOMPLETE, ERROR, REFUTED, REJECTED = (
    "COMPLETED",
    "INCOMPLETE",
    "ERROR",
    "REFUTED",
    "REJECTED",
)


def tactic_list(cost_s: float = 0.0) -> list[str]:
    """TACTICS, each with a stand-in burn directive of `cost_s` CPU seconds when
    cost_s > 0 (a Lean comment line: both sides send the same text; the REPL
    burns it on every run of the tactic, replays and whole-proof checks included)."""
    if cost_s <= 0:
        return list(TACTICS)
    return [f"{t}\n--@standin: burn={cost_s:.6f}" for t in TACTICS]


def statements(count: int) -> list[tuple[str, str]]:
    """(name, code) of the first `count` miniF2F Test statements, as written (`:= by sorry`)."""
    folder = dataset_dir()
    found = [(p.stem, p.read_text()) for p in sorted(folder.glob("*.lean"))[:count]]
    return require_data(found, f"miniF2F statements under {folder} (asked for {count})")


def assemble_by_sorry(
    code: str, start: tuple[int, int], end: tuple[int, int], tactics: list[str]
) -> str:
    """`code` with the `by sorry` sorry at [start, end) (1-based line, 0-based
    column) replaced by the tactics, one per line at the sorry's column: what
    the Prover's services/prover/assemble.py writes for a tactic-position sorry."""
    lines = code.split("\n")

    def offset(line: int, column: int) -> int:
        return sum(len(text) + 1 for text in lines[: line - 1]) + column

    a, b = offset(*start), offset(*end)
    indent = " " * (a - (code.rfind("\n", 0, a) + 1))
    block = ("\n" + indent).join(t.strip("\n").replace("\n", "\n" + indent) for t in tactics)
    return code[:a] + block + code[b:]


@dataclasses.dataclass
class Step:
    """One expansion's answer, target-neutral."""

    status: str  # COMPLETED, INCOMPLETE, ERROR, REFUTED, REJECTED
    state: object = None  # the target's handle of the new state (INCOMPLETE)
    goals: tuple[str, ...] = ()
    proof_text: str = ""
    rebuilt: bool = False
    error: str = ""


class BestFirst:
    """Best-first search in rounds. `next_round()` gives the (state, tactic)
    pairs to expand (empty when done); `feed(steps)` takes their answers in the
    same order."""

    def __init__(
        self,
        root_state: object,
        root_goals: list[str],
        tactics: list[str],
        *,
        width: int = WIDTH,
        max_expansions: int = MAX_EXPANSIONS,
    ) -> None:
        self.tactics, self.width, self.max_expansions = tactics, width, max_expansions
        self._order = itertools.count()
        self._frontier = [(len(root_goals), next(self._order), root_state, tuple(root_goals), ())]
        self._seen = {tuple(root_goals)}
        self._paths: list[tuple[str, ...]] = []
        self._digest = hashlib.sha1()
        self.expansions = self.refuted = self.rejected = self.rebuilt = 0
        self.rejected_errors: dict[str, int] = {}
        self.found: tuple[str, ...] | None = None
        self.proof_text = ""
        self.done = False

    def next_round(self) -> list[tuple[object, str]]:
        if self.done or not self._frontier or self.expansions >= self.max_expansions:
            self.done = True
            return []
        batch = [heapq.heappop(self._frontier) for _ in range(min(self.width, len(self._frontier)))]
        pairs, self._paths = [], []
        for _score, _n, state, _goals, path in batch:
            for tactic in self.tactics[
                : max(0, self.max_expansions - self.expansions - len(pairs))
            ]:
                pairs.append((state, tactic))
                self._paths.append(path + (tactic,))
        self.expansions += len(pairs)
        if not pairs:
            self.done = True
        return pairs

    def feed(self, steps: list[Step]) -> None:
        assert len(steps) == len(self._paths), (len(steps), len(self._paths))
        for path, step in zip(self._paths, steps):
            self._digest.update(
                "\x00".join(path).encode()
                + b"\x01"
                + step.status.encode()
                + b"\x01"
                + "\x00".join(step.goals).encode()
                + b"\x02"
            )
            self.rebuilt += step.rebuilt
            if step.status == COMPLETED and self.found is None:
                self.found, self.proof_text = path, step.proof_text
            elif step.status == REFUTED:
                self.refuted += 1
            elif step.status == REJECTED:
                self.rejected += 1
                reason = step.error[:80]
                self.rejected_errors[reason] = self.rejected_errors.get(reason, 0) + 1
            elif step.status == INCOMPLETE and step.goals and step.goals not in self._seen:
                self._seen.add(step.goals)
                heapq.heappush(
                    self._frontier,
                    (len(step.goals), next(self._order), step.state, step.goals, path),
                )
        if self.found is not None:
            self.done = True

    def summary(self, name: str) -> dict:
        """What both targets report per statement (the tree digest covers every
        expansion's path, status and goals, in order)."""
        return {
            "name": name,
            "expansions": self.expansions,
            "found": self.found is not None,
            "path": list(self.found or ()),
            "refuted": self.refuted,
            "rejected": self.rejected,
            "rebuilt": self.rebuilt,
            "rejected_errors": self.rejected_errors,
            "tree": self._digest.hexdigest()[:16],
            "proof_text": self.proof_text,
        }
