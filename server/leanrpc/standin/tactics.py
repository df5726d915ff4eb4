"""Stand-in tactic mode: one tactic on a proof state's goals, plausibly.

Owns: which tactic words are known and which close a goal, `run_tactic`
(`have`, `intro`, `sorry`, closers, unknown identifiers, errors for unknown
tactics) and the `proofStatus` text. May import: standin.lexer, standin.syntax.
"""

from __future__ import annotations

import re

from .decls import unknown_identifiers
from .lexer import Tok, lex, message, norm

# Tactics that close the goal in tactic mode but make the whole command fail
# (elab.py reports an error): a simulated unsound tactic-mode "Completed",
# which the Prover's whole-proof check must catch.
TACTIC_MODE_ONLY = frozenset(["leanrpc_unsound", "leanrpc_kernel_reject"])
# Closes the goal, and the REPL's own kernel check (v4.19.0 on) refuses the term.
KERNEL_REJECT = "leanrpc_kernel_reject"
KNOWN_TACTICS = (
    frozenset(
        """rfl simp simp_all simp? simp_all? dsimp simpa simpa? norm_num omega decide native_decide linarith
    nlinarith positivity ring ring_nf ring1 field_simp aesop aesop? tauto trivial exact exact? apply apply?
    refine refine' intro intros rintro cases rcases obtain induction constructor use exists existsi left right
    exfalso by_contra by_contra! by_cases contradiction assumption sorry admit have show suffices calc rw
    rewrite rwa erw nth_rewrite nth_rw unfold simp_rw push_neg norm_cast push_cast exact_mod_cast gcongr congr
    ext funext specialize subst generalize split split_ifs interval_cases fin_cases polyrith linear_combination
    abel group noncomm_ring zify qify lift set let clear rename_i revert symm trans conv change done skip first
    try repeat all_goals any_goals focus case case' next on_goal pick_goal swap rotate_left rotate_right
    iterate haveI letI infer_instance exacts apply_fun bound continuity measurability fun_prop norm_num1
    module compute_degree mono filter_upwards choose peel wlog nofun nomatch match fun_induction grind
    bv_decide hint assumption_mod_cast apply_assumption solve_by_elim delta injection contrapose contrapose!
    absurd trace dbg_trace guard_target guard_hyp observe decide! rel cancel_denoms induction' cases'
    subst_vars clear_value unfold_let exact! apply_rules positivity! nlinarith! linarith! field_simp!
    norm_num! simp_arith omega_nat replace obtain! refine_lift tfae_have tfae_finish intro! rename
    show_term dsimp! fail fail_if_success exists! constructorm casesm rcases? aesop_cat tauto! itauto
    decreasing_tactic simp_wf apply_mod_cast exact_mod_cast! classical conv_lhs conv_rhs""".split()
    )
    | TACTIC_MODE_ONLY
)
_CLOSERS = TACTIC_MODE_ONLY | frozenset(
    """rfl simp simp_all simpa norm_num omega decide native_decide linarith nlinarith positivity ring ring1
    aesop tauto trivial exact exact? apply? assumption contradiction exacts polyrith
    linear_combination abel group noncomm_ring bound continuity measurability fun_prop norm_num1 module
    infer_instance nofun grind bv_decide simp_arith decide! exact_mod_cast assumption_mod_cast solve_by_elim
    itauto cancel_denoms simpa? rwa""".split()
)


_WITH_ALTERNATIVES = frozenset(
    ["induction", "cases", "rcases", "obtain", "match", "induction'", "cases'"]
)


class TacticResult:
    __slots__ = ("error", "messages", "nested", "goals", "sorry")

    def __init__(self):
        self.error: str | None = None
        self.messages: list[dict] = []
        self.nested: list[str] = []  # goals of nested sorries, in order
        self.goals: list[str] = []
        self.sorry = False


def sends_proof_status(lean_version: str) -> bool:
    """`proofStatus` arrived in REPL v4.19.0 (PR #63): tags v4.3.0 to v4.18.0
    and v4.19.0-rc2 never send it."""
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?(-rc\d+)?", lean_version or "")
    if not m:
        return True
    version = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    return version > (4, 19, 0) or (version == (4, 19, 0) and not m.group(4))


def status(goals: list[str], sorry: bool) -> str:
    if goals:
        return "Incomplete: open goals remain"
    if sorry:
        return "Incomplete: contains sorry"
    return "Completed"


_ZERO = {"line": 0, "column": 0}


