"""The generated list of code-running tactics (issue 43 item 2): the file
tools/gen_code_tactics.py wrote parses and holds data only, names the source
revisions it was read from, and is merged into the refused set; the generator
itself, run on a small tree written here, finds the tactic whose elaborator
evaluates code and not the plain one."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

from leanrpc.policy import REFUSED_COMMANDS, scan
from leanrpc.policy.generated import CODE_TACTICS
from leanrpc.policy.lists import GLUED_COMMANDS

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "server" / "leanrpc" / "policy" / "generated.py"


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_code_tactics", ROOT / "tools" / "gen_code_tactics.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def test_generated_file_is_data_with_its_sources() -> None:
    tree = ast.parse(GENERATED.read_text(encoding="utf-8"))
    doc = ast.get_docstring(tree) or ""
    assert "tools/gen_code_tactics.py" in doc
    assert re.search(r"\b[0-9a-f]{40}\b", doc), "the header names no source revision"
    assert not [
        n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom, ast.FunctionDef))
    ]
    assert [type(n) for n in tree.body] == [ast.Expr, ast.Assign]
    # Known cases from Mathlib's and Plausible's sources.
    assert {"eval%", "polyrith", "plausible", "slim_check", "run_tac"} <= CODE_TACTICS


def test_generated_names_are_refused() -> None:
    for token in CODE_TACTICS:
        if token.startswith("#"):
            continue
        assert token in REFUSED_COMMANDS or token in GLUED_COMMANDS.get(token.rstrip("%"), ())
    for text, construct in [
        ("example : (2 : ℕ) ^ 10 = eval% 2 ^ 10 := by rfl", "eval%"),
        ("example (x y : ℚ) (h : x = y) : y = x := by\n  polyrith", "polyrith"),
        ("example : ∀ n : ℕ, n + 0 = n := by plausible", "plausible"),
    ]:
        verdict = scan(text)
        assert verdict.refused == construct, (text, verdict)
    # `eval` apart from `%` is a plain name, and `decide` stays allowed.
    assert not scan("def eval (n : ℕ) := n\n#check eval % 2").refused
    assert not scan("example : 2 + 2 = 4 := by decide").refused


FIXTURE = {
    "Mathlib/Tactic/Runs.lean": """
/-- runs the user's term -/
syntax (name := runsIt) "runs_it " term : tactic

@[tactic runsIt] def evalRunsIt : Tactic := fun stx => do
  let v ← unsafe evalExpr Nat (mkConst ``Nat) (← elabTerm stx[1] none)
  logInfo m!"{v}"

elab "shells_out" : tactic => do
  helper

def helper : TacticM Unit := do
  let _ ← IO.Process.output { cmd := "true" }
""",
    "Mathlib/Tactic/Plain.lean": """
syntax (name := plainTac) "plain_tac" : tactic

/-- A docstring that mentions evalExpr does not make it run code. -/
@[tactic plainTac] def evalPlain : Tactic := fun _ => do
  -- unsafe evalExpr in a comment neither
  pure ()

elab "quiet" : tactic => pure ()
""",
}


def test_generator_on_a_fixture_tree(tmp_path: Path) -> None:
    gen = _generator()
    lean, mathlib = tmp_path / "lean4", tmp_path / "mathlib4"
    lean.mkdir()
    (lean / ".revision").write_text("lean4 fixture 0123", encoding="utf-8")
    for rel, text in FIXTURE.items():
        path = mathlib / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    out = tmp_path / "generated.py"
    assert gen.main(["--lean", str(lean), "--mathlib", str(mathlib), "--out", str(out)]) == 0
    namespace: dict[str, object] = {}
    exec(compile(out.read_text(encoding="utf-8"), str(out), "exec"), namespace)
    assert namespace["CODE_TACTICS"] == frozenset({"runs_it", "shells_out"})
    assert "lean4 fixture 0123" in str(namespace["__doc__"])


def test_generator_refuses_a_missing_tree(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _generator().main(["--lean", str(tmp_path / "no"), "--mathlib", str(tmp_path)])
