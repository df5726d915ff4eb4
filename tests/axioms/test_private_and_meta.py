"""Issue 43 item 4: Lean's own spellings of a private name and of a `meta` header.

`#print axioms p` of a `private theorem p` answers about `_private.<Module>.0.p`
(Lean's `mkPrivateNameCore`, src/Lean/PrivateName.lean), and `#print` writes
`private`/`protected`/`meta` between the attributes and the kind (`mkHeader`,
src/Lean/Elab/Print.lean). Both are read as Lean means them: a private theorem
is VALID under the default checks, and a `meta` header still has its kind.
"""

from __future__ import annotations

import pytest

from leanrpc.reference.answers import DeclAnswer
from leanrpc.repl import Response, check_axiom_answers
from leanrpc.repl.outcome import name_atoms
from leanrpc.repl.protocol import ReplMessage
from leanrpc.results import Status, VerifyResult
from verify_support import running_server

pytestmark = pytest.mark.timeout(120)

HEADER = "import Mathlib\n\n"


@pytest.mark.parametrize(
    "printed, atoms",
    [
        ("_private.0.p", ("p",)),  # the REPL: anonymous main module
        ("_private.Mathlib.Foo.0.A.p", ("A", "p")),  # a module's private name
        ("_private.«My Mod».0.«odd name».q'", ("odd name", "q'")),
        ("_private.M.«0».p", ("_private", "M", "0", "p")),  # a quoted 0 is a string atom
        ("_private.M.1.p", ("_private", "M", "1", "p")),  # not Lean's private prefix
        ("«_private».x", ("_private", "x")),  # no number: a user's own name
        ("_root_._private.0.p", ("p",)),
    ],
)
def test_a_private_name_reads_as_the_name_its_user_wrote(printed, atoms):
    assert name_atoms(printed) == atoms


def _answers(*texts: str) -> Response:
    return Response(
        env=1,
        messages=[ReplMessage(severity="info", pos=None, end_pos=None, data=t) for t in texts],
    )


def test_a_private_answer_counts_for_the_name_asked_and_keeps_its_axioms():
    valid = VerifyResult(id="a", status=Status.VALID)
    check_axiom_answers(
        valid,
        _answers("'_private.Scratch.0.A.p' depends on axioms: [propext, Quot.sound]"),
        ["A.p"],
    )
    assert valid.status is Status.VALID and valid.axioms == ["Quot.sound", "propext"]
    cheat = VerifyResult(id="b", status=Status.VALID)
    check_axiom_answers(cheat, _answers("'_private.0.p' depends on axioms: [sorryAx]"), ["p"])
    assert cheat.status is Status.SORRY
    other = VerifyResult(id="c", status=Status.VALID)  # another name's answer is no answer
    check_axiom_answers(other, _answers("'_private.0.q' does not depend on any axioms"), ["p"])
    assert other.status is Status.REJECTED and "no answer for p" in other.error


@pytest.mark.parametrize(
    "printed, kind",
    [
        ("meta def f : Nat :=\n1", "def"),
        ("@[reducible] private meta def f : Nat :=\n1", "def"),
        ("unsafe private protected meta def g : Nat → Nat :=\nfun n => n", "def"),
        ("private meta theorem t : True :=\nTrue.intro", "theorem"),
        ("@[expose, defeq] meta def h : Nat :=\n2", "def"),
        ("meta opaque o : Nat", "opaque"),
        ("meta structure S : Type\nnumber of parameters: 0", "structure"),
        ("metadef f : Nat", None),  # one word: no kind
    ],
)
def test_a_meta_header_gives_its_kind(printed, kind):
    assert DeclAnswer(print_text=printed).kind == kind


async def test_private_theorems_and_meta_headers_are_valid_under_the_default_checks():
    reference = HEADER + "theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  sorry\n"
    private = [
        HEADER + "private theorem p : 2 + 2 = 4 := by\n  norm_num\n",
        HEADER + "namespace A\nprivate lemma q : 1 = 1 := rfl\nend A\n",
        HEADER + "private theorem h : 4 = 4 := rfl\n\ntheorem u : 2 + 2 = 4 := by\n  norm_num\n",
    ]
    async with running_server() as (_app, client):
        results = await client.verify_batch(private)  # check_axioms: the default (on)
        for code, result in zip(private, results):
            assert result.status == "VALID", (code, result.status, result.error)
        [sorry] = await client.verify_batch([HEADER + "private theorem s : 1 = 2 := by sorry\n"])
        assert sorry.status == "SORRY", sorry.error
        pinned = [
            HEADER + "meta theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  norm_num\n",
            HEADER + "private theorem target (x : Nat) (h : 0 < x) : 2 + 2 = 4 := by\n  norm_num\n",
        ]
        for code, result in zip(
            pinned, await client.verify_batch(pinned, references=[reference] * 2)
        ):
            assert result.status == "VALID", (code, result.error, result.reference)
            assert result.reference.passed and result.reference.reason == ""
