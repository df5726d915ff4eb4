"""Synthetic infotrees, one per construct, with their goals.

Each `case_*` returns `(Src, commands)`, where commands is the list of
`(start, end, tactic roots)` that `infotree_builder.full` turns into a
`full` tree (and `project` into the other forms). The goal strings are
named constants so that tests can state expected steps by hand.
"""

from __future__ import annotations

from extract_fixtures import FIXTURES
from infotree_builder import (
    N,
    Src,
    by_block,
    calc,
    case,
    cdot,
    conv,
    have,
    next_,
    seq,
    tac,
    then,
)

EXACT = "Lean.Parser.Tactic.exact"

# ---- have ------------------------------------------------------------------------

HAVE_SRC = Src(
    "theorem t_have (a b : Nat) (h : a = b) : b = a := by\n"
    "  have h' : a + 0 = b := by\n"
    "    rw [Nat.add_zero]\n"
    "    exact h\n"
    "  omega\n"
)
HAVE_G0 = "a b : Nat\nh : a = b\n⊢ b = a"
HAVE_G1 = "a b : Nat\nh : a = b\nh' : a + 0 = b\n⊢ b = a"
HAVE_H0 = "a b : Nat\nh : a = b\n⊢ a + 0 = b"
HAVE_H1 = "a b : Nat\nh : a = b\n⊢ a = b"


def case_have():
    src = HAVE_SRC
    rw = tac(src, "rw [Nat.add_zero]", [HAVE_H0], [HAVE_H1], "Lean.Parser.Tactic.rwSeq")
    ex = tac(src, "exact h", [HAVE_H1], [], EXACT)
    inner = by_block(src, src.at("by", 1), [rw, ex])
    hv = have(src, src.at("have h'"), inner, [HAVE_G0], [HAVE_G1])
    om = tac(src, "omega", [HAVE_G1], [], "Lean.Parser.Tactic.omega")
    root = by_block(src, src.at("by"), [hv, om])
    return src, [(0, len(src.text.rstrip()), [root])]


# ---- let, and have whose value only contains a `by` -------------------------------

LET_SRC = Src(
    "example : Nat := by\n"
    "  let n := 5\n"
    "  let m : Nat := by exact 3\n"
    "  have k : Nat := foo (by exact 1)\n"
    "  exact n + m + k\n"
)
LET_G = [
    "⊢ Nat",
    "n : Nat := 5\n⊢ Nat",
    "n : Nat := 5\nm : Nat := 3\n⊢ Nat",
    "k : Nat\n⊢ Nat",
]


def case_let():
    src = LET_SRC
    g0, g1, g2, g3 = LET_G
    let_n = tac(src, "let n := 5", [g0], [g1], "Lean.Parser.Tactic.tacticLet_")
    e3 = tac(src, "exact 3", ["⊢ Nat"], [], EXACT)
    let_m = have(
        src,
        src.at("let m"),
        by_block(src, src.at("by exact 3"), [e3]),
        [g1],
        [g2],
        kind="Lean.Parser.Tactic.tacticLet_",
    )
    e1 = tac(src, "exact 1", ["⊢ Nat"], [], EXACT)
    nested = by_block(src, src.at("by exact 1"), [e1])
    hv = have(src, src.at("have k"), nested, [g2], [g3])
    hv.end = src.at(")", 0, src.at("have k")) + 1  # the value is `foo (by exact 1)`
    last = tac(src, "exact n + m + k", [g3], [], EXACT)
    root = by_block(src, src.at("by"), [let_n, let_m, hv, last])
    return src, [(0, len(src.text.rstrip()), [root])]


# ---- calc ------------------------------------------------------------------------

# The source of shared/fixtures/repl/test/calc, whose `tactics` list records
# calc 1:22-3:19, calc steps 2:2-3:19 ("no goals"), sorry 2:14 and 3:14.
CALC_SRC = Src("example : 3 = 5 := by calc\n  3 = 4 := by sorry\n  4 = 5 := by sorry")


