"""The generated list of code-running tactics (issue 43 item 2): the file
tools/gen_code_tactics.py wrote parses and holds data only, names the source
revisions it was read from (the committed manifest, tools/code_tactics_sources.tsv,
lists every file), and is merged into the refused set; the generator itself,
run on a small tree written here, finds the tactic whose elaborator evaluates
code and not the plain one, and refuses a tree that differs from its manifest."""

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
    # Known cases from Lean's, Mathlib's, Plausible's, Qq's, LeanSearchClient's sources.
    assert {
        "eval%",
        "polyrith",
        "plausible",
        "slim_check",
        "run_tac",
        "run_tacq",
        "by_elabq",
        "run_elab",
        "run_meta",
        "#eval",
        "#leansearch",
        "include_str",
    } <= CODE_TACTICS
    # a `(config := …)` value is evaluated by ordinary tactics: no config
    # evaluation makes a tactic code-running (Mathlib's `apply (config := …)`)
    assert not {"apply", "simp", "decide"} & CODE_TACTICS


def test_manifest_names_every_source_with_its_commit() -> None:
    gen = _generator()
    rows = gen.read_manifest(ROOT / "tools" / "code_tactics_sources.tsv")
    repos = {repo for repo, _, _, _ in rows}
    assert {"leanprover/lean4", "leanprover-community/mathlib4"} <= repos
    assert {"leanprover-community/batteries", "leanprover-community/aesop"} <= repos
    assert sum(form == "whole" for *_, form in rows) > 3900, "whole files read"
    mathlib = [
        path for repo, _, path, form in rows if repo.endswith("/mathlib4") and form == "whole"
    ]
    assert len(mathlib) > 3000 and "Mathlib/Tactic/SlimCheck.lean" in mathlib
    doc = ast.get_docstring(ast.parse(GENERATED.read_text(encoding="utf-8"))) or ""
    for repo, commit, _, _ in rows:  # the header names every repository and commit read
        assert repo in doc and commit in doc


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


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _fixture_tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "src"
    rows = ["# repo\tcommit\tpath\tform"]
    for rel, text in FIXTURE.items():
        path = root / "leanprover-community" / "mathlib4" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        rows.append(f"leanprover-community/mathlib4\t{COMMIT}\t{rel}\twhole")
    manifest = tmp_path / "sources.tsv"
    manifest.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return root, manifest


def test_generator_on_a_fixture_tree(tmp_path: Path) -> None:
    root, manifest = _fixture_tree(tmp_path)
    out = tmp_path / "generated.py"
    args = ["--root", str(root), "--manifest", str(manifest), "--out", str(out)]
    assert _generator().main(args) == 0
    namespace: dict[str, object] = {}
    exec(compile(out.read_text(encoding="utf-8"), str(out), "exec"), namespace)
    assert namespace["CODE_TACTICS"] == frozenset({"runs_it", "shells_out"})
    assert COMMIT in str(namespace["__doc__"])


def test_generator_reads_quoted_and_wrapped_tokens(tmp_path: Path) -> None:
    """`withPosition("#tok" …)` after the syntax name, and an elaborator whose
    syntax is declared elsewhere: the first atom of its quotation pattern."""
    names: dict[str, str] = {}
    text = """
syntax (name := searchTac)
  withPosition("#finder" (colGt str)?) : tactic

@[tactic searchTac] def finder : Tactic := fun _ => do
  let _ ← IO.Process.output { cmd := "curl" }

@[builtin_command_elab «elsewhere»]
def elabElsewhere : CommandElab
  | `(#elsewhere%$tk $t) => do let _ ← evalConst Nat `x
  | _ => throwUnsupportedSyntax
"""
    found = _generator().read_file(text, names)
    assert names["searchTac"] == "#finder"
    assert [(n, q) for _, n, q in found] == [("searchTac", None), ("elsewhere", "#elsewhere")]


def test_generator_refuses_a_tree_unlike_its_manifest(tmp_path: Path) -> None:
    root, manifest = _fixture_tree(tmp_path)
    (root / "extra.lean").write_text('elab "x" : tactic => pure ()\n', encoding="utf-8")
    with pytest.raises(SystemExit):
        _generator().main(["--root", str(root), "--manifest", str(manifest)])
    with pytest.raises(SystemExit):
        _generator().main(["--root", str(tmp_path / "no"), "--manifest", str(manifest)])


def test_generator_follows_macros_into_code_running_tactics(tmp_path: Path) -> None:
    """A macro that expands into a code-running tactic runs code too (Mathlib's
    `run_conv`, a conv macro over `run_tac`, which the first reading missed), and so
    does one over that macro, and an elaborator that builds `#eval` syntax and
    elaborates it; a macro over a plain tactic does not."""
    fixture = {
        "Mathlib/Tactic/RunCmd.lean": """
elab "run_tac " e:doSeq : tactic => do
  ← unsafe evalTerm (TacticM Unit) (mkApp (mkConst ``TacticM) (mkConst ``Unit)) e
""",
        "Mathlib/Tactic/Conv.lean": """
macro "run_conv" e:doSeq : conv => `(conv| tactic' => run_tac $e)

macro "conv_lhs_simp" : conv => `(conv| lhs; simp)
""",
        "Mathlib/Tactic/Over.lean": """
syntax (name := deeper) "deeper " doSeq : conv
macro_rules
  | `(conv| deeper $e) => `(conv| run_conv%$e $e)

/-- `run_tac` in a comment names nothing. -/
macro "mentions" : tactic => `(tactic| trivial)

elab "#shows " t:term : command => do
  elabCommand (← `(command| #eval $t))

elab "#eval " t:term : command => do
  let _ ← unsafe evalExpr Nat (mkConst ``Nat) (← Term.elabTerm t none)
""",
    }
    root = tmp_path / "src"
    rows = []
    for rel, text in fixture.items():
        path = root / "leanprover-community" / "mathlib4" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        rows.append(("leanprover-community/mathlib4", COMMIT, rel, "whole"))
    tokens, unresolved = _generator().generate(root, rows)
    assert set(tokens) == {"run_tac", "run_conv", "deeper", "#shows", "#eval"}
    assert tokens["run_conv"].endswith("Mathlib/Tactic/Conv.lean")
    assert unresolved == []
