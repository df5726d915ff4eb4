"""The declaration scanner behind check_axioms (leanrpc.core.declarations)."""

import pytest

from leanrpc.core.declarations import declarations, mask, plan_axiom_check


def names(body: str) -> list[tuple[str, str]]:
    return [(d.kind, d.name) for d in declarations(body)]


@pytest.mark.parametrize(
    "body, expected",
    [
        ("theorem t : True := trivial", [("theorem", "t")]),
        ("lemma l : True := trivial", [("lemma", "l")]),
        (
            "def d : Nat := 1\nabbrev a : Nat := 2\nopaque o : Nat",
            [("def", "d"), ("abbrev", "a"), ("opaque", "o")],
        ),
        ("example : 2 + 2 = 4 := by native_decide", [("example", "")]),
        ("instance : Inhabited Nat := ⟨0⟩", [("instance", "")]),
        ("instance (priority := low) : Inhabited Nat := ⟨0⟩", [("instance", "")]),
        ("instance instNat : Inhabited Nat := ⟨0⟩", [("instance", "instNat")]),
        ("instance (priority := 100) instNat : Inhabited Nat := ⟨0⟩", [("instance", "instNat")]),
        ("private theorem p : True := trivial", [("theorem", "p")]),
        ("@[simp] protected noncomputable def Foo.x : Nat := 1", [("def", "Foo.x")]),
        ("@[simp]\ntheorem s : True := trivial", [("theorem", "s")]),
        ("open Real in\ntheorem r : True := trivial", [("theorem", "r")]),
        ("open Real in theorem r : True := trivial", [("theorem", "r")]),
        (
            "namespace A.B\ntheorem t : True := trivial\nend A.B\ntheorem u : True := trivial",
            [("theorem", "A.B.t"), ("theorem", "u")],
        ),
        ("namespace A\nsection S\ntheorem t : True := trivial\nend S\nend A", [("theorem", "A.t")]),
        (
            "namespace A\nmutual\ntheorem e : True := trivial\ntheorem o : True := trivial\nend\ntheorem z : True := trivial\nend A",
            [("theorem", "A.e"), ("theorem", "A.o"), ("theorem", "A.z")],
        ),
        ("namespace A\ntheorem _root_.top : True := trivial\nend A", [("theorem", "top")]),
        ("theorem «odd name» : True := trivial", [("theorem", "odd name")]),
        ("/-- theorem fake : doc -/\ntheorem real : True := trivial", [("theorem", "real")]),
        ('-- example : False\ndef s : String := "theorem x"', [("def", "s")]),
        ("deriving instance Repr for Foo\nattribute [instance] foo", []),
        ("noncomputable section\ntheorem t : True := trivial\nend", [("theorem", "t")]),
    ],
)
def test_declarations(body, expected):
    assert names(body) == expected


def test_where_auxiliaries():
    body = (
        "theorem main : P := by\n  exact aux1\nwhere\n  aux1 : P := helper\n  aux2 (n : Nat) : n = n := by\n    rfl\n"
        "theorem next : True := trivial"
    )
    found = declarations(body)
    assert [(d.name, d.auxiliaries) for d in found] == [
        ("main", ("main.aux1", "main.aux2")),
        ("next", ()),
    ]
    # `where` right after the signature is structure-instance notation: fields, not declarations.
    assert declarations("instance : Foo Nat where\n  x := 1\n")[0].auxiliaries == ()
    assert declarations("def f : Foo where\n  x := 1\n")[0].auxiliaries == ()


def test_plan_renames_anonymous_declarations():
    body = "namespace N\nexample : 2 + 2 = 4 := by native_decide\nend N\ninstance : Inhabited Nat := ⟨0⟩\ntheorem t : True := trivial"
    check = plan_axiom_check(body, first_line=3, nonce="abc")
    assert check.names == ["N._leanrpc_axiom_check_abc_0", "_leanrpc_axiom_check_abc_1", "t"]
    assert "noncomputable def _leanrpc_axiom_check_abc_0 : 2 + 2 = 4" in check.body
    assert "instance _leanrpc_axiom_check_abc_1 : Inhabited Nat" in check.body
    assert check.print_command == "\n".join(f"#print axioms _root_.{n}" for n in check.names)
    # Positions after a rename map back to the user's columns; other lines are untouched.
    renamed = "noncomputable def _leanrpc_axiom_check_abc_0 "
    assert check.original_position(4, len(renamed)) == (4, len("example "))
    assert check.original_position(4, 3) == (4, 0)
    assert check.original_position(5, 0) == (5, 0)
    inserted = len(" _leanrpc_axiom_check_abc_1")
    assert check.original_position(6, len("instance") + inserted + 1) == (6, len("instance") + 1)
    assert check.original_position(7, 4) == (7, 4)


def test_plan_first_line_column_offset():
    check = plan_axiom_check(" example : True := trivial", first_line=1, first_column=14, nonce="n")
    assert check.edits == [(1, 15, 7, len("noncomputable def _leanrpc_axiom_check_n_0"))]
    assert check.original_position(
        1, 15 + len("noncomputable def _leanrpc_axiom_check_n_0 : ")
    ) == (1, 15 + len("example : "))


def test_fresh_names_differ_per_request():
    body = "example : True := trivial"
    assert plan_axiom_check(body).names != plan_axiom_check(body).names


def test_nothing_to_check():
    check = plan_axiom_check("#eval 1")
    assert (check.names, check.print_command, check.body) == ([], None, "#eval 1")


def test_mask_keeps_positions():
    text = 'a -- c\n/- x /- y -/ z -/ b "s\\"t" c'
    masked = mask(text)
    assert len(masked) == len(text) and masked.count("\n") == 1
    assert masked.split() == ["a", "b", "c"]


def test_every_corpus_text_plans_and_the_rewrite_only_renames():
    """Over every Lean text in shared/: the plan never fails, the rewritten
    body differs from the original only at the recorded edits, and every
    `example` of the text is renamed."""
    from native_support import lean_corpus

    examples = 0
    for label, code in lean_corpus():
        check = plan_axiom_check(code, nonce="n")
        lines, rewritten = code.split("\n"), check.body.split("\n")
        assert len(lines) == len(rewritten), label
        edited = {line for line, _col, _removed, _inserted in check.edits}
        for number, (before, after) in enumerate(zip(lines, rewritten), 1):
            if number not in edited:
                assert before == after, (label, number)
        kinds = [d.kind for d in declarations(code)]
        examples += kinds.count("example")
        assert check.body.count("_leanrpc_axiom_check_n_") == len(check.edits), label
        assert len(check.names) >= len(kinds), label
    assert examples > 10  # the corpus does exercise the rename
