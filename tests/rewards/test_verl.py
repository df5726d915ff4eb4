"""verl 0.9.1 loads `compute_score` from the documented path with its own loader and
scores a batch the way its reward managers call it (issue 38, "Done when").

verl itself does not install here (ray[default], transformers < 5.11). What runs:
verl's own `verl/utils/import_utils.py` (stdlib only), taken from the released
0.9.1 wheel, whose `load_extern_object(module_path, object_name)` is what
`verl.trainer.ppo.reward.get_custom_reward_fn` calls for
`reward.custom_reward_function.path` / `.name`. The calls follow
`verl/experimental/reward_loop/reward_manager/naive.py` of the same wheel: keyword
arguments `data_source, solution_str, ground_truth, extra_info` (plus
`reward_kwargs`, merged by `get_custom_reward_fn`'s `_call_with_kwargs`), a sync
function run in the loop's executor and an `async def` awaited, and a dict result
read as `result["score"]` with every key kept as extra info.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import inspect
import math

import leanrpc.client.rewards.verl as documented

STATEMENT = "theorem add_comm' (a b : ℕ) : a + b = b + a := by\n"
SOLUTIONS = [
    "```lean4\ntheorem add_comm' (a b : ℕ) : a + b = b + a := by\n  omega\n```",
    "```lean\n  exact Nat.nonexistent_lemma a b\n```",
    "```lean\ntheorem add_comm' (a b : ℕ) : a = a := by\n  rfl\n```",
    "```lean\naxiom cheat : False\ntheorem add_comm' (a b : ℕ) : a + b = b + a := cheat.elim\n```",
    "no idea",
    "```lean4\ntheorem add_comm' (a b : ℕ) : a + b = b + a := by\n  omega\n```",
]
EXPECTED = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]


def verl_loader(trainer_source):
    path = trainer_source("verl", "0.9.1", "verl/utils/import_utils.py")
    spec = importlib.util.spec_from_file_location("verl_import_utils", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.load_extern_object


def call_with_kwargs(raw_fn, extra_kwargs, *args, **kwargs):  # verl's _call_with_kwargs
    return raw_fn(*args, **{**kwargs, **extra_kwargs})


async def run_like_verl(fn, solutions):
    """naive.py's run_single for each sample, all at once (the reward loop gathers them)."""
    loop = asyncio.get_running_loop()

    async def one(solution):
        kwargs = dict(
            data_source="minif2f",
            solution_str=solution,
            ground_truth=STATEMENT,
            extra_info={"header": "import Mathlib", "num_turns": None},
        )
        if inspect.iscoroutinefunction(fn):
            result = await fn(**kwargs)
        else:
            result = await loop.run_in_executor(None, lambda: fn(**kwargs))
        assert isinstance(result, dict)
        return result["score"], result

    return await asyncio.gather(*(one(s) for s in solutions))


async def test_verl_loads_compute_score_from_the_documented_path_and_scores_a_batch(
    server, trainer_source, monkeypatch
):
    monkeypatch.setenv("LEANRPC_SERVER", await server())
    load_extern_object = verl_loader(trainer_source)
    raw = load_extern_object(module_path=documented.__file__, object_name="compute_score")
    fn = functools.partial(call_with_kwargs, raw, {"deadline_s": 60})
    got = await run_like_verl(fn, SOLUTIONS)
    assert [score for score, _ in got] == EXPECTED
    keys = {frozenset(result) for _, result in got}
    assert len(keys) == 1  # verl stacks each extra key across the batch
    first = got[0][1]
    assert first["lean_status"] == "VALID" and first["lean_extraction"].startswith("fence@")
    assert "statement=PASSED" in first["lean_checks"] and "axioms=PASSED" in first["lean_checks"]
    assert got[4][1]["lean_status"] == "NO_CODE"


async def test_the_async_form_is_awaited_and_the_server_package_path_works(
    server, trainer_source, monkeypatch
):
    monkeypatch.setenv("LEANRPC_SERVER", await server())
    import leanrpc.rewards.verl as server_path

    load_extern_object = verl_loader(trainer_source)
    raw = load_extern_object(module_path=server_path.__file__, object_name="compute_score_async")
    assert inspect.iscoroutinefunction(raw)
    got = await run_like_verl(raw, SOLUTIONS)
    assert [score for score, _ in got] == EXPECTED


async def test_an_unreachable_server_is_nan_with_the_reason(unused_tcp_port, monkeypatch):
    monkeypatch.setenv("LEANRPC_SERVER", f"127.0.0.1:{unused_tcp_port}")
    got = await asyncio.to_thread(
        documented.compute_score, "minif2f", SOLUTIONS[0], STATEMENT, {}, max_retries=0
    )
    assert math.isnan(got["score"]) and got["lean_infra_error"].startswith("UNAVAILABLE")


async def test_the_batch_form_and_the_composite_reward(server, monkeypatch):
    monkeypatch.setenv("LEANRPC_SERVER", await server())
    got = await asyncio.to_thread(
        documented.compute_score_batch, ["minif2f"] * 6, SOLUTIONS, [STATEMENT] * 6, None
    )
    assert [r["score"] for r in got] == EXPECTED
    reference = "theorem ref (a b : ℕ) : a + b = b + a := by sorry"
    formal = await asyncio.to_thread(
        documented.compute_score,
        "formalization",
        "```lean\ntheorem x (a b : ℕ) : a + b = b + a := by sorry\n```",
        reference,
        {},
        kind="formalization",
    )
    assert formal["score"] == 1.0 and formal["lean_status"] == "PASSED"


async def test_per_sample_calls_go_to_the_server_in_one_batch(scripted, monkeypatch):
    monkeypatch.setenv("LEANRPC_SERVER", scripted.address)
    got = await run_like_verl(documented.compute_score, SOLUTIONS)
    assert len(got) == 6
    assert scripted.calls < 5  # per-sample calls gathered (batching.py), not one call each
    assert sum(scripted.snippets) <= 5  # at most the distinct programs with code


def test_an_unknown_reward_kwarg_is_named():
    import pytest

    with pytest.raises(TypeError, match="unknown reward_kwargs"):
        documented.compute_score("x", "y", STATEMENT, {}, severs="typo")
