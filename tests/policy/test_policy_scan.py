"""The `proof` code policy's scanner: every construct of issue 25 item 1 is
refused with its line and column, a mention in a comment, string, raw string,
char literal or `«»` name is not, and none of the 805 real proofs is refused."""

from __future__ import annotations

import pytest

from leanrpc.core.lexer import lex
from leanrpc.policy import scan
from leanrpc.policy.scan import UNREADABLE
from testkit import real_proofs

REFUSED = [
    ("#eval 1", "#eval", 1, 0),
    ("#eval! IO.println 1", "#eval!", 1, 0),
    ("theorem t : True := trivial\n#exit", "#exit", 2, 0),
    ("run_cmd pure ()", "run_cmd", 1, 0),
    ("run_elab pure ()", "run_elab", 1, 0),
    ("run_meta pure ()", "run_meta", 1, 0),
    ("theorem t : True := by\n  run_tac pure ()\n  trivial", "run_tac", 2, 2),
    # Mathlib's conv-mode macro over `run_tac`: the snippet's own TacticM code, IO included.
    ("theorem t : 1 = 1 := by\n  conv => run_conv pure ()", "run_conv", 2, 10),
    ("theorem t : 1 = 1 := by\n  conv =>\n    run_conv (IO.println 1 : IO Unit)", "run_conv", 3, 4),
    ("declare_aesop_rule_sets [Foo]", "declare_aesop_rule_sets", 1, 0),
    ('elab "x" : tactic => pure ()', "elab", 1, 0),
    ("elab_rules : tactic | `(tactic| x) => pure ()", "elab_rules", 1, 0),
    ('macro "x" : tactic => `(tactic| trivial)', "macro", 1, 0),
    ('local macro "x" : term => `(1)', "macro", 1, 6),
    ("macro_rules | `(x) => `(1)", "macro_rules", 1, 0),
    ('syntax "x" : term', "syntax", 1, 0),
    ("declare_syntax_cat foo", "declare_syntax_cat", 1, 0),
    ("initialize pure ()", "initialize", 1, 0),
    ("builtin_initialize pure ()", "builtin_initialize", 1, 0),
    ("unsafe def x : Nat := 1", "unsafe", 1, 0),
    ("open Lean in\nrun_cmd pure ()", "run_cmd", 2, 0),
    ("set_option maxHeartbeats 0 in\n#eval 1", "#eval", 2, 0),
    ("@[implemented_by g] def f : Nat := 1", "attribute implemented_by", 1, 2),
    ('@[extern "c_f"] def f : Nat := 1', "attribute extern", 1, 2),
    ("@[export f] def f : Nat := 1", "attribute export", 1, 2),
    ("@[init g] def f : IO Unit := pure ()", "attribute init", 1, 2),
    ("@[command_elab x] def f := 1", "attribute command_elab", 1, 2),
    ("@[term_elab x] def f := 1", "attribute term_elab", 1, 2),
    ("@[tactic x] def f := 1", "attribute tactic", 1, 2),
    ("@[macro x] def f := 1", "attribute macro", 1, 2),
    ("@[delab app.f] def f := 1", "attribute delab", 1, 2),
    ("@[app_unexpander f] def f := 1", "attribute app_unexpander", 1, 2),
    ("@[simproc] def f := 1", "attribute simproc", 1, 2),
    ("@[csimp] theorem f : a = b := rfl", "attribute csimp", 1, 2),
    ("@[simp, builtin_init] def x := 1", "attribute builtin_init", 1, 8),
    ("@[local implemented_by g] def f := 1", "attribute implemented_by", 1, 8),
    ("attribute [implemented_by g] f", "attribute implemented_by", 1, 11),
    ('attribute [local extern "x"] f', "attribute extern", 1, 17),
    ("set_option debug.skipKernelTC true", "set_option debug.skipKernelTC", 1, 11),
    (
        "set_option debug.skipKernelTC true in\ntheorem t : False := sorry",
        "set_option debug.skipKernelTC",
        1,
        11,
    ),
    ("set_option compiler.extract_closed false", "set_option compiler.extract_closed", 1, 11),
    ("set_option interpreter.prefer_native true", "set_option interpreter.prefer_native", 1, 11),
    ("set_option «debug».skipKernelTC true", "set_option debug.skipKernelTC", 1, 11),
    ("set_option some.unknown.option 1", "set_option some.unknown.option", 1, 11),
    # The layouts that defeated the old axiom scanner: the policy reads them too.
    ("theorem a'' : True := trivial #eval 1", "#eval", 1, 30),
    ('def s := r#"a"b"#\n#eval 1', "#eval", 2, 0),
    (" " * 400 + "#eval 1", "#eval", 1, 400),
    ("def c := '\"'\n#eval 3", "#eval", 2, 0),
    ("def c := '\\''\n#eval 2", "#eval", 2, 0),
    ("/- a /- nested -/ still a comment -/ #eval 1", "#eval", 1, 37),
    # Interpolated strings: a hole is code (a term whose `by` block runs tactics) ...
    ('def x := s!"{by run_tac pure (); exact 1}"', "run_tac", 1, 16),
    (
        'def x := "{by run_tac pure ()}"',
        "run_tac",
        1,
        14,
    ),  # whether it is interpolated is the parser's call
    # ... and a quote inside a hole ends the string where a plain reading does not:
    # the text after it reads two ways, so it is refused (here it hides an #eval,
    # or, with no candidate at all, a theorem from the axiom check).
    ('def x := s!"{"\\""}" \n#eval 1', UNREADABLE, 1, 11),
    ('def x := s!"{\'"\'}"\n#eval 1', UNREADABLE, 1, 11),
    ('def x := s!"a{"}"}"\n#eval 1', UNREADABLE, 1, 11),
    # Issue 43: read as Lean's tokenizer reads it (longest match, `«»` glued
    # to a keyword, a `]` inside a string or comment, chars after `»`/digits).
    # (glued to more of a name: `#evalIO` if `#eval` were no token; refused either way)
    ('#evalIO.println "x"', UNREADABLE, 1, 7),
    ('theorem t : True := trivial#eval IO.println "x"', "#eval", 1, 27),
    ('run_cmd«IO».println "x"', "run_cmd", 1, 0),
    (
        "set_option«debug».skipKernelTC true in\ntheorem t : True := trivial",
        "set_option debug.skipKernelTC",
        1,
        10,
    ),
    ('@[deprecated "]", implemented_by g] def f := 1', "attribute implemented_by", 1, 18),
    ("@[deprecated /- ] -/, implemented_by g] def f := 1", "attribute implemented_by", 1, 22),
    ("@[my_code_attr] def f := 1", "attribute my_code_attr", 1, 2),
    # The long fuzzer (2026-12-06): a bracket where a name is due had been read as the
    # argument of a name yet to come, and a closer as any opener's.
    ("@[(implemented_by g)] def f := 1", "attribute", 1, 2),
    ("@[simp (x]] def f := 1", "attribute", 1, 9),
    ("def b := 1'\"'\n#eval IO.println 1 -- \"", "#eval", 2, 0),
    ("def «b» := «b»'\"'\n#eval IO.println 1 -- \"", "#eval", 2, 0),
    ("#checkIO 1", "#checkIO", 1, 0),
    ('notation "#e" => 1', 'notation "#e"', 1, 9),
    ('infixl:65 " --> " => f', 'notation " --> "', 1, 10),
    # `#` and one letter is `#` and then the letter's own token, as Lean reads it
    # (the lexer fuzzer found both: the letter read as part of a `#`-word hid a
    # raw string, and a name with a prime, so what Lean runs sat in a literal).
    ('#r" :=\\"#eval IO.println 1 --"', "#eval", 1, 8),
    ('#s\'"\' "#eval IO.println 1 --"', "#eval", 1, 7),
    # Fail closed: what the lexer cannot read for certain.
    # (A prime after a symbol token's prime is a char literal to Lean, here a
    # malformed one; the fuzzer found it skipped as part of a name's primes.)
    ("theorem t : ∑'' = 1 := by native_decide", UNREADABLE, 1, 14),
    # (A `'` after a `#`-word is a char literal too, here a malformed one; the
    # fuzzer found it skipped as a prime, and a `#exit` Lean's recovery reads.)
    (
        'initializetrivialimplemented_by r"IO.printlnr#"##check\'\n--"}"initializet.1"#∑\']]\' ,,"#exit"}"throwError#[',
        UNREADABLE,
        1,
        54,
    ),
    ("x #check' x #eval 1", UNREADABLE, 1, 8),
    # (Where the word is no token, Lean reads `#`, a name with a prime, then a string;
    # or the name `align.r`, `#`, then a string where the policy read a raw string.)
    ("#align'\"' -- \" #eval IO.println 1", UNREADABLE, 1, 6),
    ('#align.r#" " #eval IO.println 1 -- "#', UNREADABLE, 1, 6),
    # (Should a hole not parse, Lean reads on from inside the string: a `#eval` there, and
    # any construct after it, even an allowed one, is refused.)
    ('def m := s!"{‹.x#⟨} #eval IO.println 1 -- "', UNREADABLE, 1, 20),
    ('def x := s!"{n} and {m}"\n#check x', UNREADABLE, 2, 0),
    ("def x := a +'\"'\n#eval 1", UNREADABLE, 1, 12),
    ("theorem t : True := trivial\n\t#eval 1", UNREADABLE, 2, 0),
    ("/- unterminated #eval 1", UNREADABLE, 1, 0),
    ("def x := y.5e3run_cmd", UNREADABLE, 1, 11),
    (
        'def f : Lean.MetaM Unit := throwError "{"\\""}"\naxiom ax : False\ntheorem t : 2 + 2 = 5 := ax.elim',
        UNREADABLE,
        1,
        38,
    ),
]