def case_calc():
    src = CALC_SRC
    s1 = tac(src, "sorry", ["⊢ 3 = 4"], [], "Lean.Parser.Tactic.tacticSorry", nth=0)
    s2 = tac(src, "sorry", ["⊢ 4 = 5"], [], "Lean.Parser.Tactic.tacticSorry", nth=1)
    b1 = by_block(src, src.at("by sorry"), [s1])
    b2 = by_block(src, src.at("by sorry", 1), [s2])
    c = calc(src, src.at("calc"), src.at("3 = 4"), len(src.text), [b1, b2], ["⊢ 3 = 5"], [])
    root = by_block(src, src.at("by"), [c])
    return src, [(0, len(src.text), [root])]


CALC_TERM_SRC = Src(
    "theorem t_calc (a b c d : Nat) (h1 : a = b) (h2 : b = c) (h3 : c = d) : a = d := by\n"
    "  calc a = b := h1\n"
    "    _ = c := by rw [h2]\n"
    "    _ = d := h3\n"
)
CALC_HYPS = "a b c d : Nat\nh1 : a = b\nh2 : b = c\nh3 : c = d\n"


def case_calc_term():
    src = CALC_TERM_SRC
    rw = tac(src, "rw [h2]", [CALC_HYPS + "⊢ b = c"], [], "Lean.Parser.Tactic.rwSeq")
    b = by_block(src, src.at("by rw"), [rw])
    end = len(src.text.rstrip())
    c = calc(src, src.at("calc a"), src.at("a = b :="), end, [b], [CALC_HYPS + "⊢ a = d"], [])
    root = by_block(src, src.at("by"), [c])
    return src, [(0, end, [root])]


CALC_PLAIN_SRC = Src(
    "theorem t_calc2 (a b c : Nat) (h1 : a = b) (h2 : b = c) : a = c := by\n"
    "  calc a = b := h1\n"
    "    _ = c := h2\n"
)
CALC_PLAIN_G = "a b c : Nat\nh1 : a = b\nh2 : b = c\n⊢ a = c"


def case_calc_plain():
    # Every step proved by a term: no tactic node inside the calc at all.
    src = CALC_PLAIN_SRC
    end = len(src.text.rstrip())
    c = calc(src, src.at("calc a"), src.at("a = b :="), end, [], [CALC_PLAIN_G], [])
    root = by_block(src, src.at("by"), [c])
    return src, [(0, end, [root])]


# ---- conv ------------------------------------------------------------------------

CONV_SRC = Src(
    "example (a b : Nat) : a + b = b + a := by\n  conv =>\n    lhs\n    rw [Nat.add_comm]\n"
)
CONV_G = "a b : Nat\n⊢ a + b = b + a"
CONV_C = ["a b : Nat\n| a + b = b + a", "a b : Nat\n| a + b", "a b : Nat\n| b + a"]


def case_conv():
    src = CONV_SRC
    c0, c1, c2 = CONV_C
    lhs = tac(src, "lhs", [c0], [c1], "Lean.Parser.Tactic.Conv.lhs", start=src.at("conv"))
    rw = tac(src, "rw [Nat.add_comm]", [c1], [c2], "Lean.Parser.Tactic.Conv.convRw__")
    cv = conv(src, src.at("conv"), [lhs, rw], [CONV_G], [])
    root = by_block(src, src.at("by"), [cv])
    return src, [(0, len(src.text.rstrip()), [root])]


CONV_LHS_SRC = Src("example (a b : Nat) : a + b = b + a := by\n  conv_lhs => rw [Nat.add_comm]\n")


