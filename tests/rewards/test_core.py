"""The one reward core (issue 38 item 2): the verdict table over a real server on
the stand-in, one deduplicated call per batch, the default checks and their
levels, and every kind of infrastructure failure as None, never 0."""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys

import grpc
import pytest

from leanrpc.rewards import Problem, RewardCore
from leanrpc.v1 import verifier_pb2 as pb

STATEMENT = "theorem add_comm' (a b : ℕ) : a + b = b + a := by\n"
P = Problem(STATEMENT, "import Mathlib")
FENCE = "```lean\n{}\n```"
# The stand-in is a test double, not Lean: its "wrong proof" is an unknown lemma.
CASES = [
    (FENCE.format("theorem add_comm' (a b : ℕ) : a + b = b + a := by\n  omega"), 1.0, "VALID"),
    (FENCE.format("  omega"), 1.0, "VALID"),  # the proof after the statement
    (FENCE.format("  exact Nat.nonexistent_lemma a b"), 0.0, "INVALID"),
    (FENCE.format("theorem add_comm' (a b : ℕ) : a = a := by\n  rfl"), 0.0, "INVALID"),
    (
        FENCE.format(
            "axiom cheat : False\ntheorem add_comm' (a b : ℕ) : a + b = b + a := cheat.elim"
        ),
        0.0,
        "INVALID",
    ),
    (FENCE.format("  sorry"), 0.0, "SORRY"),
    (FENCE.format("  native_decide"), 0.0, "INVALID"),
    ("I give up.", 0.0, "NO_CODE"),
]


async def test_the_verdict_table_and_the_checks_reported(server):
    core = RewardCore(server=await server())
    details = await core.score([c for c, _r, _s in CASES], [P] * len(CASES))
    assert [(d.reward, d.status) for d in details] == [(r, s) for _c, r, s in CASES]
    valid = details[0]
    assert valid.checks == {
        "policy": "proof",
        "axioms": "PASSED",
        "statement": "PASSED",
        "judge": "NOT_RUN",
    }
    assert valid.pinned and valid.shape == "file" and details[1].shape == "proof"
    assert valid.extraction_rule == "fence" and valid.verifier == "stand-in"
    assert "FORBIDDEN_AXIOM" in details[4].reason


async def test_identical_programs_in_a_group_are_verified_once(scripted):
    core = RewardCore(server=scripted.address)
    group = [CASES[0][0], CASES[0][0].replace("```lean", "```lean4"), CASES[2][0], CASES[0][0]]
    details = await core.score(group, [P] * 4)
    assert scripted.calls == 1 and scripted.snippets == [2]  # one call, two distinct programs
    assert [d.duplicate for d in details] == [False, True, False, True]


async def test_no_statement_is_refused_unless_a_weaker_level_is_asked(server):
    address = await server()
    with pytest.raises(ValueError, match="pin_statement=False"):
        await RewardCore(server=address).score([CASES[0][0]], [None])
    loose = await RewardCore(server=address, pin_statement=False).score([CASES[0][0]], [None])
    assert loose[0].reward == 1.0 and not loose[0].pinned
    assert loose[0].checks["statement"] == "NOT_RUN"


async def test_a_bare_str_is_a_type_error():
    with pytest.raises(TypeError, match="one str"):
        await RewardCore().score("theorem t : True := trivial", [P])


async def test_unreachable_server_is_none(unused_tcp_port):
    core = RewardCore(server=f"127.0.0.1:{unused_tcp_port}", max_retries=1)
    details = await core.score([CASES[0][0], "no code"], [P, P])
    assert details[0].reward is None and details[0].infra_error.startswith("UNAVAILABLE")
    assert details[1].reward == 0.0  # no code needs no server


async def test_overload_after_the_retries_is_none(scripted):
    scripted.abort = grpc.StatusCode.RESOURCE_EXHAUSTED
    details = await RewardCore(server=scripted.address, max_retries=2).score([CASES[0][0]], [P])
    assert details[0].reward is None and "RESOURCE_EXHAUSTED" in details[0].infra_error
    assert scripted.calls == 3


@pytest.mark.parametrize("status", [pb.STATUS_CRASH, pb.STATUS_CANCELLED])
async def test_a_crash_or_cancel_charged_to_the_infrastructure_is_none(scripted, status):
    scripted.status = status
    details = await RewardCore(server=scripted.address).score([CASES[0][0]], [P])
    assert details[0].reward is None and details[0].status == "INFRA"


async def test_a_snippet_refused_unrun_is_none(scripted):
    scripted.status, scripted.retry_after_s = pb.STATUS_REJECTED, 0.5
    details = await RewardCore(server=scripted.address).score([CASES[0][0]], [P])
    assert details[0].reward is None and "refused unrun" in details[0].infra_error


async def test_the_adapter_deadline_is_none(scripted):
    scripted.delay_s = 3.0
    details = await RewardCore(server=scripted.address, deadline_s=0.5).score([CASES[0][0]], [P])
    assert details[0].reward is None and "deadline" in details[0].infra_error.lower()


async def test_a_lean_timeout_is_a_failed_proof_unless_configured(scripted):
    scripted.status = pb.STATUS_TIMEOUT
    assert (await RewardCore(server=scripted.address).score([CASES[0][0]], [P]))[0].reward == 0.0
    loose = RewardCore(server=scripted.address, timeout_is_failure=False)
    assert (await loose.score([CASES[0][0]], [P]))[0].reward is None


async def test_valid_without_the_asked_checks_is_not_a_reward(scripted):
    scripted.status = pb.STATUS_VALID  # the scripted server ran no check at all
    details = await RewardCore(server=scripted.address).score([CASES[0][0]], [P])
    assert details[0].reward == 0.0 and "axioms and statement" in details[0].reason


async def test_a_bad_request_is_raised_not_scored(scripted):
    scripted.abort = grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(Exception) as caught:
        await RewardCore(server=scripted.address).score([CASES[0][0]], [P])
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT


async def test_sync_calls_from_threads_share_the_process_channel(server):
    core = RewardCore(server=await server())
    texts = [c for c, _r, _s in CASES[:3]]
    together = await asyncio.gather(
        *(asyncio.to_thread(core.score_sync, texts, [P] * 3) for _ in range(4))
    )
    assert all([d.reward for d in got] == [1.0, 1.0, 0.0] for got in together)


async def test_a_forked_child_gets_its_own_channel(server):
    """A trainer process that scored, then forked (a worker pool): the child scores on
    a channel of its own, and the parent goes on after the fork."""
    address = await server()
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(pathlib.Path(__file__).with_name("fork_client.py")),
        address,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert json.loads(out.decode().splitlines()[-1]) == [[1.0, 0.0]] * 3
