"""VerifyOptions.check_axioms end to end: `#print axioms` on the stand-in."""

from __future__ import annotations

from verify_support import running_server

HEADER = "import Mathlib\n\n"
CLEAN = HEADER + "theorem comm (a b : Nat) : a + b = b + a := by\n  rw [Nat.add_comm]\n"
NATIVE = HEADER + "theorem big : 2 ^ 20 > 1000 := by native_decide\n"
OWN_AXIOM = HEADER + "axiom cheat : False\n\ntheorem bad : 1 = 2 := cheat.elim\n"
NAMESPACED = (
    HEADER
    + "namespace Foo\n\naxiom cheat : False\n\ntheorem bad : 1 = 2 := by\n  exact cheat.elim\n\nend Foo\n"
)
SORRY = HEADER + "theorem todo (n : Nat) : n = n := by\n  sorry\n"
STANDARD = ["Classical.choice", "Quot.sound", "propext"]


async def test_axiom_check_rejects_native_decide_and_own_axioms():
    async with running_server() as (_app, client):
        clean, native, own, namespaced, sorry = await client.verify_batch(
            [CLEAN, NATIVE, OWN_AXIOM, NAMESPACED, SORRY], check_axioms=True
        )
        assert (clean.status, clean.axioms, clean.error) == ("VALID", STANDARD, "")
        assert native.status == "REJECTED"
        assert "native_decide" in native.error and "Lean.ofReduceBool" in native.axioms
        assert own.status == "REJECTED"
        assert own.error == "proof uses non-standard axioms: cheat" and "cheat" in own.axioms
        # The theorem's name is qualified by its namespace for `#print axioms`.
        assert namespaced.status == "REJECTED" and "Foo.cheat" in namespaced.axioms
        assert sorry.status == "SORRY"
        # The `#print axioms` commands are ours: their info messages stay out.
        assert not any("axioms" in m.text for r in (clean, native, own) for m in r.messages)

        # Unset, the server default checks them (issue 25 item 3).
        default = await client.verify_batch([NATIVE, OWN_AXIOM])
        assert [r.status for r in default] == ["REJECTED", "REJECTED"]
        # Explicitly off, an own axiom passes and no axioms are listed; native
        # evaluation is never sent under the `proof` code policy (issue 25 item 1).
        plain = await client.verify_batch([NATIVE, OWN_AXIOM], check_axioms=False)
        assert [(r.status, r.axioms) for r in plain] == [("REJECTED", []), ("VALID", [])]
        assert "code policy `proof`" in plain[0].error

        # The option also works per stream (options message before snippets).
        streamed = await client.verify([("c", CLEAN), ("n", NATIVE)], check_axioms=True)
        assert [(r.id, r.status) for r in streamed] == [("c", "VALID"), ("n", "REJECTED")]


# A body that ends inside `namespace N`, declaring `X` at the root and `N.X` in it: the
# check asks `#print axioms _root_.X` and `_root_.N.X`, each the declaration it names.
# A bare `X` asked there names `N.X` first (Lean resolves the open namespace first):
# its answer would name `N.X`, and `X` would go unanswered (REJECTED, wrongly).
SHADOWED = (
    HEADER + "theorem X : True := trivial\n\nnamespace N\n\ntheorem X : 1 + 1 = 2 := by\n  sorry\n"
)


async def test_each_check_names_its_declaration_whatever_namespace_the_body_left_open():
    async with running_server() as (_app, client):
        [shadowed] = await client.verify_batch([SHADOWED], check_axioms=True)
        # The sorry is `N.X`'s, the root `X` is clean: both were asked and answered.
        assert shadowed.status == "SORRY", (shadowed.status, shadowed.error)
        assert "sorryAx" in shadowed.axioms and "check_axioms could not" not in shadowed.error
        fixed = SHADOWED.replace("  sorry\n", "  rfl\n")
        [clean] = await client.verify_batch([fixed], check_axioms=True)
        assert (clean.status, clean.error) == ("VALID", ""), clean.error
