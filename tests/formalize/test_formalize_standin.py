"""Integration: the repair loop verifying through the real Verify service over a Pool of stand-in workers.

The stand-in type-checks nothing: a statement ending in `:= by sorry` is SORRY.
It reports unknown identifiers only inside proof bodies (after exact/apply/rw);
a header importing an unknown module is REJECTED by the Verify service.
"""

import pytest

from formalize_support import GOOD, ScriptedGenerator, collect
from leanrpc.formalize.diagnostics import unknown_identifiers
from leanrpc.formalize.repair import Formalizer
from leanrpc.formalize.types import Candidate, FormalizeRequest, Outcome, OutcomeStatus
from leanrpc.pool.pool import Pool
from leanrpc.results import Status
from leanrpc.services.verify import VerifyOptions, VerifyService
from testkit import loopback_config


@pytest.fixture
async def standin():
    """verify(code) through VerifyService on a Pool of two stand-in workers (what the server wires)."""
    config = loopback_config(2)
    pool = Pool(config)
    await pool.start()
    service = VerifyService(pool, config)

    async def verify(code: str):
        verify.calls += 1
        return await service.verify("formalize", code, VerifyOptions())

    verify.calls = 0
    verify.pool = pool
    yield verify
    await pool.close()


async def test_verifier_statuses(standin):
    ok = await standin(f"import Mathlib\n\n{GOOD}\n")
    assert ok.status == Status.SORRY and ok.sorries and ok.verifier.kind == "stand-in"
    bad = await standin(
        "import Mathlib\n\ntheorem foo (x : ℕ) : x = x := by\n  exact Nat.nonexistent_lemma x\n"
    )
    assert bad.status == Status.INVALID
    assert unknown_identifiers(bad.messages) == ["Nat.nonexistent_lemma"]
    valid = await standin("theorem t : True := trivial")
    assert valid.status == Status.VALID
    assert standin.calls == 3


async def test_repair_loop_through_standin(standin, config):
    gen = ScriptedGenerator(["Sure! theorem missing_sorry : (2 : ℕ) + 2 = 4 := by norm_num", GOOD])
    events = await collect(
        Formalizer(gen, standin, config)
        .job(FormalizeRequest(id="a", informal_statement="Two plus two is four."))
        .events()
    )
    out = events[-1]
    assert (
        isinstance(out, Outcome) and out.status == OutcomeStatus.FORMALIZED and out.iterations == 2
    )
    cands = [e for e in events if isinstance(e, Candidate)]
    assert not cands[0].well_formed.ok and cands[1].verify_result.status == Status.SORRY


async def test_broken_header_is_rejected_and_fails(standin, config):
    gen = ScriptedGenerator([GOOD])
    events = await collect(
        Formalizer(gen, standin, config)
        .job(
            FormalizeRequest(
                id="b",
                informal_statement="Two plus two is four.",
                header="import Mathlib\nimport NoSuch.Module",
                max_iterations=2,
            )
        )
        .events()
    )
    out = events[-1]
    assert out.status == OutcomeStatus.FAILED and out.iterations == 1 and "REJECTED" in out.error
    (cand,) = [e for e in events if isinstance(e, Candidate)]
    assert cand.verify_result.status == Status.REJECTED
    assert (
        len(gen.calls) == 1
    )  # no second round: the verifier refuses the header, not the statement


@pytest.mark.model
async def test_tiny_model_service_with_standin(tiny_dir, standin):
    """The whole stack: tiny NF4 model -> engine -> repair loop -> stand-in REPL."""
    from leanrpc.formalize.config import FormalizeConfig
    from leanrpc.services.formalize import FormalizeService

    cfg = FormalizeConfig(
        model_dir=str(tiny_dir), device="cpu", max_new_tokens=6, mathlib_names_path=None
    )
    svc = FormalizeService.from_config(cfg, standin)
    assert svc.serving_status() == (True, "")
    events = await collect(
        svc.formalize(FormalizeRequest(id="t", informal_statement="1 + 1 = 2", max_iterations=1))
    )
    assert isinstance(events[-1], Outcome) and events[-1].iterations == 1
    await svc.close()
