"""The composite gated reward of autoformalization (issue 38 item 3): its gates in
order, its weights, its infrastructure failures, over the RPC and through the adapter.

The stand-in REPL type-checks nothing: it answers a `sorry` statement SORRY, so the
compile and triviality gates' failures are shown with a verify double here, and the
RPC with what the stand-in really answers."""

from __future__ import annotations

import asyncio

import pytest

from leanrpc.client import AsyncClient
from leanrpc.formalize import reward
from leanrpc.formalize.metrics import faithfulness
from leanrpc.results import Message, Position, Severity, Status, VerifyResult
from leanrpc.rewards import LeanReward

REF = "theorem ref (a b : ℕ) (h₀ : a = b) : a + b = 2 * b := by sorry"
GOOD = "```lean\ntheorem mine (a b : ℕ) (h : a = b) : a + b = 2 * b := by sorry\n```"
CLOSE = "theorem mine (a b : ℕ) (h : a = b) : a + b = 3 * b := by sorry"


def answering(status: Status, *, trivial: bool = False, error: str = ""):
    """A verify double: `status` for the statement; VALID for triviality probes if `trivial`."""
    seen: list[str] = []

    async def verify(code: str) -> VerifyResult:
        seen.append(code)
        probe = "first | trivial" in code or "simp_all" in code
        got = Status.VALID if probe and trivial else (Status.INVALID if probe else status)
        messages = [Message(Severity.ERROR, Position(1, 0), None, error)] if error else []
        return VerifyResult(id="x", status=got, messages=messages)

    verify.seen = seen
    return verify


async def test_every_gate_passed_gives_the_weighted_sum_with_faithfulness():
    got = await reward.score(GOOD, REF, answering(Status.SORRY))
    assert got.failed_gate == "" and got.compiled and got.well_formed
    assert got.faithfulness == 1.0  # names of the theorem and hypotheses are canonicalized away
    assert got.reward == pytest.approx(0.1 + 0.2 + 0.7)
    near = await reward.score(CLOSE, REF, answering(Status.SORRY))
    assert near.reward == pytest.approx(0.3 + 0.7 * faithfulness(CLOSE, REF))
    assert 0.3 < near.reward < 1.0


async def test_not_well_formed_is_zero_and_never_reaches_lean():
    verify = answering(Status.SORRY)
    got = await reward.score("theorem t (a : ℕ : a = a := by sorry", REF, verify)
    assert (got.reward, got.failed_gate) == (0.0, "well_formed")
    assert "unbalanced" in got.reason
    assert verify.seen == []
    proved = await reward.score("theorem t : 1 = 1 := by rfl", REF, verify)
    assert proved.failed_gate == "well_formed"  # a statement must end with `by sorry`


async def test_a_statement_that_does_not_compile_keeps_only_the_well_formed_credit():
    got = await reward.score(GOOD, REF, answering(Status.INVALID, error="unknown identifier 'x'"))
    assert (got.reward, got.failed_gate) == (pytest.approx(0.1), "compiles")
    assert got.reason == "unknown identifier 'x'" and got.faithfulness is None


async def test_a_trivial_statement_gets_no_faithfulness_credit():
    got = await reward.score(GOOD, REF, answering(Status.SORRY, trivial=True))
    assert (got.reward, got.failed_gate) == (pytest.approx(0.3), "triviality")
    assert "proves it" in got.trivial_reason and got.faithfulness is None
    off = await reward.score(GOOD, REF, answering(Status.SORRY, trivial=True), triviality=False)
    assert off.reward == pytest.approx(1.0)


@pytest.mark.parametrize("status", [Status.CRASH, Status.CANCELLED])
async def test_an_infrastructure_failure_is_no_reward_not_zero(status):
    got = await reward.score(GOOD, REF, answering(status))
    assert got.reward is None and got.failed_gate == "infrastructure" and got.infra_error


