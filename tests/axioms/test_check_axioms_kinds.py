"""check_axioms end to end on the stand-in: every declaration kind that can
carry a proof is checked, anonymous ones included (docs/SECURITY.md)."""

from __future__ import annotations

import pytest

from verify_support import running_server

pytestmark = pytest.mark.timeout(120)

HEADER = "import Mathlib\n\n"
NATIVE = "by native_decide"

# (label, snippet whose only trick is native_decide somewhere)
CHEATS = [
    ("example", f"example : 2 + 2 = 4 := {NATIVE}\n"),
    ("instance", f"instance : Fact (2 + 2 = 4) := ⟨{NATIVE}⟩\n"),
    ("instance with priority", f"instance (priority := low) : Fact (2 + 2 = 4) := ⟨{NATIVE}⟩\n"),
    ("def", f"def d : 2 + 2 = 4 := {NATIVE}\n"),
    ("abbrev", f"abbrev a : 2 + 2 = 4 := {NATIVE}\n"),
    ("private", f"private theorem p : 2 + 2 = 4 := {NATIVE}\n"),
    ("namespace", f"namespace Foo\nexample : 2 + 2 = 4 := {NATIVE}\nend Foo\n"),
    ("section", f"section S\nvariable (n : Nat)\nexample : 2 + 2 = 4 := {NATIVE}\nend S\n"),
    ("mutual", f"namespace M\nmutual\ntheorem e : 2 + 2 = 4 := {NATIVE}\nend\nend M\n"),
    ("after a clean theorem", f"theorem ok : 1 = 1 := rfl\n\nexample : 2 + 2 = 4 := {NATIVE}\n"),
    ("one line header", f"import Mathlib example : 2 + 2 = 4 := {NATIVE}\n"),
]

FAIL_CLOSED = {"instance with priority"}


async def test_under_proof_native_decide_never_reaches_the_repl():
    # The code policy answers native evaluation without running it (issue 25 item 1):
    # with check_axioms, the axiom check's answer; without, REJECTED.
    async with running_server() as (_app, client):
        codes = [code if code.startswith("import") else HEADER + code for _label, code in CHEATS]
        checked = await client.verify_batch(codes, check_axioms=True)
        for (label, _code), result in zip(CHEATS, checked):
            assert result.status == "REJECTED" and "native_decide" in result.error, label
            assert "Lean.ofReduceBool" in result.axioms, label
            assert result.worker == "", label  # no worker answered it
        plain = await client.verify_batch(codes, check_axioms=False)
        assert all(r.status == "REJECTED" and "code policy `proof`" in r.error for r in plain)


@pytest.mark.runs_user_code  # its REPL part runs under `trusted`
async def test_every_kind_with_native_decide_is_rejected():
    # The axiom scanner itself, on the REPL's answers: only `trusted` lets
    # native evaluation run, so this runs under it.
    async with running_server(policy__default="trusted") as (_app, client):
        codes = [code if code.startswith("import") else HEADER + code for _label, code in CHEATS]
        results = await client.verify_batch(codes, check_axioms=True)
        for (label, _code), result in zip(CHEATS, results):
            assert result.status == "REJECTED", (
                label,
                result.status,
                result.error,
                result.messages,
            )
            if label in FAIL_CLOSED:
                # The stand-in does not read a name after `(priority := ...)`:
                # `#print axioms` fails, and the verdict is refused, not VALID.
                assert result.error.startswith("check_axioms could not check"), (
                    label,
                    result.error,
                )
                continue
            assert "native_decide" in result.error, (label, result.error)
            assert "Lean.ofReduceBool" in result.axioms, label
        # The server default (check_axioms unset) checks them too (issue 25 item 3).
        default = await client.verify_batch(codes)
        assert [r.status for r in default] == ["REJECTED"] * len(CHEATS)
        # Explicitly off, the same snippets pass: the check is what catches them.
        plain = await client.verify_batch(codes, check_axioms=False)
        assert [r.status for r in plain] == ["VALID"] * len(CHEATS)


async def test_clean_kinds_stay_valid_and_positions_are_the_users():
    clean = HEADER + (
        "example : 2 + 2 = 4 := by norm_num\n"
        "instance : Inhabited Nat := ⟨0⟩\n"
        "theorem t (a b : Nat) : a + b = b + a := by\n  rw [Nat.add_comm]\n"
        "example : 1 = 1 := by\n  sorry\n"
    )
    async with running_server() as (_app, client):
        [result] = await client.verify_batch([clean], check_axioms=True)
        assert result.status == "SORRY", (result.error, result.messages)
        # The sorry warning sits at the user's `example` (line 7), at a column
        # of the user's text, not of the renamed declaration.
        sorry_warnings = [m for m in result.messages if "sorry" in m.text]
        assert sorry_warnings and all((m.line, m.column) == (7, 0) for m in sorry_warnings), (
            sorry_warnings
        )
        [valid] = await client.verify_batch([clean.replace("  sorry", "  rfl")], check_axioms=True)
        assert valid.status == "VALID", (valid.error, valid.messages)
        assert not any("_leanrpc_axiom_check" in m.text for m in valid.messages)


# A string whose quotes-in-braces make Lean and a plain reading disagree on
# where it ends: the plain reading would hide the theorem after it from the
# axiom check (`throwError` reads an interpolated string; `"{"\""}"` is one).
HIDDEN_BY_A_STRING = (
    'def f : Lean.MetaM Unit := throwError "{"\\""}"\n'
    "axiom ax : False\n"
    "theorem t : 2 + 2 = 5 := ax.elim\n"
)


async def test_a_theorem_a_string_would_hide_from_the_axiom_check_is_never_valid():
    from leanrpc.core.declarations import declarations
    from leanrpc.core.lexer import LexError

    # The scanner reads with the one lexer: it guesses no declarations here.
    with pytest.raises(LexError, match="interpolated"):
        declarations(HIDDEN_BY_A_STRING)
    async with running_server() as (_app, client):
        [result] = await client.verify_batch([HEADER + HIDDEN_BY_A_STRING])
        assert (
            result.status == "REJECTED"
            and "at line 3, column 38" in result.error
            and "a string literal whose end depends on whether it is interpolated" in result.error
        )
        # The control: the same theorem without the string is caught by the axiom check itself.
        [plain] = await client.verify_batch([HEADER + HIDDEN_BY_A_STRING.split("\n", 1)[1]])
        assert plain.status == "REJECTED" and "ax" in plain.axioms


UNREADABLE = 'def s : String := s!"{\'"\'}"\ntheorem bad : False := cheat\n'


@pytest.mark.runs_user_code  # under `trusted`, which reaches the axiom plan unscreened
async def test_a_body_the_lexer_cannot_read_gets_no_axiom_plan():
    """Issue 43 item 1: under `trusted` the policy does not lex, so the axiom
    plan is the first reader; it reads with the one lexer, and where that is
    not certain it answers without the REPL (Verify) or refuses (a session)."""
    import grpc

    from leanrpc.client import ClientError

    async with running_server(policy__default="trusted") as (_app, client):
        [result] = await client.verify_batch([HEADER + UNREADABLE], check_axioms=True)
        assert result.status == "REJECTED"
        assert "cannot be read for certain" in result.error and "line 3, column 20" in result.error
        opened = await client.open_session(HEADER, name="u")
        assert opened.result.status == "VALID"
        with pytest.raises(ClientError) as refused:
            await client.run_in_session("u", UNREADABLE)
        assert refused.value.code == grpc.StatusCode.INVALID_ARGUMENT
        assert "cannot be read for certain" in refused.value.details
