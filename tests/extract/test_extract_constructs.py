"""One test per construct, on synthetic trees shaped like the REPL's.

Each expected step list below was worked out by hand from the rule:
a block's items are its outermost tactics; structural tactics (`·`, `case`,
`next`, `have … := by`, `calc`, `conv`) are cut into their own text pieces
plus their inner steps; a piece starts from the structural tactic's
goalsBefore and ends at the goals before the next inner step (or at the
tactic's goalsAfter for a trailing piece); every other step carries its own
node's goalsBefore/goalsAfter. Each case runs on the `original`, `full`
and `tactics` forms of the same tree and must give the same steps.
"""

from __future__ import annotations

import pytest

import extract_synthetic as sc
from extract_fixtures import check_invariants
from infotree_builder import full, project
from leanrpc.extract import extract_declarations

FORMS = ["original", "full", "tactics"]


def run(case, form: str):
    src, commands = case()
    tree = project(full(src, commands), form)
    decls = extract_declarations(tree, src.text)
    check_invariants(decls, src.text)
    return decls


def triples(decl):
    return [(s.text, s.goals_before, s.goals_after) for s in decl.steps]


@pytest.mark.parametrize("form", FORMS)
def test_have_by_is_head_plus_inner_steps(form):
    (decl,) = run(sc.case_have, form)
    assert decl.name == "t_have"
    assert triples(decl) == [
        ("have h' : a + 0 = b := by", [sc.HAVE_G0], [sc.HAVE_H0]),
        ("rw [Nat.add_zero]", [sc.HAVE_H0], [sc.HAVE_H1]),
        ("exact h", [sc.HAVE_H1], []),
        ("omega", [sc.HAVE_G1], []),
    ]
    assert decl.steps[0].kind == "Lean.Parser.Tactic.tacticHave_"
    # The statement and the top-level `by` stay outside the steps.
    text = sc.HAVE_SRC.text
    assert text[: text.index("have h'")].endswith(":= by\n  ")


@pytest.mark.parametrize("form", FORMS)
def test_let_and_have_without_trailing_by_stay_whole(form):
    (decl,) = run(sc.case_let, form)
    g0, g1, g2, g3 = sc.LET_G
    assert decl.name == ""
    assert triples(decl) == [
        ("let n := 5", [g0], [g1]),
        ("let m : Nat := by", [g1], ["⊢ Nat"]),
        ("exact 3", ["⊢ Nat"], []),
        # The `by` is inside the value's term, so the have is one step.
        ("have k : Nat := foo (by exact 1)", [g2], [g3]),
        ("exact n + m + k", [g3], []),
    ]


@pytest.mark.parametrize("form", FORMS)
def test_calc_each_step(form):
    src, commands = sc.case_calc()
    calc_node = commands[0][2][0].children[0].children[0].children[0].children[0]
    # Positions as recorded in shared/fixtures/repl/test/calc.
    assert (src.pos(calc_node.start), src.pos(calc_node.end)) == (
        {"line": 1, "column": 22},
        {"line": 3, "column": 19},
    )
    (decl,) = run(sc.case_calc, form)
    assert triples(decl) == [
        ("calc\n  3 = 4 := by", ["⊢ 3 = 5"], ["⊢ 3 = 4"]),
        ("sorry", ["⊢ 3 = 4"], []),
        ("4 = 5 := by", ["⊢ 3 = 5"], ["⊢ 4 = 5"]),
        ("sorry", ["⊢ 4 = 5"], []),
    ]
    assert {s.kind for s in decl.steps[::2]} == {"Lean.calcTactic"}


@pytest.mark.parametrize("form", FORMS)
def test_calc_term_steps_are_cut_at_step_lines(form):
    (decl,) = run(sc.case_calc_term, form)
    goal, sub = sc.CALC_HYPS + "⊢ a = d", sc.CALC_HYPS + "⊢ b = c"
    assert triples(decl) == [
        ("calc a = b := h1", [goal], [goal]),
        ("_ = c := by", [goal], [sub]),
        ("rw [h2]", [sub], []),
        ("_ = d := h3", [goal], []),
    ]


@pytest.mark.parametrize("form", FORMS)
def test_calc_without_tactic_steps(form):
    (decl,) = run(sc.case_calc_plain, form)
    G = sc.CALC_PLAIN_G
    assert triples(decl) == [("calc a = b := h1", [G], [G]), ("_ = c := h2", [G], [])]


