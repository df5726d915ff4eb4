"""The pipelined fence (issue 28 item 1): a batch of commands written at once,
one fence and one audit at the end. A real stand-in batch is answered in order;
a hostile fake (batch_repl.py) that drops, adds, forges or reorders a frame at
any position of the batch poisons the worker and delivers no answer."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from leanrpc import repl
from leanrpc.config import LimitsConfig
from leanrpc.errors import WorkerError, WorkerPoisoned
from leanrpc.worker.fence import FenceSettings
from leanrpc.worker.launcher import Launcher, LaunchSpec
from leanrpc.worker.worker import Worker

FAKE = [sys.executable, str(Path(__file__).with_name("batch_repl.py"))]
STANDIN = [sys.executable, "-m", "leanrpc.standin"]


async def _worker(argv) -> Worker:
    worker = Worker(
        "wb", LaunchSpec(argv=list(argv)), Launcher(), LimitsConfig(), fence=FenceSettings()
    )
    await worker.start(30)
    return worker


async def test_a_stand_in_batch_is_answered_in_order_with_one_fence():
    worker = await _worker(STANDIN)
    try:
        header = await worker.request(repl.command("import Mathlib"), 30)
        env = worker.next_env
        answers = await worker.request_batch(
            [
                repl.command("theorem t (n : Nat) : n + 0 = n := by sorry", header.env),
                repl.command("#print axioms t", env),
                repl.command("example : True := trivial", env),
            ],
            30,
        )
        assert [a.env for a in answers] == [env, env + 1, env + 2]
        assert answers[0].sorries and "axioms" in answers[1].messages[0].data
        state = answers[0].sorries[0].proof_state
        steps = await worker.request_batch(
            [
                repl.TacticRequest(tactic=t, proof_state=state)
                for t in ("intro h", "simp", "frobnicate")
            ],
            30,
        )
        assert len(steps) == 3 and steps[2].message and steps[0].proof_state is not None
        assert worker._channel.batches == 2 and worker.alive
    finally:
        await worker.stop(2.0)


@pytest.mark.parametrize("misdeed", ["drop", "extra", "forge", "hold", "fence"])
@pytest.mark.parametrize("position", [0, 1, 2])
async def test_a_bad_frame_anywhere_in_a_batch_poisons_the_worker(misdeed, position):
    worker = await _worker(FAKE)
    try:
        env = worker.next_env
        texts = ["example : True := trivial"] * 3
        texts[position] = f"-- {misdeed}"
        with pytest.raises(WorkerError) as info:
            await worker.request_batch([repl.command(t, env) for t in texts], 5)
        assert isinstance(info.value, WorkerPoisoned), info.value
        assert not worker.alive or worker._channel.poisoned is not None
    finally:
        await worker.stop(2.0)


@pytest.mark.parametrize("misdeed", ["drop", "extra", "forge", "hold", "fence"])
@pytest.mark.parametrize("position", [0, 1, 3])
async def test_a_bad_frame_anywhere_in_a_tactic_batch_poisons_the_worker(misdeed, position):
    """The Prover's batch (several tactics on one state, issue 28 item 2): the same fence."""
    worker = await _worker(FAKE)
    try:
        start = await worker.request(repl.command("theorem t : True := sorry", worker.next_env), 5)
        state = start.sorries[0].proof_state
        tactics = ["trivial"] * 4
        tactics[position] = f"skip -- {misdeed}"
        with pytest.raises(WorkerError) as info:
            await worker.request_batch(
                [repl.TacticRequest(tactic=t, proof_state=state) for t in tactics], 5
            )
        assert isinstance(info.value, WorkerPoisoned), info.value
        assert not worker.alive or worker._channel.poisoned is not None
    finally:
        await worker.stop(2.0)


async def test_the_fake_answers_an_honest_tactic_batch():
    worker = await _worker(FAKE)
    try:
        start = await worker.request(repl.command("theorem t : True := sorry", worker.next_env), 5)
        state = start.sorries[0].proof_state
        answers = await worker.request_batch(
            [repl.TacticRequest(tactic="trivial", proof_state=state)] * 4, 5
        )
        assert [a.proof_state for a in answers] == [state + 1, state + 2, state + 3, state + 4]
        assert worker.alive and worker._channel.batches == 1
    finally:
        await worker.stop(2.0)


async def test_the_fake_answers_an_honest_batch():
    """The control: the same fake, no misdeed, answers the batch (so the cases above can fail)."""
    worker = await _worker(FAKE)
    try:
        env = worker.next_env
        answers = await worker.request_batch(
            [repl.command("example : True := trivial", env)] * 3, 5
        )
        assert [a.env for a in answers] == [env, env + 1, env + 2]
    finally:
        await worker.stop(2.0)


async def test_verify_sends_the_axiom_check_in_the_bodys_own_command():
    """One exchange per checked body (repl/trailing.py): the check's lines ride in
    the body's command, one fence and one audit, and no env of its own."""
    from leanrpc.services.verify import VerifyOptions
    from workers_support import start_service

    service = await start_service(workers=1)
    try:
        first = await service.verify(
            "a", "import Mathlib\n\ntheorem t : True := trivial\n", VerifyOptions(check_axioms=True)
        )
        assert first.status.name == "VALID" and first.axioms_checked, first.error
        [worker] = service.pool.workers
        channel, env = worker._channel, worker.next_env
        exchanges = channel.exchanges
        result = await service.verify(
            "b", "import Mathlib\n\ntheorem u : True := trivial\n", VerifyOptions(check_axioms=True)
        )
        assert result.status.name == "VALID" and result.axioms_checked, result.error
        assert result.axioms == [] and not result.messages  # the check's answer is not the body's
        assert channel.exchanges == exchanges + 1 and channel.batches == 0
        assert worker.next_env == env + 1  # one env for the body and its check
    finally:
        await service.pool.close(2.0)


async def test_a_body_asking_for_an_infotree_sends_its_axiom_check_as_one_batch():
    """The check's lines would be in the infotree: it goes as a command of its own,
    pipelined with the body (one fence)."""
    from leanrpc.services.verify import VerifyOptions
    from workers_support import start_service

    service = await start_service(workers=1)
    try:
        result = await service.verify(
            "a",
            "import Mathlib\n\ntheorem t : True := trivial\n",
            VerifyOptions(check_axioms=True, infotree="original"),
        )
        assert result.status.name == "VALID" and result.axioms_checked, result.error
        [worker] = service.pool.workers
        assert worker._channel.batches == 1  # body + #print axioms: one fence
    finally:
        await service.pool.close(2.0)
