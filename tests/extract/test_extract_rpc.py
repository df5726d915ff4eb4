"""Verifier.Extract over a real socket, plain and lz4, on the stand-in."""

from __future__ import annotations

import grpc
import lz4.frame
import pytest

from extract_fixtures import RecordedCase, recorded_cases
from leanrpc.client import AsyncClient
from leanrpc.extract import extract_declarations, slice_source
from leanrpc.results import Position
from leanrpc.v1 import verifier_pb2 as pb

MODES = {
    "full": pb.INFOTREE_MODE_FULL,
    "substantive": pb.INFOTREE_MODE_SUBSTANTIVE,
    "original": pb.INFOTREE_MODE_ORIGINAL,
}
# Upstream REPL transcripts the stand-in replays byte for byte (same request, fresh env).
REPLAYED = [c for c in recorded_cases() if c.id.startswith("repl/test/infotree")]
# A header and blank lines in front: positions must still be in this text.
WITH_HEADER = (
    "import Mathlib\n\n-- a comment line\n"
    "theorem two (a b : Nat) (h : a = b) : b = a ∧ a = a := by\n"
    "  constructor\n"
    "  exact h.symm\n"
    "  rfl\n\n"
    "theorem three : 1 + 2 = 3 := by\n"
    "  norm_num\n"
)


def _declarations(response: pb.ExtractResponse, compressed: bool):
    if not compressed:
        assert response.WhichOneof("steps") == "declarations"
        return list(response.declarations.declarations)
    assert response.WhichOneof("steps") == "compressed" and response.compressed
    decoded = pb.ExtractedDeclarations()
    decoded.ParseFromString(lz4.frame.decompress(response.compressed))
    return list(decoded.declarations)


def _pos(p: pb.Position) -> Position:
    return Position(p.line, p.column)


def _check_in_user_text(declarations, source: str) -> None:
    """Steps are the user's text at their positions; steps plus gaps rebuild the proof."""
    for decl in declarations:
        assert decl.steps
        cursor = _pos(decl.start)
        rebuilt = ""
        for step in decl.steps:
            assert step.text == slice_source(source, _pos(step.start), _pos(step.end))
            rebuilt += slice_source(source, cursor, _pos(step.start)) + step.text
            cursor = _pos(step.end)
        rebuilt += slice_source(source, cursor, _pos(decl.end))
        # The declaration span is the whole command: statement, `by`, every step.
        assert rebuilt == slice_source(source, _pos(decl.start), _pos(decl.end))
        assert rebuilt.startswith(("theorem", "def")) and rebuilt.rstrip().endswith(
            decl.steps[-1].text
        )


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "lz4"])
@pytest.mark.parametrize("case", REPLAYED, ids=lambda c: c.id)
async def test_extract_replayed_infotree(server, case: RecordedCase, compressed: bool):
    _app, stub = server
    request = pb.ExtractRequest(
        code=case.source, options=pb.VerifyOptions(infotree=MODES[case.form]), lz4=compressed
    )
    response = await stub.Extract(request, timeout=60)
    assert response.result.verifier.kind == "stand-in"
    got = _declarations(response, compressed)
    # The same steps as extraction straight from the recorded tree.
    expected = extract_declarations(case.infotree, case.source)
    assert [(d.name, _pos(d.start), _pos(d.end)) for d in got] == [
        (d.name, d.start, d.end) for d in expected
    ]
    assert [
        [
            (s.text, _pos(s.start), _pos(s.end), list(s.goals_before), list(s.goals_after), s.kind)
            for s in d.steps
        ]
        for d in got
    ] == [
        [(s.text, s.start, s.end, s.goals_before, s.goals_after, s.kind) for s in d.steps]
        for d in expected
    ]
    _check_in_user_text(got, case.source)


@pytest.mark.parametrize("compressed", [False, True], ids=["plain", "lz4"])
async def test_extract_positions_are_in_the_users_text(server, compressed: bool):
    _app, stub = server
    response = await stub.Extract(pb.ExtractRequest(code=WITH_HEADER, lz4=compressed), timeout=60)
    assert response.result.status == pb.STATUS_VALID
    got = _declarations(response, compressed)
    assert [d.name for d in got] == ["two", "three"]
    assert [s.text for s in got[0].steps] == ["constructor", "exact h.symm", "rfl"]
    assert (got[0].start.line, got[1].steps[0].start.line) == (4, 10)
    assert got[0].steps[0].goals_before[0].endswith("⊢ b = a ∧ a = a")
    _check_in_user_text(got, WITH_HEADER)


async def test_client_extract_plain_and_lz4_agree(server):
    app, _stub = server
    async with AsyncClient(f"127.0.0.1:{app.port}", max_retries=0) as client:
        result, plain = await client.extract(WITH_HEADER)
        _result, packed = await client.extract(WITH_HEADER, lz4=True)
    assert result.status == "VALID" and plain == packed
    assert [s.text for d in plain for s in d.steps] == [
        "constructor",
        "exact h.symm",
        "rfl",
        "norm_num",
    ]


async def test_extract_bad_input_is_invalid_argument(server):
    _app, stub = server
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await stub.Extract(pb.ExtractRequest(code="  "), timeout=30)
    assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
