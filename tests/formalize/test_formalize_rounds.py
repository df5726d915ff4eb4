"""k candidates per round, dedupe, parallel verify, best-failure feedback, the triviality gate, budgets."""

import asyncio
import dataclasses
import json

import pytest

from formalize_support import (
    GOOD,
    FakeVerify,
    LeanLikeVerify,
    ScriptedGenerator,
    collect,
    error_result,
    sorry_result,
)
from leanrpc.errors import RequestError
from leanrpc.formalize.config import FormalizeConfig
from leanrpc.formalize.repair import Formalizer
from leanrpc.formalize.triviality import probes
from leanrpc.formalize.types import (
    Candidate,
    FormalizeRequest,
    Outcome,
    OutcomeStatus,
    Sampling,
    TokenChunk,
)
from leanrpc.formalize.wellformed import canonical_form
from leanrpc.results import Message, Position, Severity, SorryInfo, Status, VerifyResult
from leanrpc.services.formalize import FormalizeService
from testkit import shared_path

BAD = "theorem t (n : ℕ) : Nat.nonexistent_lemma n = 0 := by sorry"
BAD_VARIANT = (
    "theorem t   (n : ℕ) :  -- a comment\n  Nat.nonexistent_lemma n = 0 /- block -/ := by sorry"
)
OTHER_BAD = "theorem u (n : ℕ) : Nat.unknown_thing n = 1 := by sorry"
SAMPLED = Sampling(temperature=0.7, seed=11)


def _cands(events):
    return [e for e in events if isinstance(e, Candidate)]


def test_canonical_form_ignores_comments_and_whitespace():
    assert canonical_form(BAD) == canonical_form(BAD_VARIANT)
    assert canonical_form(BAD) != canonical_form(OTHER_BAD)
    assert (
        canonical_form('theorem s : "a  b" = "a  b" := by sorry').count("a  b") == 2
    )  # strings kept


async def test_k_candidates_per_round_dedupe_and_parallel_verify(config):
    config = dataclasses.replace(config, max_candidates=4)
    gen = ScriptedGenerator(
        [
            BAD,
            BAD_VARIANT,
            OTHER_BAD,  # round 1: one duplicate
            OTHER_BAD,
            BAD,
            GOOD,
        ]
    )  # round 2: two repeats of round 1, one new
    active = peak = 0

    class CountingVerify(FakeVerify):
        async def __call__(self, code):
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            try:
                await asyncio.sleep(0.05)
                return await super().__call__(code)
            finally:
                active -= 1

    verify = CountingVerify()
    events = await collect(
        Formalizer(gen, verify, config)
        .job(FormalizeRequest(id="k", informal_statement="n", candidates=3, sampling=SAMPLED))
        .events()
    )
    out = events[-1]
    assert (
        out.status == OutcomeStatus.FORMALIZED
        and out.iterations == 2
        and out.lean_statement == GOOD
    )
    cands = _cands(events)
    assert [(c.iteration, c.index) for c in cands] == [
        (1, 0),
        (1, 1),
        (1, 2),
        (2, 0),
        (2, 1),
        (2, 2),
    ]
    assert cands[1].duplicate_of == "1.0" and cands[1].verify_result is None
    assert cands[3].duplicate_of == "1.2" and cands[4].duplicate_of == "1.0"
    assert len(verify.codes) == 3 and out.candidates_verified == 3 and out.duplicates == 3
    assert peak == 2  # the two distinct candidates of round 1 were verified together
    seeds = [p.seed for _, _, p in gen.calls]
    assert len(gen.calls) == 6 and len(set(seeds)) == 6  # one batch of 3 per round, distinct seeds
    assert cands[0].error_category == "unknown_ident"