@pytest.mark.parametrize("form", FORMS)
def test_conv_block(form):
    (decl,) = run(sc.case_conv, form)
    c0, c1, c2 = sc.CONV_C
    assert triples(decl) == [
        ("conv =>", [sc.CONV_G], [c0]),
        ("lhs", [c0], [c1]),
        ("rw [Nat.add_comm]", [c1], [c2]),
    ]


@pytest.mark.parametrize("form", FORMS)
def test_conv_lhs_macro(form):
    (decl,) = run(sc.case_conv_lhs, form)
    _, c1, c2 = sc.CONV_C
    assert triples(decl) == [("conv_lhs =>", [sc.CONV_G], [c1]), ("rw [Nat.add_comm]", [c1], [c2])]


@pytest.mark.parametrize("form", FORMS)
def test_cdot_focus(form):
    (decl,) = run(sc.case_cdot, form)
    GP, GQ, GPQ = sc.GP, sc.GQ, sc.GPQ
    assert triples(decl) == [
        ("constructor", [GPQ], [GP, GQ]),
        ("·", [GP, GQ], [GP]),
        ("exact hp", [GP], []),
        ("·", [GQ], [GQ]),  # the comment after `·` falls into the gap
        ("exact hq", [GQ], []),
    ]
    assert decl.steps[1].kind == "Lean.cdot"


@pytest.mark.parametrize("form", FORMS)
def test_case(form):
    (decl,) = run(sc.case_case, form)
    GL, GR = sc.GL, sc.GR
    assert triples(decl) == [
        ("constructor", [sc.GPQ], [GL, GR]),
        ("case left =>", [GL, GR], [GL]),
        ("exact hp", [GL], []),
        ("case right =>", [GR], [GR]),
        ("exact hq", [GR], []),
    ]


@pytest.mark.parametrize("form", FORMS)
def test_next(form):
    (decl,) = run(sc.case_next, form)
    pos, neg = sc.NEXT_POS, sc.NEXT_NEG
    assert triples(decl) == [
        ("by_cases h : x < 0", [sc.NEXT_G], [pos, neg]),
        ("next =>", [pos, neg], [pos]),
        ("rfl", [pos], []),
        ("next =>", [neg], [neg]),
        ("rfl", [neg], []),
    ]


@pytest.mark.parametrize("form", FORMS)
def test_then_combinator_is_one_step(form):
    (decl,) = run(sc.case_then, form)
    assert triples(decl) == [("constructor <;> assumption", [sc.GPQ], [])]
    assert decl.steps[0].kind == "Lean.Parser.Tactic.«tactic_<;>_»"


@pytest.mark.parametrize("form", FORMS)
def test_nested_by(form):
    d1, d2 = run(sc.case_nested, form)
    GP, GQ, GPQ = sc.GP, sc.GQ, sc.GPQ
    # Inside a tactic, a nested `by` is part of that tactic's text.
    assert d1.name == "t_in_tactic"
    assert triples(d1) == [("exact ⟨by exact hp, by exact hq⟩", [GPQ], [])]
    # In a term, each `by` block is its own block; the `by`s stay in the gaps.
    assert (d2.name, triples(d2)) == ("t_in_term", [("exact hp", [GP], []), ("exact hq", [GQ], [])])


@pytest.mark.parametrize("form", FORMS)
def test_separator_and_brace_tokens_are_not_steps(form):
    (decl,) = run(sc.case_separators, form)
    GP, GQ, GPQ = sc.GP, sc.GQ, sc.GPQ
    assert triples(decl) == [
        ("constructor", [GPQ], [GP, GQ]),
        ("exact hp", [GP], [GQ]),
        ("exact hq", [GQ], []),
    ]


@pytest.mark.parametrize("form", FORMS)
def test_induction_alternatives(form):
    (decl,) = run(sc.case_induction, form)
    G, Z, S = sc.IND_G, sc.IND_Z, sc.IND_S
    assert triples(decl) == [
        ("induction n with", [G], [Z]),
        ("| zero =>", [Z], [Z]),
        ("rfl", [Z], []),
        ("| succ k ih =>", [S], [S]),
        ("simp", [S], []),
    ]


@pytest.mark.parametrize("form", FORMS)
def test_induction_without_alternative_nodes(form):
    # Should a Lean version record no node per alternative, the text between
    # the bodies becomes connector pieces of the induction itself.
    (decl,) = run(sc.CASES["induction_no_alt_nodes"], form)
    G, Z, S = sc.IND_G, sc.IND_Z, sc.IND_S
    assert triples(decl) == [
        ("induction n with\n  | zero =>", [G], [Z]),
        ("rfl", [Z], []),
        ("| succ k ih =>", [G], [S]),
        ("simp", [S], []),
    ]