def case_conv_lhs():
    # Mathlib's conv_lhs expands to `conv => lhs; …`: the expansion is
    # synthetic, the user's conv sequence is not.
    src = CONV_LHS_SRC
    _, c1, c2 = CONV_C
    rw = tac(src, "rw [Nat.add_comm]", [c1], [c2], "Lean.Parser.Tactic.Conv.convRw__")
    at = src.at("conv_lhs")
    inner = conv(src, at, [rw], [CONV_G], [])
    inner.synthetic = True
    outer = N("Mathlib.Tactic.Conv.convLHS", at, rw.end, [CONV_G], [], [inner])
    root = by_block(src, src.at("by"), [outer])
    return src, [(0, len(src.text.rstrip()), [root])]


# ---- focusing: · case next --------------------------------------------------------

P_HYPS = "p q : Prop\nhp : p\nhq : q\n"
GP, GQ, GPQ = P_HYPS + "⊢ p", P_HYPS + "⊢ q", P_HYPS + "⊢ p ∧ q"

CDOT_SRC = Src(
    "theorem t_dot (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n"
    "  constructor\n"
    "  · exact hp\n"
    "  · -- the second goal\n"
    "    exact hq\n"
)


def case_cdot():
    src = CDOT_SRC
    ctor = tac(src, "constructor", [GPQ], [GP, GQ], "Lean.Parser.Tactic.constructor")
    e1 = tac(src, "exact hp", [GP], [], EXACT)
    e2 = tac(src, "exact hq", [GQ], [], EXACT)
    d1 = cdot(src, src.at("·"), [e1], [GP, GQ], [GQ])
    d2 = cdot(src, src.at("·", 1), [e2], [GQ], [])
    root = by_block(src, src.at("by"), [ctor, d1, d2])
    return src, [(0, len(src.text.rstrip()), [root])]


CASE_SRC = Src(
    "theorem t_case (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n"
    "  constructor\n"
    "  case left => exact hp\n"
    "  case right =>\n"
    "    exact hq\n"
)
GL, GR = "case left\n" + GP, "case right\n" + GQ


def case_case():
    src = CASE_SRC
    ctor = tac(src, "constructor", [GPQ], [GL, GR], "Lean.Parser.Tactic.constructor")
    e1 = tac(src, "exact hp", [GL], [], EXACT)
    e2 = tac(src, "exact hq", [GR], [], EXACT)
    c1 = case(src, src.at("case left"), [e1], [GL, GR], [GR])
    c2 = case(src, src.at("case right"), [e2], [GR], [])
    root = by_block(src, src.at("by"), [ctor, c1, c2])
    return src, [(0, len(src.text.rstrip()), [root])]


# shared/fixtures/repl/test/by_cases.lean, verbatim.
NEXT_SRC = Src(
    "theorem foo (x : Int) : x = x := by\n  by_cases h : x < 0\n  next => rfl\n  next => rfl\n"
)
NEXT_G = "x : Int\n⊢ x = x"
NEXT_POS = "case pos\nx : Int\nh : x < 0\n⊢ x = x"
NEXT_NEG = "case neg\nx : Int\nh : ¬x < 0\n⊢ x = x"


def case_next():
    src = NEXT_SRC
    bc = tac(src, "by_cases h : x < 0", [NEXT_G], [NEXT_POS, NEXT_NEG], "«tacticBy_cases_:_»")
    r1 = tac(src, "rfl", [NEXT_POS], [], "Lean.Parser.Tactic.tacticRfl")
    r2 = tac(src, "rfl", [NEXT_NEG], [], "Lean.Parser.Tactic.tacticRfl", nth=1)
    n1 = next_(src, src.at("next"), [r1], [NEXT_POS, NEXT_NEG], [NEXT_NEG])
    n2 = next_(src, src.at("next", 1), [r2], [NEXT_NEG], [])
    root = by_block(src, src.at("by"), [bc, n1, n2])
    return src, [(0, len(src.text.rstrip()), [root])]


# ---- <;> and nested by ------------------------------------------------------------

THEN_SRC = Src(
    "theorem t_then (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n  constructor <;> assumption\n"
)


