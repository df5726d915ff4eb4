"""The compiled builds of the axiom plan's masking and declaration scan
(leanrpc.core.blanking_c and leanrpc.core.declaring_c: setup.py compiles
core/blanking.py and core/declaring.py unchanged with Cython) answer exactly
as their interpreted source does: the same masks, lexing errors, declarations
(with `types` too) and plans, on the 805 real proofs' bodies and on fuzzed
soups of declaration keywords, scopes, comments and literals; and the facades
(core.masking, core.declarations) load them."""

from __future__ import annotations

import random

from leanrpc.core import blanking, blanking_c, declarations, declaring, declaring_c, masking
from leanrpc.core._impl import extensions_disabled
from leanrpc.core.headers import split_header
from leanrpc.core.lexer import LexError
from testkit import real_proofs

PIECES = [
    "theorem", "lemma", "def", "example", "instance", "abbrev", "opaque", "namespace", "section",
    "end", "mutual", " ", "\n", "  ", "-- c\n", "/- c /- n -/ -/", "/-- d -/", "/-! m -/", '"s"',
    '"a\\"b"', "'a'", "'\\n'", "«q r»", "(", ")", "[", "]", "⟨", "⟩", "@[simp]", " where\n  aux := 1",
    " := by\n  simp", "deriving Repr", "x", "N.y", "open Foo in", "private", "noncomputable",
    "(priority := 10)", "_root_.z", "structure", "class", "inductive", "---", "/--/", 's!"{x}"',
    "theoremx", "defn", "end N", "r\"raw\"", "x'", "ℝ", ":", "=", "--", "/-",
]  # fmt: skip


def _soups(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES) for _ in range(rng.randint(1, 25))) for _ in range(count)]


def _mask(build, text: str):
    try:
        return build.mask(text)
    except LexError as error:
        return ("error", error.reason, error.offset)


def _scan(build, text: str):
    """Declarations (plain and with types) and the plan, as plain values."""
    try:
        found = [
            (d.kind, d.name, d.offset, d.name_at, d.auxiliaries, d.print_name)
            for d in build.declarations(text)
        ]
        typed = [(d.kind, d.name, d.offset) for d in build.declarations(text, types=True)]
        plan = build.plan_axiom_check(text, 3, 2, nonce="n")
    except LexError as error:
        return ("error", error.reason, error.offset)
    return found, typed, (plan.body, plan.names, plan.edits, plan.print_command)


def test_the_same_masks_declarations_and_plans_on_every_real_proof():
    bodies = [split_header(text).body for _name, text in real_proofs()]
    assert len(bodies) == 805
    planned = 0
    for body in bodies:
        assert _mask(blanking_c, body) == _mask(blanking, body)
        compiled = _scan(declaring_c, body)
        assert compiled == _scan(declaring, body)
        planned += compiled[0] != "error" and bool(compiled[2][1])
    assert planned > 780  # nearly every proof has a name to ask `#print axioms` about


def test_the_same_masks_declarations_and_plans_on_fuzzed_soups():
    errors = found = 0
    for text in _soups(6000, seed=38):
        assert _mask(blanking_c, text) == _mask(blanking, text), text
        compiled = _scan(declaring_c, text)
        assert compiled == _scan(declaring, text), text
        if compiled[0] == "error":
            errors += 1
        else:
            found += bool(compiled[0])
    # The soups reach both outcomes: texts the lexer refuses, and declarations found.
    assert errors > 1000 and found > 600


def test_the_facades_load_the_compiled_builds():
    if extensions_disabled():
        assert masking.IMPLEMENTATION == declarations.IMPLEMENTATION == "python"
        assert declarations.plan_axiom_check is declaring.plan_axiom_check
        return
    assert masking.IMPLEMENTATION == declarations.IMPLEMENTATION == "compiled"
    assert masking.mask is blanking_c.mask
    assert declarations.plan_axiom_check is declaring_c.plan_axiom_check
    assert declarations.mask is masking.mask
