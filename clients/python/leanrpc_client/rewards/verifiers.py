"""PrimeIntellect verifiers' shapes: a rubric reward function, and a v1 task reward.

Owns two adapters over the one core (per-sample calls batched by batching.py):

* `lean_rubric_reward(prompt, completion, answer, state, info, **kw) -> float`: the
  rubric function shape (`vf.Rubric(funcs=[lean_rubric_reward])`, called by keyword,
  sync or async; the issue's "verifiers 0.4" contract). The statement is `answer`,
  or `info["formal_statement"]` (its header `info["header"]`). An infrastructure
  failure is NaN, never 0, with the details in `state["leanrpc"]`.
* `lean_trace_reward(task, trace) -> float`: verifiers 0.4.0 as released (`verifiers.v1`):
  a `@vf.reward` method of a Task receives `task` (its data) and `trace` by name
  (`v1/utils/decorators.invoke`); the completion is `trace.last_reply`, the statement
  the task data's `formal_statement` (or `answer`). An infrastructure failure raises
  (v1 records a TaskError for the trace instead of a reward).

The server is $LEANRPC_SERVER (token $LEANRPC_TOKEN); `configure(**settings)` sets
the core's settings for both. May import: .core, .problem, .batching, .trl (completion text).
"""

from __future__ import annotations

import math
from typing import Any

from .batching import score_one
from .core import InfraFailure, RewardCore
from .problem import Problem
from .trl import completion_text

_core = [RewardCore()]


def configure(**settings) -> RewardCore:
    """Replaces the core both functions use (server, token, deadline_s, fence, …)."""
    _core[0] = RewardCore(**settings)
    return _core[0]


def _problem(answer: Any, info: Any) -> Problem | None:
    info = info if isinstance(info, dict) else {}
    statement = info.get("formal_statement") or answer or ""
    return Problem(str(statement), str(info.get("header") or "")) if statement else None


async def lean_rubric_reward(
    prompt=None, completion=None, answer="", state=None, info=None, **kwargs
) -> float:
    """1.0 / 0.0, NaN on an infrastructure failure (details in state["leanrpc"])."""
    detail = await score_one(_core[0], completion_text(completion or ""), _problem(answer, info))
    if isinstance(state, dict):
        state["leanrpc"] = detail.as_log()
    return math.nan if detail.reward is None else detail.reward


async def lean_trace_reward(task, trace) -> float:
    """verifiers.v1: `@vf.reward async def lean(self, task, trace): return await lean_trace_reward(task, trace)`."""
    statement = getattr(task, "formal_statement", None) or getattr(task, "answer", None)
    header = getattr(task, "header", None) or ""
    problem = Problem(str(statement), str(header)) if statement else None
    detail = await score_one(_core[0], trace.last_reply, problem)
    if detail.reward is None:
        raise InfraFailure(detail.infra_error, [detail])
    return detail.reward