@pytest.mark.parametrize("form", FORMS)
def test_comments_and_several_declarations(form):
    decls = run(sc.case_multi, form)
    # `open Nat` has no steps and declares nothing, so it is left out; the
    # term-mode def is kept with no steps.
    assert [d.name for d in decls] == ["two", "t_comments", ""]
    assert decls[0].steps == []
    assert triples(decls[1]) == [
        ("skip", ["⊢ True"], ["⊢ True"]),
        ("trivial", ["⊢ True"], []),
    ]
    assert triples(decls[2]) == [("trivial", ["⊢ True"], [])]
    # The declaration span is the whole command, doc comment included.
    assert (decls[1].start.line, decls[1].start.column) == (5, 0)


@pytest.mark.parametrize("name", sorted(sc.CASES))
def test_substantive_form_is_still_valid(name):
    # "substantive" drops `by`, sequences, `·` and `<;>` nodes, so structure
    # is partly lost; the steps must still be valid and cover the leaves.
    src, commands = sc.CASES[name]()
    tree = project(full(src, commands), "substantive")
    decls = extract_declarations(tree, src.text)
    check_invariants(decls, src.text)
    assert any(d.steps for d in decls)


@pytest.mark.parametrize("form", FORMS)
def test_kimina_demo_search_2(form):
    # Kimina's PR #54 test expects 11 intervals on this file, the first being
    # "by\n  have h₁ : 0 < a + b + c :=". The rule here also gives 11 steps,
    # but the top-level `by` stays in the gap and each `by` of a have ends
    # its head.
    (decl,) = run(sc.case_demo_search_2, form)
    assert decl.name == "lean_workbook_10058"
    assert [s.text for s in decl.steps] == [
        "have h₁ : 0 < a + b + c := by",
        "linarith",
        "have h₂ : 0 < a * b := by",
        "positivity",
        "have h₃ : 0 < a * c := by",
        "positivity",
        "have h₄ : 0 < b * c := by",
        "positivity",
        "field_simp [h₁.ne', h₂.ne', h₃.ne', h₄.ne']",
        "rw [div_le_div_iff]",
        "nlinarith [ha, hb, hc]",
    ]
    assert decl.steps[0].goals_after == ["⊢ 0 < a + b + c"]
    assert decl.start.line == 9  # the statement's line; the header is not part of it


# ---- item 8 of issue 18: audit fixes ----------------------------------------------


@pytest.mark.parametrize("form", ["original", "tactics", "substantive"])
def test_indented_theorem_inside_namespace_gets_its_name_and_span(form):
    from infotree_builder import Src, by_block, tac

    src = Src(
        "namespace Foo\n  theorem t_ns (p : Prop) (hp : p) : p := by\n    exact hp\nend Foo\n"
    )
    goal = "p : Prop\nhp : p\n⊢ p"
    root = by_block(
        src, src.at("by"), [tac(src, "exact hp", [goal], [], "Lean.Parser.Tactic.exact")]
    )
    start = src.at("theorem")
    tree = project(full(src, [(start, src.at("end Foo") - 1, [root])]), form)
    decls = [d for d in extract_declarations(tree, src.text) if d.steps]
    check_invariants(decls, src.text)
    (decl,) = decls
    assert decl.name == "t_ns"
    assert (decl.start.line, decl.start.column) == (2, 2)  # the theorem, not `namespace`
    assert [s.text for s in decl.steps] == ["exact hp"]


def test_substantive_then_keeps_every_goal_of_a_step_run_once_per_goal():
    # `constructor <;> assumption`: substantive drops the `<;>` node; the two
    # `assumption` nodes have the same range and must not lose the goal q.
    src, commands = sc.case_then()
    tree = project(full(src, commands), "substantive")
    (decl,) = extract_declarations(tree, src.text)
    check_invariants([decl], src.text)
    assert triples(decl) == [
        ("constructor", [sc.GPQ], [sc.GP, sc.GQ]),
        ("assumption", [sc.GP, sc.GQ], []),
    ]


def test_dropped_overlapping_nodes_leave_a_trace(caplog):
    from leanrpc.extract._blocks import disjoint
    from leanrpc.extract._tree import TacticNode

    outer = TacticNode(0, 10, "outer", None, ["a"], [], [], 0)
    inner = TacticNode(2, 12, "straddling", None, ["b"], [], [], 1)
    with caplog.at_level("DEBUG", logger="leanrpc.extract"):
        assert disjoint([outer, inner]) == [outer]
    assert "dropped node straddling [2, 12)" in caplog.text
