"""OpenRLHF 0.11.2's remote reward (issue 38 item 4 and "Done when").

OpenRLHF does not install here (deepspeed, flash-attn, ray). What the tests do
instead, read from the released 0.11.2 wheel's `openrlhf/utils/agent.py`
(SingleTurnAgentExecutor): over HTTP, `_fetch_rewards_via_http`'s exact request
(aiohttp, `ClientTimeout(total=180)`, `session.post(url, json={"query", "prompts",
"labels"})`, `raise_for_status()`, 5 tries one second apart, then RuntimeError), one
query per request, round-robin over the URLs (`itertools.cycle`); and the file form
loaded as its `__init__` does (`spec_from_file_location("reward_func", path)`) and
called in a thread with one query. `query` is the tokenizer's decode of prompt plus
response with special tokens, so it carries the chat template's tokens.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools

import aiohttp
import pytest

import leanrpc.client.rewards.openrlhf as file_form
from leanrpc.app import create_server
from leanrpc.gateway import start_gateway
from testkit import loopback_config

TOKEN = "reward-token"
STATEMENT = "theorem add_comm' (a b : ℕ) : a + b = b + a := by\n"
# The prompt shows the statement in a fenced block too: only the response's counts.
PROMPT = (
    "<|im_start|>system\nYou are a Lean 4 prover.<|im_end|>\n<|im_start|>user\n"
    f"Complete the proof:\n```lean4\n{STATEMENT}  sorry\n```<|im_end|>\n<|im_start|>assistant\n"
)
RESPONSES = {
    "correct": (
        "<think>omega should do it</think>\n```lean4\n" + STATEMENT + "  omega\n```<|im_end|>",
        1.0,
    ),
    "wrong": ("```lean4\n" + STATEMENT + "  exact Nat.nonexistent_lemma a b\n```<|im_end|>", 0.0),
    "no code": ("I do not know.<|im_end|>", 0.0),
}


async def post_like_openrlhf(session_urls, query, prompt, label, tries: int = 5):
    """SingleTurnAgentExecutor._fetch_rewards_via_http for one query."""
    url = next(session_urls)
    payload = {"query": [query], "prompts": [prompt], "labels": [label]}
    timeout = aiohttp.ClientTimeout(total=180)
    for _ in range(tries):
        try:
            async with aiohttp.ClientSession(timeout=timeout) as session:
                async with session.post(
                    url, json=payload, headers={"Authorization": f"Bearer {TOKEN}"}
                ) as response:
                    response.raise_for_status()
                    return await response.json()
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(1)
    raise RuntimeError(
        f"Request error for {tries} times, returning None. Please check the API server."
    )


@pytest.fixture
async def gateways():
    """A leanrpc server on the stand-in with two REST gateways (a URL list), tokens on."""
    config = loopback_config(workers=2, server__auth_tokens=[TOKEN])
    app = await create_server(config)
    doors = [await start_gateway(app.verify, config, port=0) for _ in range(2)]
    yield app, [f"http://127.0.0.1:{g.port}/reward" for g in doors]
    for door in doors:
        await door.stop(2.0)
    await app.stop(2.0)


async def test_queries_with_chat_tokens_are_scored_over_two_gateways(gateways):
    _app, urls = gateways
    cycle = itertools.cycle(urls)
    got = {}
    for name, (response, expected) in RESPONSES.items():
        answer = await post_like_openrlhf(cycle, PROMPT + response, PROMPT, STATEMENT)
        assert answer["rewards"] == answer["scores"] == [expected], name
        assert all(len(v) == 1 and isinstance(v[0], float) for v in answer["extra_logs"].values())
        got[name] = answer
    assert got["correct"]["extra_logs"]["lean_valid"] == [1.0]
    assert got["correct"]["details"][0]["extraction_rule"] == "fence"
    assert got["no code"]["extra_logs"]["lean_no_code"] == [1.0]
    # without the prompt, the query is cut after the last assistant marker
    cycle = itertools.cycle(urls)
    bare = await post_like_openrlhf(cycle, PROMPT + RESPONSES["correct"][0], None, STATEMENT)
    assert bare["rewards"] == [1.0]


async def test_auth_limits_and_bad_bodies(gateways):
    _app, urls = gateways
    body = {"query": ["x"], "prompts": ["x"], "labels": [STATEMENT]}
    async with aiohttp.ClientSession() as session:
        async with session.post(urls[0], json=body) as response:
            assert response.status == 401
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for bad in ({"query": "x"}, {"query": ["x"]}, {"query": ["x"], "labels": []}):
            async with session.post(urls[0], json=bad, headers=auth) as response:
                assert response.status == 422, bad
                assert "detail" in await response.json()


async def test_an_infrastructure_failure_is_no_reward_after_openrlhf_s_retries(gateways):
    app, urls = gateways
    await app.pool.close(0)  # no worker can run: the server stops serving
    with pytest.raises(RuntimeError, match="Request error for 2 times"):
        await post_like_openrlhf(
            itertools.cycle(urls), PROMPT + RESPONSES["correct"][0], PROMPT, STATEMENT, tries=2
        )


async def test_the_file_form_as_openrlhf_loads_and_calls_it(server, monkeypatch):
    monkeypatch.setenv("LEANRPC_SERVER", await server())
    spec = importlib.util.spec_from_file_location("reward_func", file_form.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for response, expected in RESPONSES.values():
        got = await asyncio.to_thread(
            module.reward_func, [PROMPT + response], [PROMPT], [STATEMENT]
        )
        assert got["rewards"] == [expected]
        assert set(got["extra_logs"]) >= {"lean_valid", "lean_time_s", "lean_pinned"}


async def test_the_file_form_raises_on_an_infrastructure_failure(unused_tcp_port, monkeypatch):
    monkeypatch.setenv("LEANRPC_SERVER", f"127.0.0.1:{unused_tcp_port}")
    spec = importlib.util.spec_from_file_location("reward_func", file_form.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module._core = module._pkg.RewardCore(max_retries=0)
    with pytest.raises(RuntimeError, match="no reward"):
        await asyncio.to_thread(
            module.reward_func, [PROMPT + RESPONSES["correct"][0]], [PROMPT], [STATEMENT]
        )