def run_tactic(tactic: str, goals: list[str], sorry: bool) -> TacticResult:
    r = TacticResult()
    r.sorry = sorry
    toks = lex(tactic)
    if not toks:
        r.error = "Lean error:\n<input>:1:0: unexpected end of input"
        return r
    head = toks[0].text
    if head not in KNOWN_TACTICS and head not in ("·", ".", "(", "{", "case", "next"):
        r.error = "Lean error:\n<input>:1:1: unknown tactic"
        return r
    if not goals:
        r.error = "Lean error:\nno goals to be proved"
        return r
    if head in ("·", ".", "case", "next"):
        _tactic_focus(tactic, toks, goals, r)
        return r
    main, rest = goals[0], goals[1:]
    bad = unknown_identifiers(toks)
    if bad:
        for t in bad:
            r.messages.append(message("error", _ZERO, _ZERO, f"Unknown identifier `{t.text}`"))
        r.sorry = True
        r.goals = rest
        return r
    words = {t.text for t in toks if t.kind == "id"}
    if head in ("have", "haveI") and len(toks) > 1:
        _tactic_have(tactic, toks, main, rest, r)
        return r
    if head in ("sorry", "admit"):
        r.nested.append(main)
        r.sorry = True
        r.goals = rest
        return r
    if head == "all_goals" and "sorry" in words:
        r.nested.extend(goals)
        r.sorry = True
        r.goals = []
        return r
    if head in _WITH_ALTERNATIVES and "=>" in tactic and "sorry" in words:
        # `induction n with | zero => sorry | succ k ih => sorry`: one sorry (and state) per alternative.
        for alt in re.finditer(r"\|\s*([\w']+)[^|]*?=>\s*sorry\b", tactic):
            r.nested.append(f"case {alt.group(1)}\n{main}")
        r.nested = r.nested or [main]
        r.sorry = True
        r.goals = rest
        return r
    if "sorry" in words or "admit" in words:
        r.nested.append(main)
        r.sorry = True
        r.goals = rest
        return r
    if head == "constructor":
        # `A ∧ B` / `A ↔ B` split in two; otherwise the first constructor
        # closes the goal (`True`, `Nat` by `Nat.zero`), as in the recorded trees.
        parts = _conjuncts(main)
        r.goals = (parts if parts is not None else []) + rest
        return r
    if head == "by_cases":
        _tactic_by_cases(tactic, toks, main, rest, r)
        return r
    if head in ("intro", "intros", "rintro"):
        names = [t.text for t in toks[1:] if t.kind == "id"] or ["a✝"]
        r.goals = [_intro(main, names)] + rest
        return r
    if head in _CLOSERS or (head in _WITH_ALTERNATIVES and "=>" in tactic):
        # `induction n with | zero => .. | succ k ih => ..`: the alternatives close the goal.
        r.goals = rest
        return r
    r.goals = goals
    return r


def _tactic_by_cases(
    tactic: str, toks: list[Tok], main: str, rest: list[str], r: TacticResult
) -> None:
    """`by_cases h : P`: goals `case pos` (h : P) and `case neg` (h : ¬P)."""
    colon = next((k for k, t in enumerate(toks) if t.text == ":"), None)
    name = toks[1].text if colon == 2 else "h"
    prop = norm(tactic[toks[colon].end :]) if colon is not None else norm(tactic[toks[0].end :])
    hyps, target = _split_goal(main)
    r.goals = [
        "\n".join([f"case {tag}"] + hyps + [f"{name} : {p}", "⊢ " + target])
        for tag, p in (("pos", prop), ("neg", f"¬{prop}"))
    ] + rest


def _tactic_focus(tactic: str, toks: list[Tok], goals: list[str], r: TacticResult) -> None:
    """`· tacs`, `case tag => tacs`, `next => tacs`: run tacs on one goal, which they must close."""
    chosen = 0
    if toks[0].text in ("case", "next"):
        arrow = next((k for k, t in enumerate(toks) if t.text == "=>"), None)
        if arrow is None:
            r.error = "Lean error:\n<input>:1:0: expected '=>'"
            return
        if toks[0].text == "case" and len(toks) > 1 and toks[1].text != "_":
            tag = f"case {toks[1].text}"
            chosen = next((k for k, g in enumerate(goals) if g.split("\n", 1)[0] == tag), -1)
            if chosen < 0:
                r.error = f"Lean error:\nCase tag '{toks[1].text}' not found."
                return
        body = tactic[toks[arrow].end :] if arrow + 1 < len(toks) else ""
    else:
        body = tactic[toks[0].end :]
    inner = run_sequence(body, [goals[chosen]], r.sorry)
    if inner.error is not None or inner.goals:
        r.error = inner.error or "Lean error:\nunsolved goals\n" + "\n\n".join(inner.goals)
        return
    r.messages, r.nested, r.sorry = inner.messages, inner.nested, inner.sorry
    r.goals = goals[:chosen] + goals[chosen + 1 :]