async def test_greedy_decoding_samples_one_candidate_and_k_is_bounded(config):
    gen = ScriptedGenerator([GOOD])
    events = await collect(
        Formalizer(gen, FakeVerify(), config)
        .job(FormalizeRequest(id="g", informal_statement="x", candidates=4))
        .events()
    )
    assert events[-1].status == OutcomeStatus.FORMALIZED and len(gen.calls) == 1
    events = await collect(
        Formalizer(gen, FakeVerify(), config)
        .job(FormalizeRequest(id="h", informal_statement="x", candidates=99, sampling=SAMPLED))
        .events()
    )
    assert events[-1].status == OutcomeStatus.FAILED and "candidates 99" in events[-1].error


async def test_best_failure_feedback_has_source_lines_goals_and_suggestions(config, small_names):
    two_errors = VerifyResult(
        id="",
        status=Status.INVALID,
        messages=[
            Message(
                Severity.ERROR, Position(3, 20), None, "unknown identifier 'Nat.nonexistent_lemma'"
            ),
            Message(Severity.ERROR, Position(3, 40), None, "type mismatch"),
        ],
    )
    one_error = VerifyResult(
        id="",
        status=Status.INVALID,
        messages=[
            Message(Severity.ERROR, Position(4, 2), None, "unknown identifier 'Nat.prme_two_le'"),
        ],
        sorries=[SorryInfo(Position(4, 30), None, "n : ℕ\n⊢ 2 ≤ n")],
    )
    first = "theorem a (n : ℕ) : Nat.nonexistent_lemma n = 0 := by sorry"
    second = "theorem b (n : ℕ) :\n  Nat.prme_two_le n := by sorry"
    results = {first: two_errors, second: one_error}

    async def verify(code):
        return next((r for s, r in results.items() if s in code), None) or sorry_result(code)

    gen = ScriptedGenerator([first, second, GOOD, GOOD])
    events = await collect(
        Formalizer(gen, verify, config, names=small_names)
        .job(FormalizeRequest(id="f", informal_statement="n", candidates=2, sampling=SAMPLED))
        .events()
    )
    assert events[-1].status == OutcomeStatus.FORMALIZED
    feedback = gen.calls[2][0][-1]["content"]
    attempt = gen.calls[2][0][-2]["content"]
    assert "theorem b" in attempt  # the best failure (one error) is the attempt fed back
    assert "line 2, col 2: unknown identifier 'Nat.prme_two_le'" in feedback
    assert "  2 |   Nat.prme_two_le n := by sorry" in feedback  # its source line
    assert "goal at sorry (line 2):\nn : ℕ\n⊢ 2 ≤ n" in feedback
    assert "Nat.Prime.two_le" in feedback  # System A
    cand_b = _cands(events)[1]
    assert cand_b.suggestions["Nat.prme_two_le"][0] == "Nat.Prime.two_le"


def test_candidate_proto_carries_category_suggestions_and_trivial_flag():
    from leanrpc.edge.formalizer import event_to_pb
    from leanrpc.formalize.types import FormalizeEvent
    from leanrpc.formalize.wellformed import check

    c = Candidate(
        iteration=2,
        lean_statement=BAD,
        well_formed=check(BAD),
        verify_result=error_result("x"),
        error_category="unknown_ident",
        suggestions={"Nat.prme": ["Nat.Prime", "Nat.prime_def"]},
        index=1,
        duplicate_of="",
        suspect_trivial=True,
        trivial_reason="r",
    )
    pb = event_to_pb(FormalizeEvent("j", c)).candidate
    assert (
        pb.error_category == "unknown_ident"
        and pb.index == 1
        and pb.suspect_trivial
        and pb.trivial_reason == "r"
    )
    assert [(s.name, list(s.candidates)) for s in pb.suggestions] == [
        ("Nat.prme", ["Nat.Prime", "Nat.prime_def"])
    ]
    o = event_to_pb(
        FormalizeEvent(
            "j",
            Outcome(
                OutcomeStatus.EXHAUSTED,
                1,
                elapsed_s=0.5,
                budget_s=2.0,
                budget_exhausted=True,
                candidates_verified=3,
                duplicates=1,
            ),
        )
    ).outcome
    assert (
        o.budget_exhausted
        and o.budget.ToTimedelta().total_seconds() == 2.0
        and o.candidates_verified == 3
        and o.duplicates == 1
    )