def case_then():
    src = THEN_SRC
    ctor = tac(src, "constructor", [GPQ], [GP, GQ], "Lean.Parser.Tactic.constructor")
    a1 = tac(src, "assumption", [GP], [], "Lean.Parser.Tactic.assumption")
    a2 = tac(src, "assumption", [GQ], [], "Lean.Parser.Tactic.assumption")
    root = by_block(src, src.at("by"), [then(src, ctor, [a1, a2], [GPQ], [])])
    return src, [(0, len(src.text.rstrip()), [root])]


NESTED_SRC = Src(
    "theorem t_in_tactic (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n"
    "  exact ⟨by exact hp, by exact hq⟩\n"
    "\n"
    "theorem t_in_term (p q : Prop) (hp : p) (hq : q) : p ∧ q :=\n"
    "  ⟨by exact hp, by\n"
    "    exact hq⟩\n"
)


def case_nested():
    src = NESTED_SRC
    second = src.at("theorem t_in_term")
    e1 = tac(src, "exact hp", [GP], [], EXACT)
    e2 = tac(src, "exact hq", [GQ], [], EXACT)
    blocks = [
        by_block(src, src.at("by exact hp"), [e1]),
        by_block(src, src.at("by exact hq"), [e2]),
    ]
    outer = tac(src, "exact ⟨by exact hp, by exact hq⟩", [GPQ], [], EXACT, children=blocks)
    root1 = by_block(src, src.at("by"), [outer])
    f1 = tac(src, "exact hp", [GP], [], EXACT, start=second)
    f2 = tac(src, "exact hq", [GQ], [], EXACT, start=second)
    r1 = by_block(src, src.at("by exact hp", 0, second), [f1])
    r2 = by_block(src, src.at("by\n", 0, second), [f2])
    return src, [(0, src.at("⟩") + 1, [root1]), (second, len(src.text.rstrip()), [r1, r2])]


# ---- comments, several commands, a term-mode def ---------------------------------

MULTI_SRC = Src(
    "open Nat\n"
    "\n"
    "def two : Nat := 2\n"
    "\n"
    "/-- doc -/\n"
    "@[simp] theorem t_comments : True := by\n"
    "  -- nothing to do yet\n"
    "  skip -- trailing\n"
    "  /- a block\n"
    "     comment -/\n"
    "  trivial\n"
    "  -- done\n"
    "\n"
    "example : True := by trivial\n"
)


def case_multi():
    src = MULTI_SRC
    skip = tac(src, "skip", ["⊢ True"], ["⊢ True"], "Lean.Parser.Tactic.skip")
    triv = tac(src, "trivial", ["⊢ True"], [], "Lean.Parser.Tactic.tacticTrivial")
    root = by_block(src, src.at("by"), [skip, triv])
    ex = src.at("example")
    triv2 = tac(src, "trivial", ["⊢ True"], [], "Lean.Parser.Tactic.tacticTrivial", start=ex)
    root2 = by_block(src, src.at("by", 0, ex), [triv2])
    return src, [
        (src.at("def"), src.at("2\n") + 1, []),
        (src.at("/--"), triv.end, [root]),
        (ex, len(src.text.rstrip()), [root2]),
    ]


# ---- `;` separators and `{ }` --------------------------------------------------------

SEP_SRC = Src(
    "example (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n"
    "  constructor; exact hp\n"
    "  { exact hq }\n"
)


def case_separators():
    # evalSepByIndentTactic saves a tactic node for each `;` token, and
    # evalTacticSeqBracketed one for the `{` token (goals before = after).
    src = SEP_SRC
    ctor = tac(src, "constructor", [GPQ], [GP, GQ], "Lean.Parser.Tactic.constructor")
    semi = tac(src, ";", [GP, GQ], [GP, GQ], ";")
    semi.name = None
    e1 = tac(src, "exact hp", [GP], [GQ], EXACT)
    e2 = tac(src, "exact hq", [GQ], [], EXACT)
    lb = tac(src, "{", [GQ], [GQ], "{")
    lb.name = None
    a, b = src.span("{ exact hq }")
    bracketed = N("Lean.Parser.Tactic.tacticSeqBracketed", a, b, [GQ], [], [lb, e2])
    root = by_block(src, src.at("by"), [ctor, semi, e1, bracketed])
    return src, [(0, len(src.text.rstrip()), [root])]


