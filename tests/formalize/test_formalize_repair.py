"""The repair loop on a scripted generator and fake verifiers."""

import asyncio

import pytest

from formalize_support import GOOD, FakeVerify, ScriptedGenerator, collect, error_result
from leanrpc.errors import WorkerCrashed
from leanrpc.formalize import prompts
from leanrpc.formalize.repair import Formalizer
from leanrpc.formalize.types import (
    Candidate,
    FormalizeRequest,
    Outcome,
    OutcomeStatus,
    Sampling,
    TokenChunk,
)
from leanrpc.results import Status, VerifyResult

BAD_NAME = "theorem t (p : ℕ) (hp : Nat.prme p) : 2 ≤ p := by sorry"
FIXED = "theorem t (p : ℕ) (hp : Nat.Prime p) : 2 ≤ p := by sorry"


def req(**kw) -> FormalizeRequest:
    kw.setdefault("id", "j1")
    kw.setdefault("informal_statement", "Every prime is at least two.")
    return FormalizeRequest(**kw)


async def run(gen, verify, config, names=None, **kw):
    f = Formalizer(gen, verify, config, names=names)
    return await collect(f.job(req(**kw)).events())


def outcome(events) -> Outcome:
    assert isinstance(events[-1], Outcome)
    assert sum(isinstance(e, Outcome) for e in events) == 1
    return events[-1]


def candidates(events) -> list[Candidate]:
    return [e for e in events if isinstance(e, Candidate)]


async def test_first_try_success(config):
    gen = ScriptedGenerator([GOOD + "\n```\nextra"])
    verify = FakeVerify()
    events = await run(gen, verify, config)
    out = outcome(events)
    assert out.status == OutcomeStatus.FORMALIZED and out.iterations == 1
    assert out.lean_statement == GOOD
    (cand,) = candidates(events)
    assert cand.well_formed.ok and cand.verify_result.status == Status.SORRY
    assert verify.codes == [f"import Mathlib\n\n{GOOD}\n"]
    assert not any(isinstance(e, TokenChunk) for e in events)  # stream_tokens off
    _, prefix, params = gen.calls[0]
    assert prefix == prompts.ASSISTANT_PREFIX and params.stop == prompts.STOP
    assert params.temperature == 0.0 and params.max_new_tokens == config.max_new_tokens
    assert out.generated_tokens > 0


async def test_token_streaming_reassembles(config):
    gen = ScriptedGenerator([GOOD], chunk=3)
    events = await run(gen, FakeVerify(), config, stream_tokens=True)
    chunks = [e for e in events if isinstance(e, TokenChunk)]
    assert len(chunks) > 5 and all(c.iteration == 1 for c in chunks)
    assert "".join(c.text for c in chunks) == GOOD
    # token chunks come before the candidate
    assert events.index(candidates(events)[0]) > events.index(chunks[-1])


async def test_repair_with_did_you_mean(config, small_names):
    gen = ScriptedGenerator([BAD_NAME, FIXED])
    events = await run(gen, FakeVerify(), config, names=small_names)
    out = outcome(events)
    assert out.status == OutcomeStatus.FORMALIZED and out.iterations == 2
    c1, c2 = candidates(events)
    assert c1.verify_result.status == Status.INVALID and c1.error_category == "unknown_ident"
    assert c1.suggestions["Nat.prme"][0] == "Nat.Prime"
    messages = gen.calls[1][0]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert BAD_NAME in messages[2]["content"]
    feedback = messages[3]["content"]
    assert "Unknown identifier `Nat.prme`" in feedback
    assert "did you mean `Nat.Prime`" in feedback
    assert "line 1, col 20" in feedback  # positions relative to the statement, not the header


async def test_errors_truncated_to_800_chars(config):
    gen = ScriptedGenerator([GOOD])
    verify = FakeVerify(script=[error_result("type mismatch " + "y" * 3000)] * 2)
    events = await run(gen, verify, config, max_iterations=2)
    feedback = gen.calls[1][0][3]["content"]
    block = feedback.split("```\n", 1)[1].split("\n```", 1)[0]
    assert len(block) == 800 and block.endswith("[truncated]")
    out = outcome(events)
    assert (
        out.status == OutcomeStatus.EXHAUSTED and out.iterations == 2 and out.lean_statement == ""
    )


async def test_default_five_iterations_then_exhausted(config):
    gen = ScriptedGenerator(["I cannot do that."])
    verify = FakeVerify()
    events = await run(gen, verify, config)
    out = outcome(events)
    assert out.status == OutcomeStatus.EXHAUSTED and out.iterations == 5
    cands = candidates(events)
    assert [c.iteration for c in cands] == [1, 2, 3, 4, 5]
    assert all(not c.well_formed.ok and c.verify_result is None for c in cands)
    assert verify.codes == []  # never verified
    assert "not a well-formed statement" in gen.calls[1][0][3]["content"]