def run_sequence(text: str, goals: list[str], sorry: bool) -> TacticResult:
    """A tactic block (lines at its first line's column, or `;`-separated) run in order."""
    r = TacticResult()
    r.goals, r.sorry = list(goals), sorry
    for piece in _sequence_pieces(text):
        step = run_tactic(piece, r.goals, r.sorry)
        r.messages += step.messages
        r.nested += step.nested
        if step.error is not None:
            r.error = step.error
            return r
        r.goals, r.sorry = step.goals, step.sorry
    return r


def _sequence_pieces(text: str) -> list[str]:
    lines = [ln for ln in text.split("\n")]
    first = next((ln for ln in lines if ln.strip()), None)
    if first is None:
        return []
    column = len(first) - len(first.lstrip())
    pieces: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if pieces and indent > column:
            pieces[-1] += "\n" + line
        else:
            pieces.append(line.strip())
    return [
        p.strip()
        for piece in pieces
        for p in (piece.split(";") if "\n" not in piece and "<;>" not in piece else [piece])
        if p.strip()
    ]


def _tactic_have(tactic: str, toks: list[Tok], main: str, rest: list[str], r: TacticResult) -> None:
    name = toks[1].text if toks[1].kind == "id" else "this"
    colon = next((k for k, t in enumerate(toks) if t.text == ":"), None)
    assign = next((k for k, t in enumerate(toks) if t.text == ":="), None)
    hyps, target = _split_goal(main)
    if colon is None:
        ty = "?"
    else:
        end = toks[(assign if assign is not None else len(toks)) - 1].end
        ty = norm(tactic[toks[colon + 1].start : end]) if colon + 1 < len(toks) else "?"
    with_h = "\n".join(hyps + [f"{name} : {ty}", "⊢ " + target])
    if assign is None:
        r.goals = ["\n".join(hyps + ["⊢ " + ty]), with_h] + rest
        return
    value = {t.text for t in toks[assign + 1 :]}
    if "sorry" in value or "admit" in value:
        r.nested.append("\n".join(hyps + ["⊢ " + ty]))
        r.sorry = True
    r.goals = [with_h] + rest


def _split_goal(goal: str) -> tuple[list[str], str]:
    lines = goal.split("\n")
    for k in range(len(lines) - 1, -1, -1):
        if lines[k].startswith("⊢ "):
            return lines[:k], "\n".join(lines[k:])[2:]
    return lines, ""


def _intro(goal: str, names: list[str]) -> str:
    hyps, target = _split_goal(goal)
    for nm in names:
        t = target.strip()
        m = re.match(r"^∀\s*\(?\s*([^\s:,()]+)\s*:\s*([^,]+?)\)?\s*,\s*(.*)$", t, re.S)
        if m:
            hyps.append(f"{nm} : {m.group(2).strip()}")
            target = m.group(3).replace(m.group(1), nm) if m.group(1) != nm else m.group(3)
            continue
        depth = 0
        split = None
        for k, c in enumerate(t):
            if c in "([{⟨":
                depth += 1
            elif c in ")]}⟩":
                depth -= 1
            elif c == "→" and depth == 0:
                split = k
                break
        if split is None:
            break
        hyps.append(f"{nm} : {t[:split].strip()}")
        target = t[split + 1 :].strip()
    return "\n".join(hyps + ["⊢ " + target])


def _conjuncts(goal: str) -> list[str] | None:
    """`constructor` on `A ∧ B` / `A ↔ B`: the two goals (case tags as Lean writes them)."""
    hyps, target = _split_goal(goal)
    depth = 0
    for k, c in enumerate(target):
        if c in "([{⟨":
            depth += 1
        elif c in ")]}⟩":
            depth -= 1
        elif depth == 0 and c in "∧↔":
            left, right = target[:k].strip(), target[k + 1 :].strip()
            if c == "∧":
                tags = ("left", "right")
            else:
                tags = ("mp", "mpr")
                left, right = f"{left} → {right}", f"{right} → {left}"
            return [
                "\n".join([f"case {tags[0]}"] + hyps + ["⊢ " + left]),
                "\n".join([f"case {tags[1]}"] + hyps + ["⊢ " + right]),
            ]
    return None
