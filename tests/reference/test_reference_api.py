"""The reference at the edge and beyond the table: bad references are
INVALID_ARGUMENT naming the problem, def bodies are pinned unless the
reference's is `sorry`, and VerifyStream carries a reference per snippet."""

from __future__ import annotations

import grpc
import pytest

from leanrpc.errors import RequestError
from leanrpc.reference import parse_reference
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc
from verify_support import running_server

pytestmark = pytest.mark.timeout(120)

HEADER = "import Mathlib\n\n"
GOOD = HEADER + "theorem t : 2 + 2 = 4 := by\n  norm_num\n"
REFERENCE = HEADER + "theorem t : 2 + 2 = 4 := by sorry\n"

BAD_REFERENCES = [
    ("   \n", "empty"),
    (HEADER + "-- nothing declared\n", "declares no theorem"),
    (HEADER + "example : 1 = 1 := sorry\n", "unnamed example"),
    (HEADER + "axiom t : 2 + 2 = 4\n", "declares no theorem"),
    (HEADER + "theorem t : 1 = 1 := sorry\ntheorem t : 2 = 2 := sorry\n", "declares a name twice"),
    (HEADER + "theorem t : 1 = 1 := sorry\x00", "NUL"),
    (HEADER + "#eval IO.println 1\ntheorem t : 1 = 1 := sorry\n", "`#eval` at line 3 runs code"),
    (HEADER + "@[implemented_by foo] def t : Nat := sorry\n", "`implemented_by`"),
    (
        HEADER + "set_option debug.skipKernelTC true in\ntheorem t : 1 = 1 := sorry\n",
        "`debug.skipKernelTC`",
    ),
    # Read by the one lexer (core.lexer), as Lean reads it (issue 43 item 1).
    # a `#`-word glued to more of a name: where it is no token, Lean reads on (table-dependent)
    (
        HEADER + "theorem t : 1 = 1 := sorry\n#evalIO.println 1\n",
        "cannot be read for certain as Lean reads it: a `#`-word glued to more of a name",
    ),
    (HEADER + "theorem t : 1 = 1 := sorry\n#evalIO 1\n", "`#evalIO` at line 4 runs code"),
    (HEADER + "theorem t : True := trivial#eval IO.println 1\n", "`#eval` at line 3 runs code"),
    (HEADER + "run_cmd«IO».println 1\ntheorem t : 1 = 1 := sorry\n", "`run_cmd` at line 3"),
    (HEADER + "theorem t : 1 = 1 :=\n\tsorry\n", "cannot be read for certain"),
]


def test_a_mention_in_a_comment_or_string_is_not_refused():
    ref = parse_reference(
        HEADER + '/- #eval here is a comment -/\ntheorem t : "#eval" = "#eval" := sorry\n'
    )
    assert ref.names == ["t"]


@pytest.mark.parametrize("text, words", BAD_REFERENCES)
def test_a_reference_that_pins_nothing_is_refused_with_a_reason(text, words):
    with pytest.raises(RequestError) as info:
        parse_reference(text)
    assert words in info.value.message


def test_reference_declarations_are_found_with_kinds_and_sorry_bodies():
    ref = parse_reference(
        HEADER + "namespace P\ndef answer : Nat := sorry\nabbrev k : Nat := 3\n"
        "theorem main : answer = k := by\n  sorry\nend P\n"
    )
    assert [(d.name, d.kind, d.body_is_sorry) for d in ref.decls] == [
        ("P.answer", "def", True),
        ("P.k", "abbrev", False),
        ("P.main", "theorem", True),
    ]


def test_sorry_bodies_are_read_by_tokens_past_comments_and_scope_commands():
    ref = parse_reference(
        HEADER + "namespace P\ndef a : Nat := /- later -/ sorry -- todo\n\n"
        "def b : Nat := sorry + 1\ntheorem c : a = a := by\n  -- why\n  sorry\n"
        "end P\nnoncomputable section\nopen Real\n"
    )
    assert [(d.name, d.body_is_sorry) for d in ref.decls] == [
        ("P.a", True),
        ("P.b", False),
        ("P.c", True),
    ]


async def test_bad_reference_is_invalid_argument_naming_the_snippet():
    async with running_server() as (app, _client):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)
            request = pb.VerifyRequest(
                snippets=[
                    pb.Snippet(id="a", code=GOOD),
                    pb.Snippet(id="b", code=GOOD, reference=HEADER + "-- none\n"),
                ]
            )
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await stub.Verify(request, timeout=60)
            assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            assert (
                "snippet 1 (b)" in info.value.details()
                and "declares no theorem" in info.value.details()
            )
            # The server keeps serving, and a good reference passes.
            ok = await stub.Verify(
                pb.VerifyRequest(snippets=[pb.Snippet(id="c", code=GOOD, reference=REFERENCE)]),
                timeout=60,
            )
            assert ok.results[0].status == pb.STATUS_VALID and ok.results[0].reference.passed


DEF_REFERENCE = (
    HEADER
    + "def answer : Nat := sorry\ndef two : Nat := 2\ntheorem main : answer = two := by sorry\n"
)


async def test_def_bodies_are_pinned_unless_the_reference_body_is_sorry():
    proofs = [
        (
            "def answer : Nat := 2\ndef two : Nat := 2\ntheorem main : answer = two := by\n  rfl\n",
            "VALID",
            "",
        ),
        (
            "def answer : Nat := 2\ndef two : Nat := 3 - 1\ntheorem main : answer = two := by\n  rfl\n",
            "INVALID",
            "BODY_CHANGED",
        ),
    ]
    async with running_server() as (_app, client):
        results = await client.verify(
            [HEADER + p for p, _s, _r in proofs], references=[DEF_REFERENCE] * 2
        )
        for (_proof, status, reason), result in zip(proofs, results):
            assert (result.status, result.reference.reason) == (status, reason), result
        assert results[1].reference.declaration == "two"
        # references are one per snippet
        with pytest.raises(ValueError):
            await client.verify([GOOD, GOOD], references=[REFERENCE])


async def test_a_reference_without_imports_runs_on_the_snippets_header():
    async with running_server() as (app, client):
        [result] = await client.verify_batch(
            [GOOD], references=["theorem t : 2 + 2 = 4 := by sorry\n"]
        )
        assert result.status == "VALID" and result.reference.passed, result