@pytest.mark.parametrize(
    ("text", "construct", "line", "column"),
    REFUSED,
    ids=[r[1] + f"@{i}" for i, r in enumerate(REFUSED)],
)
def test_each_construct_is_refused_with_its_line_and_column(text, construct, line, column):
    found = scan(text)
    assert (found.refused, found.line, found.column) == (construct, line, column)
    assert f"{construct} at line {line}, column {column}" in found.message


# Code a standard tactic runs because the snippet hands it over (docs/SECURITY.md): a rule
# added in an Aesop call (a constant of tactic type, evaluated by Aesop's `tactic` builder,
# which its default builder tries too), after `aesop…` or any tactic built on Aesop, the
# command form of the `@[aesop]` attribute, and configurations that hold code the tactic
# runs (linarith's `discharger` and preprocessors; solve_by_elim's `discharge`, `proc`).
# text -> (construct, line, column)
HANDED_OVER = {
    "def evil : TacticM Unit := pure ()\nexample := by aesop (add safe evil)": (
        "aesop (add …)",
        2,
        14,
    ),
    "example := by aesop? (config := {}) (add unsafe 50% tactic evil)": ("aesop? (add …)", 1, 14),
    "example : True := by\n  aesop_cat\n    -- c\n    (add safe evil)": ("aesop_cat (add …)", 2, 2),
    "example : True := by finiteness (add safe evil)": ("(add …)", 1, 33),
    "example : True := by restrict_tac (\n  /- c -/ add safe evil)": ("(add …)", 2, 10),
    "example : True := by finiteness (-- c\n    add safe evil)": ("(add …)", 2, 4),
    "example : True := by finiteness (add 50% evil)": ("(add …)", 1, 33),
    "add_aesop_rules safe tactic evil": ("add_aesop_rules", 1, 0),
    "example := by linarith (config := {discharger := pure ()})": ("linarith (config := …)", 1, 14),
    "example := by\n  nlinarith! +splitNe\n    (discharger := t)": (
        "nlinarith! (discharger := …)",
        2,
        2,
    ),
    "example := by linarith /- c -/ (config := {})": ("linarith (config := …)", 1, 14),
    "example := by solve_by_elim* (discharge := fun _ => t)": (
        "solve_by_elim (discharge := …)",
        1,
        14,
    ),
    "example : True := by apply_rules (config := {}) [h]": ("apply_rules (config := …)", 1, 21),
}