# ---- induction … with | alternatives ------------------------------------------------

IND_SRC = Src(
    "theorem t_ind (n : Nat) : n + 0 = n := by\n"
    "  induction n with\n"
    "  | zero => rfl\n"
    "  | succ k ih =>\n"
    "    simp\n"
)
IND_G = "n : Nat\n⊢ n + 0 = n"
IND_Z = "case zero\n⊢ 0 + 0 = 0"
IND_S = "case succ\nk : Nat\nih : k + 0 = k\n⊢ k + 1 + 0 = k + 1"


def case_induction(with_alt_nodes: bool = True):
    src = IND_SRC
    rfl = tac(src, "rfl", [IND_Z], [], "Lean.Parser.Tactic.tacticRfl")
    simp = tac(src, "simp", [IND_S], [], "Lean.Parser.Tactic.simp")
    alts: list[N] = []
    for bar, body, goal in [("| zero", rfl, IND_Z), ("| succ", simp, IND_S)]:
        inner = seq([body])
        if with_alt_nodes:
            # each alternative runs under withTacticInfoContext of its syntax
            inner = N("Lean.Parser.Tactic.inductionAlt", src.at(bar), body.end, [goal], [], [inner])
        alts.append(inner)
    ind = N("Lean.Parser.Tactic.induction", src.at("induction"), simp.end, [IND_G], [], alts)
    root = by_block(src, src.at("by"), [ind])
    return src, [(0, len(src.text.rstrip()), [root])]


# ---- Kimina's demo_search_2.lean (real source, goals abridged) -----------------------


def case_demo_search_2():
    src = Src((FIXTURES / "kimina" / "examples" / "demo_search_2.lean").read_text("utf-8"))
    thm = src.at("theorem")
    goal = ["a b c : ℝ\n⊢ a ^ 2 / (b + c) + … ≥ 1 / 9 * (64 * c - a - b)"]
    haves = [
        ("h₁", "0 < a + b + c", "linarith"),
        ("h₂", "0 < a * b", "positivity"),
        ("h₃", "0 < a * c", "positivity"),
        ("h₄", "0 < b * c", "positivity"),
    ]
    items: list[N] = []
    for name, claim, closer in haves:
        head = src.at(f"have {name}")
        inner = tac(src, closer, [f"⊢ {claim}"], [], f"tactic.{closer}", start=head)
        block = by_block(src, src.at("by", 0, head), [inner])
        items.append(have(src, head, block, goal, goal))
    for needle in [
        "field_simp [h₁.ne', h₂.ne', h₃.ne', h₄.ne']",
        "rw [div_le_div_iff]",
        "nlinarith [ha, hb, hc]",
    ]:
        items.append(tac(src, needle, goal, goal, "tactic.other"))
    root = by_block(src, src.at("by", 0, thm), items)
    return src, [(thm, len(src.text.rstrip()), [root])]


CASES = {
    "have": case_have,
    "let": case_let,
    "calc": case_calc,
    "calc_term": case_calc_term,
    "calc_plain": case_calc_plain,
    "conv": case_conv,
    "conv_lhs": case_conv_lhs,
    "cdot": case_cdot,
    "case": case_case,
    "next": case_next,
    "then": case_then,
    "nested": case_nested,
    "multi": case_multi,
    "separators": case_separators,
    "induction": case_induction,
    "induction_no_alt_nodes": lambda: case_induction(with_alt_nodes=False),
    "demo_search_2": case_demo_search_2,
}
