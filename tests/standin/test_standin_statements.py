"""The stand-in's answers to the statement queries of a reference check:
deterministic, labelled stand-in where they differ from plain text, and
changed by exactly what changes a statement's meaning."""

from __future__ import annotations

from leanrpc.standin import elab

QUERIES = "set_option pp.all true in #check @t\nset_option pp.all true in #print t\n"


def _answers(text: str) -> list[str]:
    out = elab.elaborate(
        text + QUERIES,
        lookup=lambda name: None,
        variables=[],
        broken=False,
        body_start=0,
        lean_version="4.19.0",
        sorry_style="",
    )
    return [m["data"] for m in out.messages if m["severity"] == "info"]


def test_answers_ignore_spacing_and_comments_but_not_the_statement():
    base = _answers("theorem t (x : Nat) (h : 0 < x) : x + 0 = x := by\n  simp\n")
    assert base == _answers("theorem t ( x : Nat )\n  (h : 0<x) : -- c\n  x+0 = x := by\n  simp\n")
    assert base != _answers("theorem t (x : Nat) (h : 0 < x) : x + 0 = x + 0 := by\n  simp\n")
    assert base != _answers(
        "theorem t (x : Nat) : x + 0 = x := by\n  simp\n"
    )  # a hypothesis dropped
    check, printed = base
    assert check == "t : ∀ ( x : Nat ) ( h : 0 < x ), x + 0 = x"
    assert printed.startswith("theorem t : ")


def test_a_user_instance_or_notation_changes_the_answer_and_says_stand_in():
    plain = _answers("theorem t : 2 + 2 = 4 := by\n  norm_num\n")
    for prefix in ("instance : Add Nat := ⟨Nat.mul⟩\n", 'local notation "two" => 3\n'):
        changed = _answers(prefix + "theorem t : 2 + 2 = 4 := by\n  norm_num\n")
        assert changed != plain and "[stand-in: elaborated after:" in changed[0], prefix
    # A helper lemma is no such command: the answer is unchanged.
    assert (
        _answers("lemma helper : 4 = 4 := rfl\ntheorem t : 2 + 2 = 4 := by\n  norm_num\n") == plain
    )


def test_kinds_and_bodies_and_unknown_names():
    assert _answers("axiom t : False\n")[1] == "axiom t : False"
    assert _answers("abbrev t : Nat := 3\n")[1] == "@[reducible] def t : Nat :=\n3"
    out = elab.elaborate(
        QUERIES,
        lookup=lambda name: None,
        variables=[],
        broken=False,
        body_start=0,
        lean_version="4.19.0",
        sorry_style="",
    )
    assert [m["severity"] for m in out.messages] == ["error", "error"]
