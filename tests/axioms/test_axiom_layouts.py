"""Issue 25 item 3: every proof-carrying declaration found, every answer matched to its name.

The scanner layouts that used to hide a theorem (past column 400, after
another command on the same line, after a raw string), the lexer corners
(char literals, primes, nested comments, interpolated strings), and the
reading of `#print axioms` answers (primes, `«»`, namespaces, another name).
"""

import random

import pytest

from leanrpc.core.declarations import declarations, mask
from leanrpc.core.lexer import LexError
from leanrpc.repl import Response, check_axiom_answers
from leanrpc.repl.outcome import _read_atoms, axiom_answer, is_native_axiom, name_atoms
from leanrpc.repl.protocol import ReplMessage
from leanrpc.results import Status, VerifyResult
from leanrpc.services import axioms


def names(body: str) -> list[str]:
    return [d.name for d in declarations(body)]


LONG = "def pad : Nat := " + " + ".join(["1"] * 200)  # a line far past column 400


@pytest.mark.parametrize(
    "body, expected",
    [
        (LONG + " theorem bad : False := cheat", ["pad", "bad"]),
        ("def x : Nat := 1 theorem bad : False := cheat", ["x", "bad"]),
        ('def s : String := r#"a"b"#\ntheorem bad : False := cheat', ["s", "bad"]),
        ('def s : String := r#"a"b"# theorem bad : False := cheat', ["s", "bad"]),
        ("def c : Char := '\\'' theorem bad : False := cheat", ["c", "bad"]),
        ("def c : Char := '\"'\ntheorem bad : False := cheat", ["c", "bad"]),
        ("theorem foo' : True := trivial\ntheorem h'x' : True := trivial", ["foo'", "h'x'"]),
        ("/- /- theorem no : False -/ still a comment -/ theorem yes : True := trivial", ["yes"]),
        ('def s : String := s!"{x}" ++ "}" theorem bad : False := cheat', ["s", "bad"]),
        # A char literal after a digit (Lean's numberFn ends at the digit): the
        # old hand-made mask read a prime and then a string to the next line's `"`.
        ("def b := 1'\"'\ntheorem bad : False := cheat -- \"", ["b", "bad"]),
        (
            "namespace A\nprivate theorem p : True := trivial\nprotected def q : Nat := 1\nend A",
            ["A.p", "A.q"],
        ),
        ("theorem «odd theorem name» : True := trivial", ["odd theorem name"]),
        ("@[instance] def i : Inhabited Nat := ⟨0⟩\nattribute [local instance] i", ["i"]),
    ],
)
def test_every_proof_carrying_declaration_is_found(body, expected):
    assert names(body) == expected


def test_a_text_the_lexer_cannot_read_is_not_scanned_another_way():
    """Issue 43 item 1: the mask is the one lexer's reading; where that is not
    certain (a string whose end depends on interpolation), no declaration is
    guessed: the lexer's error, and check_axioms answers without the REPL."""
    body = 'def s : String := s!"{\'"\'}" theorem bad : False := cheat'
    with pytest.raises(LexError) as raised:
        declarations(body)
    assert "interpolated" in raised.value.reason
    with pytest.raises(axioms.Unreadable, match=r"at line 3, column 20"):
        axioms.plan(body, 3, 0)


def test_mask_blanks_what_the_lexer_reads_as_comments_and_literals():
    body = 'def s := s!"a{f /- -/ x}b" -- c\n/-- doc -/ def t := \'"\' /- /- -/ -/ u'
    masked = mask(body)
    assert len(masked) == len(body)
    assert masked.split() == ["def", "s", ":=", "s!", "def", "t", ":=", "u"]


def test_mask_keeps_lengths_and_blanks_only_literals():
    body = 'def s := r#"a"b"# -- c\ndef t := \'x\''
    masked = mask(body)
    assert len(masked) == len(body) and masked.count("\n") == 1
    assert "a" not in masked.split(":=")[1] and "def t" in masked


def _after(*texts: str) -> Response:
    return Response(
        env=1,
        messages=[ReplMessage(severity="info", pos=None, end_pos=None, data=t) for t in texts],
    )


