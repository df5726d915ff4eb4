"""Extraction on the real infotrees recorded in shared/fixtures."""

from __future__ import annotations

import pytest

from extract_fixtures import (
    ONEPP_SOURCE,
    RecordedCase,
    check_invariants,
    recorded_cases,
    tactic_nodes,
)
from leanrpc.extract import extract_declarations, slice_source
from leanrpc.results import Position

CASES = recorded_cases()


def test_all_recorded_infotrees_found():
    # upstream repl (2), LeanInteract's three Lean versions (2 each), Kimina (1).
    assert len(CASES) >= 9, [c.id for c in CASES]
    assert {c.form for c in CASES} >= {"full", "substantive", "original"}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_recorded_steps_rebuild_the_proof(case: RecordedCase):
    decls = extract_declarations(case.infotree, case.source)
    check_invariants(decls, case.source)
    assert decls and all(d.steps for d in decls)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_recorded_goals_are_the_recorded_ones(case: RecordedCase):
    decls = extract_declarations(case.infotree, case.source)
    nodes = list(tactic_nodes(case.infotree))
    for step in (s for d in decls for s in d.steps):
        # A step's goals are exactly those of a recorded node of its kind
        # that covers it: nothing is invented or re-rendered.
        matches = [
            n
            for n in nodes
            if (n["stx"].get("kind") or n.get("name")) == step.kind
            and n["goalsBefore"] == step.goals_before
            and n["goalsAfter"] == step.goals_after
            and _covers(n, step.start, step.end)
        ]
        assert matches, step
    # The first step of each `by` block starts from the block's goals.
    for node in nodes:
        if node["stx"].get("kind") != "Lean.Parser.Term.byTactic":
            continue
        inside = [s for d in decls for s in d.steps if _covers(node, s.start, s.end)]
        assert inside[0].goals_before == node["goalsBefore"]
        assert inside[-1].goals_after == node["goalsAfter"]


def _covers(node: dict, start: Position, end: Position) -> bool:
    rng = node["stx"]["range"]
    a = (rng["start"]["line"], rng["start"]["column"])
    b = (rng["finish"]["line"], rng["finish"]["column"])
    return a <= (start.line, start.column) and (end.line, end.column) <= b


def _by_id(suffix: str) -> list[RecordedCase]:
    return [c for c in CASES if c.id.endswith(suffix)]


@pytest.mark.parametrize("case", _by_id("infotree_theorem.expected.out#0"), ids=lambda c: c.id)
def test_full_tree_show_p(case: RecordedCase):
    (decl,) = extract_declarations(case.infotree, case.source)
    assert decl.name == "show_p"
    assert (decl.start, decl.end) == (Position(1, 0), Position(1, 50))
    (step,) = decl.steps
    assert (step.text, step.start, step.end) == ("exact h", Position(1, 43), Position(1, 50))
    assert (step.goals_before, step.goals_after) == (["p : Prop\nh : p\n⊢ p"], [])
    assert step.kind == "Lean.Parser.Tactic.exact"
    # The statement is the source up to the first step.
    assert slice_source(case.source, decl.start, step.start) == (
        "theorem show_p (p: Prop) (h : p) : p := by "
    )


@pytest.mark.parametrize("case", _by_id("test/infotree.expected.out#0"), ids=lambda c: c.id)
def test_substantive_tree(case: RecordedCase):
    (decl,) = extract_declarations(case.infotree, case.source)
    assert decl.name == "f"
    assert [(s.text, s.goals_before, s.goals_after, s.kind) for s in decl.steps] == [
        ("constructor", ["h : Int\n⊢ Nat"], [], "Lean.Parser.Tactic.constructor")
    ]


def test_kimina_onepp_worked_example():
    """Kimina merges `by ` + `rfl` into one interval `by rfl`. Our rule keeps
    `by` in the gap: the step is the tactic `rfl`, which can be replayed as
    a REPL tactic from its goals_before, while `by rfl` is a term. The
    `by` belongs to the declaration (`… := by`), which is the source from
    the declaration's start to the first step."""
    (case,) = _by_id("kimina/onepp")
    (decl,) = extract_declarations(case.infotree, ONEPP_SOURCE)
    assert decl.name == "onepp"
    (step,) = decl.steps
    assert (step.text, step.start, step.end) == ("rfl", Position(1, 29), Position(1, 32))
    assert (step.goals_before, step.goals_after) == (["⊢ 1 + 1 = 2"], [])
    assert step.kind == "Lean.Parser.Tactic.tacticRfl"
    assert slice_source(ONEPP_SOURCE, decl.start, step.start) == "theorem onepp : 1+1 = 2:= by "
