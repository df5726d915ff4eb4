"""Integration: the repair loop verifying through the REPL stand-in (`python -m leanrpc.standin`).

The stand-in type-checks nothing: a statement ending in `:= by sorry` is SORRY.
It reports unknown identifiers only inside proof bodies (after exact/apply/rw),
and a header importing an unknown module breaks every command, which is how
these tests get INVALID results through it.
"""

import asyncio

import pytest

from leanrpc.formalize.diagnostics import unknown_identifiers
from leanrpc.formalize.repair import Formalizer
from leanrpc.formalize.replverify import ReplVerifier, result_from_response
from leanrpc.formalize.types import Candidate, FormalizeRequest, Outcome, OutcomeStatus
from leanrpc.results import Status

from formalize_support import GOOD, ScriptedGenerator, collect



@pytest.fixture
async def standin():
    verifier = ReplVerifier(timeout_s=30)
    yield verifier
    await verifier.close()


async def test_verifier_statuses(standin):
    ok = await standin(f"import Mathlib\n\n{GOOD}\n")
    assert ok.status == Status.SORRY and ok.sorries and ok.verifier.kind == "stand-in"
    bad = await standin("import Mathlib\n\ntheorem foo (x : ℕ) : x = x := by\n  exact Nat.nonexistent_lemma x\n")
    assert bad.status == Status.INVALID
    assert unknown_identifiers(bad.messages) == ["Nat.nonexistent_lemma"]
    valid = await standin("theorem t : True := trivial")
    assert valid.status == Status.VALID
    assert standin.calls == 3


def test_rejected_response():
    r = result_from_response({"message": "Unknown environment."})
    assert r.status == Status.REJECTED and "Unknown environment" in r.error


async def test_repair_loop_through_standin(standin, config):
    gen = ScriptedGenerator(["Sure! theorem missing_sorry : (2 : ℕ) + 2 = 4 := by norm_num", GOOD])
    events = await collect(Formalizer(gen, standin, config).job(
        FormalizeRequest(id="a", informal_statement="Two plus two is four.")).events())
    out = events[-1]
    assert isinstance(out, Outcome) and out.status == OutcomeStatus.FORMALIZED and out.iterations == 2
    cands = [e for e in events if isinstance(e, Candidate)]
    assert not cands[0].well_formed.ok and cands[1].verify_result.status == Status.SORRY


async def test_broken_header_exhausts_with_feedback(standin, config):
    gen = ScriptedGenerator([GOOD, GOOD.replace("two_add_two", "two_plus_two")])
    events = await collect(Formalizer(gen, standin, config).job(FormalizeRequest(
        id="b", informal_statement="Two plus two is four.", header="import Mathlib\nimport NoSuch.Module",
        max_iterations=2)).events())
    out = events[-1]
    assert out.status == OutcomeStatus.EXHAUSTED and out.iterations == 2
    cands = [e for e in events if isinstance(e, Candidate)]
    assert len(cands) == 2 and all(c.verify_result.status == Status.INVALID for c in cands)
    assert "Lean reports these errors" in gen.calls[1][0][3]["content"]
    # the same statement again is a duplicate: not verified a second time
    gen = ScriptedGenerator([GOOD])
    events = await collect(Formalizer(gen, standin, config).job(FormalizeRequest(
        id="c", informal_statement="Two plus two is four.", header="import Mathlib\nimport NoSuch.Module",
        max_iterations=3)).events())
    first, second, third = [e for e in events if isinstance(e, Candidate)]
    assert first.verify_result.status == Status.INVALID
    assert second.duplicate_of == third.duplicate_of == "1.0" and second.verify_result is None
    assert events[-1].duplicates == 2 and events[-1].candidates_verified == 1
    assert "already tried" in gen.calls[2][0][3]["content"]


async def test_verifier_restarts_after_kill(standin):
    await standin("theorem t : True := trivial")
    standin._proc.kill()
    await asyncio.sleep(0.1)
    r = await standin("theorem t : True := trivial")
    assert r.status in (Status.CRASH, Status.VALID)
    assert (await standin("theorem t : True := trivial")).status == Status.VALID


@pytest.mark.model
async def test_tiny_model_service_with_standin(tiny_dir, standin):
    """The whole stack: tiny NF4 model -> engine -> repair loop -> stand-in REPL."""
    from leanrpc.formalize.config import FormalizeConfig
    from leanrpc.services.formalize import FormalizeService

    cfg = FormalizeConfig(model_dir=str(tiny_dir), device="cpu", max_new_tokens=6, mathlib_names_path=None)
    svc = FormalizeService.from_config(cfg, standin)
    assert svc.serving_status() == (True, "")
    events = await collect(svc.formalize(FormalizeRequest(id="t", informal_statement="1 + 1 = 2", max_iterations=1)))
    assert isinstance(events[-1], Outcome) and events[-1].iterations == 1
    await svc.close()