async def test_a_verify_that_raises_or_an_unrun_refusal_is_no_reward():
    async def broken(code):
        raise ConnectionError("pool gone")

    got = await reward.score(GOOD, REF, broken)
    assert got.reward is None and "pool gone" in got.infra_error

    async def refused(code):
        return VerifyResult(id="x", status=Status.REJECTED, error="queue full", retry_after_s=0.5)

    assert (await reward.score(GOOD, REF, refused)).reward is None


async def test_a_timeout_fails_the_compile_gate_unless_asked_otherwise():
    assert (await reward.score(GOOD, REF, answering(Status.TIMEOUT))).reward == pytest.approx(0.1)
    got = await reward.score(GOOD, REF, answering(Status.TIMEOUT), timeout_is_failure=False)
    assert got.reward is None


async def test_weights_are_configurable_and_checked():
    w = reward.Weights(well_formed=0.0, compiles=0.5, faithfulness=0.5)
    got = await reward.score(GOOD, REF, answering(Status.SORRY), weights=w)
    assert got.reward == pytest.approx(1.0)
    assert reward.Weights(compiles=-1).problem()
    assert reward.Weights(0, 0, 0).problem()
    assert reward.Weights(float("nan")).problem()


async def test_identical_statements_in_a_batch_are_scored_once():
    verify = answering(Status.SORRY)
    plain = GOOD.split("\n", 1)[1].rsplit("```", 1)[0]  # the same statement, unfenced
    scores = await reward.score_many([(GOOD, REF, ""), (plain, REF, ""), (CLOSE, REF, "")], verify)
    statements = [c for c in verify.seen if "first | trivial" not in c and "simp_all" not in c]
    assert len(statements) == 2
    assert scores[0].reward == scores[1].reward == pytest.approx(1.0)


async def test_the_rpc_scores_in_order_and_echoes_the_weights(server):
    address = await server()
    async with AsyncClient(address) as client:
        response = await client.score_formalization(
            [
                {"completion": GOOD, "reference": REF},
                {"completion": "no statement here", "reference": REF},
                {"completion": CLOSE, "reference": REF, "id": "close"},
            ]
        )
    good, none, close = response.scores
    assert (good.id, none.id, close.id) == ("0", "1", "close")
    assert good.reward == pytest.approx(1.0) and good.compiled
    assert good.compile_result.status == 3  # STATUS_SORRY, as the stand-in answers
    assert good.compile_result.verifier.kind == "stand-in"
    assert none.reward == 0.0 and not none.well_formed
    assert close.reward == pytest.approx(0.3 + 0.7 * faithfulness(CLOSE, REF))
    w = response.weights
    assert (w.well_formed, w.compiles, w.faithfulness) == pytest.approx((0.1, 0.2, 0.7))


async def test_the_rpc_refuses_bad_input_with_the_field_named(server):
    address = await server()
    async with AsyncClient(address, max_retries=0) as client:
        for candidates, weights, field in (
            ([], None, "candidates"),
            ([{"completion": GOOD, "reference": " "}], None, "candidates[0].reference"),
            ([{"completion": GOOD, "reference": REF}], {"compiles": -1.0}, "weights"),
        ):
            with pytest.raises(Exception) as caught:
                await client.score_formalization(candidates, weights=weights)
            assert caught.value.code.name == "INVALID_ARGUMENT"
            assert caught.value.field_violations[0][0] == field


async def test_the_adapter_gives_the_composite_reward_and_none_when_the_server_is_gone(server):
    address = await server()
    f = LeanReward(server=address, kind="formalization")
    got = await asyncio.to_thread(
        f, prompts=["p", "p"], completions=[GOOD, "nothing"], formal_statement=[REF, REF]
    )
    assert got == [pytest.approx(1.0), 0.0]
    assert f.last_details[0].extra["faithfulness"] == 1.0
    assert f.last_details[1].extra["failed_gate"] == "well_formed"
    await server.apps[0].stop(2.0)
    server.apps.clear()
    gone = await asyncio.to_thread(f, completions=[GOOD], formal_statement=[REF])
    assert gone == [None] and "UNAVAILABLE" in f.last_details[0].infra_error
