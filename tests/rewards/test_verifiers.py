"""PrimeIntellect verifiers: the rubric reward function scores a small set, called
the way a rubric calls its functions (by keyword, all of a group gathered), and the
verifiers 0.4.0 (`verifiers.v1`) task reward, called as its `invoke` does (by
parameter name from {"task": the task's data, "trace": the trace}).

verifiers 0.4.0 pulls openai, anthropic, mcp 2.0 and more; it is not installed here,
so `task` and `trace` are stand-ins with the attributes the adapter reads (the
data model's fields, `Trace.last_reply`), as read from the 0.4.0 wheel."""

from __future__ import annotations

import asyncio
import dataclasses
import math

import pytest

from leanrpc.client.rewards import verifiers as vf_reward
from leanrpc.rewards import InfraFailure

STATEMENT = "theorem add_comm' (a b : ℕ) : a + b = b + a := by\n"
SET = [  # (completion as chat messages, answer, expected reward)
    ([{"role": "assistant", "content": "```lean4\n" + STATEMENT + "  omega\n```"}], STATEMENT, 1.0),
    (
        [{"role": "assistant", "content": "```lean\n  exact Nat.nonexistent_lemma a b\n```"}],
        STATEMENT,
        0.0,
    ),
    (
        [{"role": "assistant", "content": "```lean\ntheorem add_comm' : True := trivial\n```"}],
        STATEMENT,
        0.0,
    ),
    ("```lean\n  omega\n```", STATEMENT, 1.0),  # a plain-text completion
    ([{"role": "assistant", "content": "Maybe induction?"}], STATEMENT, 0.0),
]


async def test_the_rubric_function_scores_a_small_set(server):
    vf_reward.configure(server=await server())
    states = [{} for _ in SET]
    got = await asyncio.gather(
        *(
            vf_reward.lean_rubric_reward(
                prompt=[{"role": "user", "content": "Prove it."}],
                completion=completion,
                answer=answer,
                state=state,
                info={},
                task="lean",
            )
            for (completion, answer, _), state in zip(SET, states)
        )
    )
    assert got == [expected for *_, expected in SET]
    assert states[0]["leanrpc"]["status"] == "VALID"
    assert states[0]["leanrpc"]["checks"]["statement"] == "PASSED"
    assert states[4]["leanrpc"]["status"] == "NO_CODE"


async def test_the_statement_may_come_from_info(server):
    vf_reward.configure(server=await server())
    info = {"formal_statement": STATEMENT, "header": "import Mathlib"}
    got = await vf_reward.lean_rubric_reward(completion=SET[0][0], answer="", info=info)
    assert got == 1.0


async def test_an_infrastructure_failure_is_nan_in_a_rubric(unused_tcp_port):
    vf_reward.configure(server=f"127.0.0.1:{unused_tcp_port}", max_retries=0)
    state = {}
    got = await vf_reward.lean_rubric_reward(completion=SET[0][0], answer=STATEMENT, state=state)
    assert math.isnan(got) and state["leanrpc"]["infra_error"].startswith("UNAVAILABLE")


@dataclasses.dataclass
class Data:  # a TaskData subclass's fields
    formal_statement: str
    header: str = "import Mathlib"


@dataclasses.dataclass
class Trace:
    last_reply: str


async def test_the_v1_task_reward(server, unused_tcp_port):
    vf_reward.configure(server=await server())
    got = await vf_reward.lean_trace_reward(
        task=Data(STATEMENT), trace=Trace("```lean\n" + STATEMENT + "  omega\n```")
    )
    assert got == 1.0
    vf_reward.configure(server=f"127.0.0.1:{unused_tcp_port}", max_retries=0)
    with pytest.raises(InfraFailure):
        await vf_reward.lean_trace_reward(
            task=Data(STATEMENT), trace=Trace("```lean\n  omega\n```")
        )
