"""The pinning table (issue 25 item 2): each way of proving something other
than the reference gets the right verdict, through the real gRPC server on
the stand-in REPL. The reference is elaborated once and its types cached."""

from __future__ import annotations

import pytest

from verify_support import running_server

pytestmark = pytest.mark.timeout(120)

HEADER = "import Mathlib\n\n"
REFERENCE = HEADER + "theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  sorry\n"

# (label, snippet body, expected status, expected reason ("" = passed))
TABLE = [
    ("good", "theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  norm_num\n", "VALID", ""),
    (
        "good with a helper lemma",
        "lemma helper : 4 = 4 := rfl\n\ntheorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  exact helper\n",
        "VALID",
        "",
    ),
    (
        "good with other spacing and a comment",
        "theorem   target ( x : Nat )\n    (h : 0<x) :\n  2+2 = 4 := by -- same statement\n  norm_num\n",
        "VALID",
        "",
    ),
    (
        "changed statement",
        "theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 5 := by\n  norm_num\n",
        "INVALID",
        "STATEMENT_MISMATCH",
    ),
    (
        "weaker hypotheses",
        "theorem target (x : Nat) (h : 0 < x) (h2 : False) : 2 + 2 = 4 := by\n  norm_num\n",
        "INVALID",
        "STATEMENT_MISMATCH",
    ),
    (
        "renamed",
        "theorem target' (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  norm_num\n",
        "INVALID",
        "MISSING_DECLARATION",
    ),
    ("missing", "theorem other : 1 = 1 := rfl\n", "INVALID", "MISSING_DECLARATION"),
    (
        "theorem replaced by axiom",
        "axiom target (x : Nat) (h : 0 < x) : 2 + 2 = 4\n",
        "INVALID",
        "KIND_CHANGED",
    ),
    (
        "extra axiom",
        "axiom cheat : False\n\ntheorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  exact cheat.elim\n",
        "INVALID",
        "FORBIDDEN_AXIOM",
    ),
    (
        "user instance",
        "instance : Add Nat := ⟨Nat.mul⟩\n\ntheorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  norm_num\n",
        "INVALID",
        "STATEMENT_MISMATCH",
    ),
    (
        "native_decide",
        "theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  native_decide\n",
        "INVALID",
        "FORBIDDEN_AXIOM",
    ),
    (
        "sorry",
        "theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  sorry\n",
        "SORRY",
        "CONTAINS_SORRY",
    ),
]


async def test_pinning_table_gives_the_right_verdict_for_each_case():
    async with running_server() as (app, client):
        codes = [HEADER + body for _label, body, _status, _reason in TABLE]
        results = await client.verify_batch(codes, references=[REFERENCE] * len(codes))
        for (label, _body, status, reason), result in zip(TABLE, results):
            assert result.status == status, (label, result.status, result.error, result.reference)
            assert result.reference is not None, label
            assert result.reference.reason == reason, (label, result.reference)
            assert result.reference.passed == (reason == ""), label
            if reason:
                assert result.reference.declaration == "target", label
        # Without the reference (and check_axioms off), every one of the cheats
        # but `sorry` passes (the pin is what catches them), except native_decide,
        # which the `proof` code policy never sends (issue 25 item 1).
        plain = await client.verify_batch(codes, check_axioms=False)
        expected = [
            "REJECTED" if label == "native_decide" else "VALID" for label, *_ in TABLE[:-1]
        ] + ["SORRY"]
        assert [r.status for r in plain] == expected
        assert all(r.reference is None for r in plain)
        # One elaboration of the reference served the whole batch (and the rerun).
        assert app.service.references.elaborations == 1


TYPE_REFERENCE = HEADER + (
    "structure S where\n  val : Nat\n  pos : val > 0\n\n"
    "theorem t (s : S) : s.val ≠ 0 := by\n  sorry\n"
)


async def test_a_structure_the_statement_uses_is_pinned_too():
    """`t`'s type reads the same whatever `S` holds: a snippet that redefines
    `S` (a field that makes the statement vacuous) is caught on `S` itself."""
    same = HEADER + (
        "structure S where\n  val : Nat\n  pos : val > 0\n\n"
        "theorem t (s : S) : s.val ≠ 0 := by\n  omega\n"
    )
    vacuous = HEADER + (
        "structure S where\n  val : Nat\n  pos : False\n\n"
        "theorem t (s : S) : s.val ≠ 0 := by\n  exact s.pos.elim\n"
    )
    async with running_server() as (_app, client):
        good, bad = await client.verify_batch([same, vacuous], references=[TYPE_REFERENCE] * 2)
        assert good.status == "VALID" and good.reference.passed, (good.error, good.reference)
        assert good.reference.declarations == ["S", "t"]
        assert bad.status == "INVALID" and (bad.reference.reason, bad.reference.declaration) == (
            "STATEMENT_MISMATCH",
            "S",
        ), (bad.error, bad.reference)
        assert "fields, constructors or parameters differ" in bad.reference.detail


async def test_a_snippet_must_import_what_the_reference_imports():
    """Without `import Mathlib` a snippet could declare its own `Real`, `HAdd`
    instances, ... under the names the statement uses: its printed type would
    read the same. The snippet must import every module the reference does."""
    body = "theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  norm_num\n"
    async with running_server() as (_app, client):
        bare, more = await client.verify_batch(
            [body, "import Mathlib\nimport Aesop\n\n" + body], references=[REFERENCE] * 2
        )
        assert bare.status == "INVALID" and bare.reference.reason == "STATEMENT_MISMATCH", (
            bare.error,
        )
        assert "does not import Mathlib" in bare.reference.detail
        assert more.status == "VALID" and more.reference.passed  # importing more is fine