def _valid() -> VerifyResult:
    return VerifyResult(id="s", status=Status.VALID)


STANDARD = frozenset({"propext", "Classical.choice", "Quot.sound"})


def test_name_atoms_reads_every_name_as_the_regex_does():
    """name_atoms splits a plain name on its dots and leaves `«»`, `_root_` and
    `_private` names to the regex reading: the two agree on every name (a fuzz of
    the characters that matter, and the 805 proofs' names are plain)."""
    pieces = [
        "a",
        "b'",
        ".",
        "..",
        "«",
        "»",
        "«x.y»",
        "_root_",
        "_private",
        "0",
        "12",
        " ",
        "ℕ",
        "_",
    ]
    rng = random.Random(38)
    for _ in range(20_000):
        name = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 8)))
        assert name_atoms(name) == _read_atoms(name), name
    assert name_atoms("_private.0.p") == ("p",) and name_atoms("_root_.a.b") == ("a", "b")
    assert name_atoms(" Foo..bar ") == ("Foo", "bar")


def test_answers_are_read_with_primes_quoted_names_and_namespaces():
    assert axiom_answer("'foo'' depends on axioms: [propext]") == ("foo'", ["propext"])
    assert axiom_answer("'Foo.«a b»' does not depend on any axioms") == ("Foo.«a b»", [])
    assert name_atoms("Foo.«a b»") == ("Foo", "a b") and name_atoms("«a.b»") != name_atoms("a.b")
    result = _valid()
    check_axiom_answers(
        result, _after("'foo'' depends on axioms: [propext, Quot.sound]"), ["foo'"], STANDARD
    )
    assert (result.status, result.axioms) == (Status.VALID, ["Quot.sound", "propext"])


def test_an_answer_for_another_name_does_not_count():
    result = _valid()
    check_axiom_answers(result, _after("'other' does not depend on any axioms"), ["bad"], STANDARD)
    assert result.status is Status.REJECTED and "no answer for bad" in result.error
    result = _valid()  # resolved in an open namespace: Lean names what it checked
    check_axiom_answers(
        result, _after("'Foo.bad' does not depend on any axioms"), ["bad"], STANDARD
    )
    assert result.status is Status.REJECTED


@pytest.mark.parametrize(
    "axiom, status",
    [
        ("sorryAx", Status.SORRY),
        ("Lean.ofReduceBool", Status.REJECTED),
        ("Lean.trustCompiler", Status.REJECTED),
        ("t._native.native_decide.ax_1", Status.REJECTED),
        ("propext'", Status.REJECTED),
        ("Foo.propext", Status.REJECTED),
        ("Classical.choice", Status.VALID),
    ],
)
def test_allow_list_is_exact(axiom, status):
    result = _valid()
    check_axiom_answers(
        result, _after(f"'t' depends on axioms: [propext, {axiom}]"), ["t"], STANDARD
    )
    assert result.status is status, result.error
    if status is Status.REJECTED:
        assert axiom in result.error
        assert ("native_decide" in result.error) == is_native_axiom(axiom)


def test_the_allow_list_is_configurable():
    result = _valid()
    check_axiom_answers(
        result,
        _after("'t' depends on axioms: [propext, Classical.choice]"),
        ["t"],
        frozenset({"propext"}),
    )
    assert result.status is Status.REJECTED and "Classical.choice" in result.error


def test_a_quoted_name_is_printed_as_lean_reads_it():
    from leanrpc.core.declarations import plan_axiom_check

    check = plan_axiom_check(
        "namespace A\ntheorem «odd name» : True := trivial\nend A\ntheorem b' : True := trivial"
    )
    assert check.names == ["A.«odd name»", "b'"]
    result = _valid()  # Lean answers with the name escaped the same way
    check_axiom_answers(
        result,
        _after("'A.«odd name»' does not depend on any axioms", "'b'' depends on axioms: [propext]"),
        check.names,
        STANDARD,
    )
    assert result.status is Status.VALID, result.error