def test_budgets_cross_the_edge_as_durations():
    from google.protobuf import duration_pb2

    from leanrpc.edge.formalizer import info_to_pb, request_from_pb
    from leanrpc.v1 import formalizer_pb2 as fpb

    msg = fpb.FormalizeRequest(
        id="a", informal_statement="x", budget=duration_pb2.Duration(seconds=1, nanos=500_000_000)
    )
    assert request_from_pb(msg).budget_s == 1.5
    assert (
        request_from_pb(fpb.FormalizeRequest(id="a", informal_statement="x")).budget_s == 0.0
    )  # unset: server default
    for bad in (duration_pb2.Duration(seconds=-2), duration_pb2.Duration(seconds=1, nanos=-5)):
        with pytest.raises(RequestError) as err:
            request_from_pb(fpb.FormalizeRequest(id="a", informal_statement="x", budget=bad))
        assert err.value.field == "request.budget"
    info = info_to_pb(
        {
            "adapters": ["a"],
            "default_adapter": "a",
            "quantized": False,
            "device": "cpu",
            "grouped_dispatch_layers": 0,
            "max_candidates": 4,
            "job_budget_s": 600.0,
            "stream_budget_s": 0.25,
        }
    )
    assert (
        info.job_budget.ToTimedelta().total_seconds() == 600.0
        and info.stream_budget.ToNanoseconds() == 250_000_000
    )
    assert list(info.adapters) == ["a"] and info.max_candidates == 4


# --------------------------------------------------------------------------- triviality gate


def _minif2f_statement() -> str:
    path = shared_path("datasets", "minif2f-proofnet-putnam-goedel-prover", "minif2f.jsonl")
    with open(path) as f:
        row = json.loads(f.readline())
    return row["formal_statement"].strip() + " sorry"


def test_probes_keep_binders_and_goal():
    (_, closes), (_, refutes) = probes("theorem x (h : 1 = 2) (n : ℕ) : n = n := by sorry")
    assert closes == "theorem x (h : 1 = 2) (n : ℕ) : n = n := by first | trivial | decide | simp"
    assert refutes == "example (h : 1 = 2) (n : ℕ) : False := by simp_all"
    assert len(probes("theorem t : 1 = 1 := by sorry")) == 1  # no hypotheses: nothing to refute


async def test_triviality_gate_flags_1_eq_1_not_a_minif2f_statement():
    config = FormalizeConfig(mathlib_names_path=None)  # triviality_check on (the default)
    real = _minif2f_statement()
    for statement, trivial in (
        ("theorem t : 1 = 1 := by sorry", True),
        (real, False),
        ("theorem v (h : 2 + 2 = 5) : (0 : ℕ) < 1 := by sorry", True),
    ):
        verify = LeanLikeVerify()
        events = await collect(
            Formalizer(ScriptedGenerator([statement]), verify, config)
            .job(FormalizeRequest(id="t", informal_statement="s"))
            .events()
        )
        out, cand = events[-1], _cands(events)[0]
        assert out.status == OutcomeStatus.FORMALIZED  # still counts as compiled
        assert cand.suspect_trivial is trivial, statement
        assert len(verify.codes) == 1 + len(probes(statement))
    assert "contradictory" in cand.trivial_reason


