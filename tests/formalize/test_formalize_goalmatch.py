"""goal_exact_match: the snippet asked of the REPL and the comparison of Lean's printed types."""

import asyncio

from leanrpc.formalize.goalmatch import GEN, REF, alpha_normal, compare_goals, snippet
from leanrpc.results import Message, Position, Severity, Status, VerifyResult

GEN_STMT = "theorem mine (x : ℕ) (hx : 0 < x) : x ≠ 0 := by sorry"
REF_STMT = "theorem theirs (n : ℕ) (h₀ : 0 < n) : n ≠ 0 := by\n"


def _info(text: str) -> Message:
    return Message(Severity.INFO, Position(1, 0), None, text)


def test_snippet_uses_pp_all_check_of_both():
    code = snippet(GEN_STMT, REF_STMT, "import Mathlib")
    assert f"theorem {GEN} (x : ℕ) (hx : 0 < x) : x ≠ 0 := by sorry" in code
    assert f"theorem {REF} (n : ℕ) (h₀ : 0 < n) : n ≠ 0 := by sorry" in code
    assert f"set_option pp.all true in\n#check @{GEN}" in code
    assert code.startswith("import Mathlib\n")


def test_alpha_normal_ignores_binder_names_only():
    a = "∀ (x : Nat) (hx : @LT.lt Nat instLTNat 0 x), Not (@Eq Nat x 0)"
    b = "∀ (n : Nat) (h₀ : @LT.lt Nat instLTNat 0 n), Not (@Eq Nat n 0)"
    c = "∀ (n : Nat) (h₀ : @LE.le Nat instLENat 0 n), Not (@Eq Nat n 0)"
    assert alpha_normal(a) == alpha_normal(b)
    assert alpha_normal(a) != alpha_normal(c)


def _verify_answering(gen_type: str, ref_type: str):
    async def verify(code: str) -> VerifyResult:
        assert GEN in code and REF in code
        return VerifyResult(
            "",
            Status.SORRY,
            messages=[_info(f"@{GEN} : {gen_type}"), _info(f"@{REF} : {ref_type}")],
        )

    return verify


def test_compare_goals_equal_and_different():
    same = _verify_answering(
        "∀ (x : Nat), @LT.lt Nat instLTNat 0 x → Not (@Eq Nat x 0)",
        "∀ (n : Nat), @LT.lt Nat instLTNat 0 n → Not (@Eq Nat n 0)",
    )
    other = _verify_answering(
        "∀ (x : Nat), @LT.lt Nat instLTNat 0 x → Not (@Eq Nat x 0)",
        "∀ (n : Int), @LT.lt Int Int.instLTInt 0 n → Not (@Eq Int n 0)",
    )
    assert asyncio.run(compare_goals(GEN_STMT, REF_STMT, "import Mathlib", same)) is True
    assert asyncio.run(compare_goals(GEN_STMT, REF_STMT, "import Mathlib", other)) is False


def test_compare_goals_none_when_lean_printed_nothing():
    async def standin(code: str) -> VerifyResult:
        return VerifyResult("", Status.SORRY)

    assert asyncio.run(compare_goals(GEN_STMT, REF_STMT, "import Mathlib", standin)) is None