@pytest.mark.parametrize("text", list(HANDED_OVER))
def test_code_handed_to_a_tactic_is_refused_at_the_tactic(text):
    construct, line, column = HANDED_OVER[text]
    found = scan(text)
    assert (found.refused, found.line, found.column) == (construct, line, column)


ALLOWED = [
    "-- #eval 1\ntheorem t : True := trivial",
    "/- #eval 1 /- run_cmd -/ elab -/ theorem t : True := trivial",
    "/-- doc: `#eval` and `macro` -/ theorem t : True := trivial",
    'def s := "#eval 1 -- run_cmd"',
    'def s := "escaped \\" #eval"',
    'def s := r#"a"b #eval"#',
    'def s := r"#eval"',
    "def «#eval» := 1",
    "def «unsafe» := 1\ntheorem «elab» : True := trivial",
    "theorem foo' : True := trivial\ntheorem foo'' : True := trivial",
    "def c := 'a'\ndef d := '\\n'",
    "theorem t (h : x.elab = 1) (syntax_ok : True) : True := trivial",
    "set_option maxHeartbeats 400000 in\ntheorem t : True := by trivial",
    "set_option maxRecDepth 10000\nset_option linter.unusedVariables false\nset_option pp.all true in #check 1",
    "set_option synthInstance.maxHeartbeats 40000\nset_option checkBinderAnnotations false",
    "set_option autoImplicit true\nset_option relaxedAutoImplicit false",
    "@[simp] theorem t : 1 = 1 := rfl\nattribute [local simp] Nat.add_comm",
    "@[simp, reducible] def f := 1\n@[ext] structure S where x : Nat",
    'notation "‖" x "‖" => x\nlocal notation "f" => 1\ninstance : Inhabited Nat := ⟨0⟩',
    "open Nat in\ntheorem t : True := trivial",
    "#check Nat.add_comm\n#print axioms Nat.add_comm\n#reduce 1 + 1",
    "theorem t : True := by decide",
    "theorem t : #S ≤ 1 := by simp",  # Mathlib's cardinal notation is not a command
    "theorem t (s s' : Finset ℕ) : #s' + #s = #s + #s' := add_comm _ _",  # Finset.card
    "example : #v[1, 2].size = 2 := rfl",  # core's Vector literal
    'def x := s!"{n} and {m}"',  # interpolation both readings agree on
    'def x := "{x}" -- #eval in a comment\n#check x',
    'def x := s!"{n}" ++ "}"\ntheorem t : True := trivial',
    'theorem s : "{" ++ "}" = "{}" := rfl',  # issue 43: a brace string after an operator
    "theorem t (s : Set ℕ) (f : ℕ → ℕ) : f '' s = f '' s := rfl",
    "theorem t : ∑' i : ℕ, (0 : ℝ) = 0 := by simp\n#check f ⁻¹' s",
    "theorem t (h : a ∧ b ∧ c) : c := h.2.2\ntheorem u (p : ℕ × ℕ) : p.1.succ = p.1 + 1 := rfl",
    "@[simp, local ext] theorem t : 1 = 1 := rfl\nattribute [-simp] t\nset_option maxHeartbeats 400000 in\ntheorem u : True := trivial",
    # the code-holding tactics with their plain arguments, flags and Aesop's other clauses
    "example (h : 0 < x) : 0 < x := by linarith [h]\nexample : 0 < 1 := by nlinarith [sq_nonneg (x - 1)]",
    "example (h : 0 < x) : 0 < x := by linarith only [h]\nexample : 0 < 1 := by linarith +splitNe",
    "example (h : 0 < x) : 0 < x := by\n  linarith\n  -- (config := {}) in a comment\n  exact h",
    "example : True := by aesop\nexample : True := by aesop (rule_sets := [-builtin]) (config := {})",
    "example : True := by solve_by_elim [h]\nexample : True := by (linarith)",
    # `add` as a named argument, a case name, a field: no Aesop clause
    "theorem t : x := foo (zero := by simp)\n  (add := ?_) (smul := ?_) hu",
    "theorem t : x := by\n  induction x with\n  | zero => simp\n  | add a b _ _ ha hb => simp",
    "theorem t : x := by\n  have h4 := (h1.sub h2).add h3\n  simp [mul_add, add_mul] at h4",
    '-- (add safe evil)\ntheorem t : True := trivial\ndef s := "(add safe evil)"',
    "theorem t (a b : P) : (add a b).x = a.x + b.x := rfl",  # a function named `add`
]