async def test_triviality_gate_ignores_the_standin():
    from leanrpc.results import VerifierIdentity

    async def standin_like(code):
        return VerifyResult(
            id="",
            status=Status.VALID if "by sorry" not in code else Status.SORRY,
            verifier=VerifierIdentity(kind="stand-in"),
        )

    events = await collect(
        Formalizer(
            ScriptedGenerator(["theorem t : 1 = 1 := by sorry"]),
            standin_like,
            FormalizeConfig(mathlib_names_path=None),
        )
        .job(FormalizeRequest(id="s", informal_statement="s"))
        .events()
    )
    assert events[-1].status == OutcomeStatus.FORMALIZED and not _cands(events)[0].suspect_trivial


# --------------------------------------------------------------------------- budgets and adapters


async def test_job_budget_ends_the_job_promptly(config):
    script = "theorem slow : " + "x " * 200 + ": by sorry"  # ~9 s at one char per 20 ms
    gen = ScriptedGenerator([script], chunk=1, delay=0.02)
    events = await collect(
        Formalizer(gen, FakeVerify(), config)
        .job(FormalizeRequest(id="b", informal_statement="x", budget_s=0.3))
        .events()
    )
    out = events[-1]
    assert (
        out.status == OutcomeStatus.EXHAUSTED
        and out.budget_exhausted
        and out.budget_s == pytest.approx(0.3)
    )
    assert "budget" in out.error and 0.3 <= out.elapsed_s
    # Promptly: a count, not a wall clock. The stream was stopped a small part of the
    # way into its script (it would take about 30 budgets to stream it all).
    streamed = sum(len(e.text) for e in events if isinstance(e, TokenChunk))
    assert streamed < len(script) / 3, (streamed, len(script))
    assert gen.streams[0]._cancel  # generation was stopped, not awaited to the end


async def test_job_budget_never_exceeds_the_server_budget(config):
    config = dataclasses.replace(config, job_budget_s=0.2)
    gen = ScriptedGenerator(["theorem slow : " + "x " * 200 + ": by sorry"], chunk=1, delay=0.02)
    events = await collect(
        Formalizer(gen, FakeVerify(), config)
        .job(FormalizeRequest(id="b", informal_statement="x", budget_s=50))
        .events()
    )
    assert events[-1].budget_exhausted and events[-1].budget_s == pytest.approx(0.2)


async def test_stream_budget_ends_every_job_on_the_stream(config):
    config = dataclasses.replace(config, stream_budget_s=0.3)
    gen = ScriptedGenerator(["theorem slow : " + "x " * 200 + ": by sorry"], chunk=1, delay=0.02)
    service = FormalizeService(gen, FakeVerify(), config)
    session = service.open_session()
    for i in range(3):
        session.submit(FormalizeRequest(id=f"j{i}", informal_statement="x"))
    session.end_input()
    outcomes = [
        e.payload for e in await collect(session.events()) if isinstance(e.payload, Outcome)
    ]
    assert len(outcomes) == 3 and all(
        o.budget_exhausted and o.status == OutcomeStatus.EXHAUSTED for o in outcomes
    )
    await service.close()


async def test_adapter_selection_and_unknown_adapter(config):
    gen = ScriptedGenerator([GOOD])
    f = Formalizer(gen, FakeVerify(), config, adapters=["dora", "lora"], default_adapter="dora")
    assert (
        f.adapter_for("") == "dora"
        and f.adapter_for("none") is None
        and f.adapter_for("lora") == "lora"
    )
    with pytest.raises(RequestError, match="unknown adapter 'gamma'"):
        f.adapter_for("gamma")
    await collect(f.job(FormalizeRequest(id="a", informal_statement="x", adapter="lora")).events())
    assert gen.calls[-1][2].adapter == "lora"
    service = FormalizeService(gen, FakeVerify(), config, adapters=["dora"], default_adapter="dora")
    session = service.open_session()
    with pytest.raises(RequestError, match="unknown adapter"):
        session.submit(FormalizeRequest(id="u", informal_statement="x", adapter="gamma"))
    assert (
        service.adapter_info()["adapters"] == ["dora"]
        and service.adapter_info()["default_adapter"] == "dora"
    )
    await service.close()
