"""Extract's replay check: units of every construct, and replay on the stand-in.

The construct trees in extract_synthetic are built by the project (only 9
real infotrees exist in shared/fixtures, all single-tactic), so the replay
check is what arbitrates against real Lean. Here it runs on the stand-in,
whose infotree goals are threaded through its own tactic mode: every step of
every construct source must replay with MATCH, and a tactic the REPL rejects
must give ERROR then NOT_RUN.
"""

from __future__ import annotations

import pytest

import extract_synthetic as sc
from infotree_builder import full, project
from leanrpc.extract import extract_declarations
from leanrpc.services.extract import goals_match
from leanrpc.v1 import verifier_pb2 as pb

CASES = sorted(name for name in dir(sc) if name.startswith("case_"))


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("form", ["original", "full", "tactics"])
def test_units_partition_the_steps_into_outermost_tactics(name, form):
    src, commands = getattr(sc, name)()
    for decl in extract_declarations(project(full(src, commands), form), src.text):
        covered = []
        for number, unit in enumerate(decl.units):
            covered += list(range(unit.first, unit.last + 1))
            assert all(decl.steps[k].unit == number for k in range(unit.first, unit.last + 1))
            assert unit.text.startswith(decl.steps[unit.first].text)
            assert unit.text.endswith(decl.steps[unit.last].text)
            assert unit.goals_before == decl.steps[unit.first].goals_before
        assert covered == list(range(len(decl.steps)))


def test_structural_tactics_are_one_unit_with_their_tactic_goals():
    src, commands = sc.case_have()
    (decl,) = extract_declarations(project(full(src, commands), "original"), src.text)
    assert [(u.first, u.last, u.text, u.goals_after) for u in decl.units] == [
        (0, 2, "have h' : a + 0 = b := by\n    rw [Nat.add_zero]\n    exact h", [sc.HAVE_G1]),
        (3, 3, "omega", []),
    ]
    src, commands = sc.case_cdot()
    (decl,) = extract_declarations(project(full(src, commands), "original"), src.text)
    assert [u.text for u in decl.units] == [
        "constructor",
        "· exact hp",
        "· -- the second goal\n    exact hq",
    ]
    assert decl.units[1].goals_after == [sc.GQ]


def test_goals_match_ignores_trailing_spaces_only():
    assert goals_match(["a : Nat  \n⊢ a = a"], ["a : Nat\n⊢ a = a"])
    assert not goals_match(["⊢ a = a"], ["⊢ a = b"])
    assert not goals_match(["⊢ p", "⊢ q"], ["⊢ q", "⊢ p"])


def _sources():
    out = []
    for name in CASES:
        src, _ = getattr(sc, name)()
        if src.text not in [s for _, s in out]:
            out.append((name, src.text))
    return out


async def test_replay_matches_on_the_standin_for_every_construct_source(stub):
    checked = 0
    for name, text in _sources():
        response = await stub.Extract(pb.ExtractRequest(code=text, replay=True))
        for decl in response.declarations.declarations:
            if not decl.steps:
                continue
            assert decl.replay.ran and decl.replay.start_goals_match, (name, decl.replay)
            assert decl.replay.elapsed.ToTimedelta().total_seconds() > 0
            for step in decl.steps:
                assert step.replay.verdict == pb.REPLAY_VERDICT_MATCH, (
                    name,
                    step.text,
                    step.replay,
                )
                assert step.text in step.replay.tactic
                checked += 1
    assert checked >= len(CASES)


async def test_replay_of_a_rejected_tactic_is_error_then_not_run(stub):
    code = (
        "theorem t (p : Prop) (hp : p) : p ∧ p := by\n  constructor\n  frobnicate hp\n  exact hp\n"
    )
    response = await stub.Extract(pb.ExtractRequest(code=code, replay=True))
    (decl,) = response.declarations.declarations
    verdicts = [(s.text, s.replay.verdict) for s in decl.steps]
    assert verdicts == [
        ("constructor", pb.REPLAY_VERDICT_MATCH),
        ("frobnicate hp", pb.REPLAY_VERDICT_ERROR),
        ("exact hp", pb.REPLAY_VERDICT_NOT_RUN),
    ]
    assert "unknown tactic" in decl.steps[1].replay.error


async def test_without_replay_no_report(stub):
    response = await stub.Extract(pb.ExtractRequest(code="theorem t : 1 = 1 := by\n  rfl\n"))
    (decl,) = response.declarations.declarations
    assert not decl.HasField("replay") and not decl.steps[0].HasField("replay")