@pytest.mark.parametrize("text", ALLOWED)
def test_proof_text_and_mentions_are_allowed(text):
    found = scan(text)
    assert found.refused == "" and found.message == ""


@pytest.mark.parametrize(
    ("text", "native"),
    [
        ("theorem t : 2 + 2 = 4 := by native_decide", "native_decide"),
        ("theorem t : 2 + 2 = 4 := by decide +native", "native"),
        ("theorem t : True := Lean.ofReduceBool _ _ rfl", "Lean.ofReduceBool"),
        ("example : Lean.«reduceBool» true = true := rfl", "Lean.«reduceBool»"),
        ("open Lean in example : reduceNat 1 = 1 := rfl", "reduceNat"),
    ],
)
def test_native_evaluation_is_reported_not_refused(text, native):
    found = scan(text)
    assert found.refused == "" and found.native == native


def test_native_mentions_in_comments_are_not_native():
    assert scan("-- native_decide would do\ntheorem t : True := trivial").native == ""


def test_the_lexer_reads_lean_lexically():
    text = 'a /- b /- c -/ d -/ e -- f\n"g\\"h" \'i\' h\' r#"j"k"# «l m»'
    kinds = [(text[s:e], kind) for kind, s, e in lex(text)]
    assert kinds == [
        ("a", "ident"),
        ("e", "ident"),
        ('"g\\"h"', "str"),
        ("'i'", "char"),
        ("h'", "ident"),
        ('r#"j"k"#', "raw"),
        ("«l m»", "ident"),
    ]


def test_no_real_proof_is_refused():
    proofs = real_proofs()
    assert len(proofs) == 805
    refused = [
        (name, found.message) for name, found in ((n, scan(t)) for n, t in proofs) if found.refused
    ]
    assert refused == []
    # Native evaluation is reported where the proofs use it (ProofNet-Verified
    # has 15 that use native_decide), so the count can fail.
    assert (
        sum(1 for _n, t in proofs if scan(t).native)
        == sum(1 for _n, t in proofs if "native_decide" in t)
        == 15
    )
