"""Issue 25 item 3: sessions honour check_axioms (on by default, off on request)."""

from __future__ import annotations

from verify_support import running_server

HEADER = "import Mathlib\n"
CHEAT = "axiom cheat : False\n\ntheorem bad : 1 = 2 := cheat.elim\n"
NATIVE = "theorem big : 2 ^ 20 > 1000 := by native_decide\n"
CLEAN = "theorem good (a b : Nat) : a + b = b + a := by\n  rw [Nat.add_comm]\n"


async def test_run_in_session_and_verify_in_a_session_check_axioms_by_default():
    async with running_server() as (_app, client):
        opened = await client.open_session(HEADER, name="ax")
        assert opened.env == 0
        cheat = await client.run_in_session("ax", CHEAT)
        assert cheat.result.status == "REJECTED" and "cheat" in cheat.result.error
        # Native evaluation never reaches the REPL under the `proof` code policy
        # (issue 25 item 1); with the axiom check on, a session answers it as
        # Verify does, by the axiom rule without running it (issue 41 item 10).
        native = await client.run_in_session("ax", NATIVE)
        assert native.env is None
        assert native.result.status == "REJECTED" and "Lean.ofReduceBool" in native.result.axioms
        assert "native_decide" in native.result.error
        assert native.result.checks.axioms == "FAILED"
        good = await client.run_in_session("ax", CLEAN)
        assert good.result.status == "VALID", good.result.error
        # Verify(session=...) runs on env 0 and is checked the same way.
        [by_verify] = await client.verify_batch([NATIVE], session="ax")
        assert by_verify.status == "REJECTED" and "Lean.ofReduceBool" in by_verify.axioms
        # Explicitly off, per request: an own axiom passes; native evaluation is still never sent.
        off = await client.run_in_session("ax", CHEAT, check_axioms=False)
        assert off.result.status == "VALID"
        [off_verify] = await client.verify_batch([NATIVE], session="ax", check_axioms=False)
        assert off_verify.status == "REJECTED" and "code policy `proof`" in off_verify.error