async def test_retrieval_prepended_to_first_prompt_only(config, small_names):
    gen = ScriptedGenerator([BAD_NAME, FIXED])
    await run(
        gen,
        FakeVerify(),
        config,
        names=small_names,
        retrieval=True,
        informal_statement="Every prime number p satisfies 2 <= p.",
    )
    first_user = gen.calls[0][0][1]["content"]
    assert "Mathlib declarations that may be relevant" in first_user and "`Nat.Prime`" in first_user
    # the task message stays the same; no second retrieval block
    assert gen.calls[1][0][1]["content"] == first_user
    gen2 = ScriptedGenerator([GOOD])
    await run(gen2, FakeVerify(), config, names=small_names, retrieval=False)
    assert "may be relevant" not in gen2.calls[0][0][1]["content"]


async def test_header_and_sampling_passed(config):
    gen = ScriptedGenerator(["junk", GOOD])
    verify = FakeVerify()
    await run(
        gen,
        verify,
        config,
        header="import Mathlib\nopen Real",
        sampling=Sampling(temperature=0.7, top_p=0.9, max_new_tokens=64, seed=11),
    )
    p1, p2 = gen.calls[0][2], gen.calls[1][2]
    assert (p1.temperature, p1.top_p, p1.max_new_tokens, p1.seed) == (
        pytest.approx(0.7),
        pytest.approx(0.9),
        64,
        11,
    )
    assert p2.seed == 12  # a fresh seed per iteration
    assert verify.codes[0].startswith("import Mathlib\nopen Real\n\ntheorem")


@pytest.mark.parametrize(
    "kw, text",
    [
        ({"informal_statement": "  "}, "informal_statement is empty"),
        ({"max_iterations": 99}, "exceeds the server limit"),
        ({"sampling": Sampling(max_new_tokens=10**6)}, "exceeds the server limit"),
        ({"sampling": Sampling(top_p=2)}, "top_p"),
    ],
)
async def test_invalid_requests_fail_the_job(config, kw, text):
    gen = ScriptedGenerator([GOOD])
    events = await run(gen, FakeVerify(), config, **kw)
    out = outcome(events)
    assert out.status == OutcomeStatus.FAILED and text in out.error and out.iterations == 0
    assert gen.calls == []


async def test_verify_error_fails(config):
    events = await run(
        ScriptedGenerator([GOOD]), FakeVerify(raises=WorkerCrashed("repl died")), config
    )
    out = outcome(events)
    assert out.status == OutcomeStatus.FAILED and "repl died" in out.error
    assert candidates(events)[0].verify_result is None


async def test_rejected_fails_timeout_retries(config):
    rejected = VerifyResult(id="", status=Status.REJECTED, error="header failed to load")
    events = await run(ScriptedGenerator([GOOD]), FakeVerify(script=[rejected]), config)
    assert (
        outcome(events).status == OutcomeStatus.FAILED and "header failed" in outcome(events).error
    )
    timeout = VerifyResult(id="", status=Status.TIMEOUT, error="ran past 60 s")
    gen = ScriptedGenerator([GOOD])
    events = await run(gen, FakeVerify(script=[timeout]), config)
    assert outcome(events).status == OutcomeStatus.FORMALIZED and outcome(events).iterations == 2
    assert "did not finish checking (timeout)" in gen.calls[1][0][3]["content"]


async def test_generation_error_fails(config):
    events = await run(ScriptedGenerator([GOOD], fail="CUDA out of memory"), FakeVerify(), config)
    assert (
        outcome(events).status == OutcomeStatus.FAILED
        and "CUDA out of memory" in outcome(events).error
    )


async def test_cancel_during_generation_stops_within_a_few_chunks(config):
    gen = ScriptedGenerator([GOOD * 50], chunk=2, delay=0.002)
    f = Formalizer(gen, FakeVerify(), config)
    job = f.job(req(stream_tokens=True))
    events = []
    async for ev in job.events():
        events.append(ev)
        if sum(isinstance(e, TokenChunk) for e in events) == 3:
            job.cancel()
    out = outcome(events)
    assert out.status == OutcomeStatus.CANCELLED and out.iterations == 1
    assert gen.streams[0].emitted_chunks <= 5


async def test_cancel_during_verify(config):
    verify = FakeVerify(delay=10)
    f = Formalizer(ScriptedGenerator([GOOD]), verify, config)
    job = f.job(req())
    task = asyncio.create_task(collect(job.events()))
    while not verify.codes:
        await asyncio.sleep(0.005)
    job.cancel()
    events = await asyncio.wait_for(task, 2)
    assert outcome(events).status == OutcomeStatus.CANCELLED
    assert len(candidates(events)) == 1


async def test_cancel_before_start(config):
    gen = ScriptedGenerator([GOOD])
    job = Formalizer(gen, FakeVerify(), config).job(req())
    job.cancel()
    events = await collect(job.events())
    assert outcome(events).status == OutcomeStatus.CANCELLED and outcome(events).iterations == 0


async def test_consumer_leaving_cancels_stream(config):
    gen = ScriptedGenerator([GOOD * 50], chunk=2, delay=0.002)
    job = Formalizer(gen, FakeVerify(), config).job(req(stream_tokens=True))
    agen = job.events()
    await agen.__anext__()
    await agen.aclose()
    assert gen.streams[0]._cancel
