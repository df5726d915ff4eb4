"""Every tool over streamable HTTP with the official `mcp` client, against a real
server on the stand-in; bearer tokens, retry hints and the output budget."""

from __future__ import annotations

import asyncio

import httpx2
import pytest

from agents_support import AND_CODE, call, exercise_every_tool, http_agent, ok
from testkit import free_port


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_every_tool_over_streamable_http(served, mode):
    door = await served()
    async with http_agent(door.url, mode=mode) as agent:
        await exercise_every_tool(agent)
        if mode == "legacy":
            assert agent.session.protocol_version < "2026"  # the initialize handshake


async def test_a_token_is_required_when_the_server_has_tokens(served):
    door = await served(tokens=["tok-a"])
    async with httpx2.AsyncClient() as http:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            answer = await http.post(door.url, json={}, headers=headers)
            assert answer.status_code == 401 and "Bearer" in answer.headers["www-authenticate"]
    async with http_agent(door.url, "tok-a") as agent:
        status = await ok(agent, "lean_status")
    assert status["you"]["identity"].startswith("token:")


async def test_errors_say_whether_and_when_to_retry(served):
    door = await served(server__max_concurrent_per_client=1)
    async with http_agent(door.url) as agent:
        is_error, bad = await call(agent, "lean_check", code="   ")
        assert is_error and bad["error"]["code"] == "INVALID_ARGUMENT"
        assert bad["error"]["retry"]["retryable"] is False
        started = await ok(agent, "lean_proof_state", code_with_sorry=AND_CODE)
        state = started["states"][0]["state_id"]
        slow = [f"skip\n--@standin: burn=0.4\nexact ⟨hp, hq⟩ -- {k}" for k in range(2)]
        busy = asyncio.ensure_future(
            call(agent, "lean_multi_attempt", state_id=state, tactics=slow)
        )
        await asyncio.sleep(0)
        while door.door.tools.limiter.in_flight.get("peer:ipv4:127.0.0.1", 0) == 0:
            await asyncio.sleep(0.01)
        is_error, full = await call(agent, "lean_check", code="theorem t : True := trivial")
        assert is_error and full["error"]["reason"] == "OVERLOADED"
        assert full["error"]["retry"]["retryable"] is True
        assert full["error"]["retry"]["retry_after_s"] > 0
        assert "server.max_concurrent_per_client" in full["error"]["message"]
        is_error, done = await busy
        assert not is_error and len(done["attempts"]) == 2


async def test_long_output_is_cut_with_a_note(served):
    door = await served(mcp__max_output_chars=2000, mcp__max_field_chars=64)
    names = " ".join(f"h{k}_{'x' * 40}" for k in range(40))
    code = f"theorem long_t (p : Prop) ({names} : p) : p := by sorry"
    async with http_agent(door.url) as agent:
        started = await ok(agent, "lean_proof_state", code_with_sorry=code)
    goal = started["states"][0]["goals"][0]
    assert len(goal) < 120 and "characters cut]" in goal
    note = started["truncated"]
    assert note["chars_cut"] > 1000 and "max_output_chars" in note["note"]
    assert started["states"][0]["state_id"].startswith("s-")  # the handle is whole


@pytest.mark.parametrize("k", [0, 51])
async def test_search_k_is_bounded(served, k):
    door = await served(workers=1)
    async with http_agent(door.url) as agent:
        is_error, refused = await call(agent, "lean_search", query="prime", k=k)
    assert is_error and refused["error"]["field"] == "k"
    assert (
        refused["error"]["code"] == "INVALID_ARGUMENT"
        and "max_search_k" in refused["error"]["message"]
    )


async def test_allowed_axioms_only_narrow_the_servers_list(served):
    door = await served(workers=1)
    statement = "theorem comm_t (a b : Nat) : a + b = b + a := sorry"
    proof = "theorem comm_t (a b : Nat) : a + b = b + a := by\n  omega"
    async with http_agent(door.url) as agent:
        full = await ok(agent, "lean_verify_proof", statement=statement, proof=proof)
        narrow = await ok(
            agent, "lean_verify_proof", statement=statement, proof=proof, allowed_axioms=["propext"]
        )
        is_error, wider = await call(
            agent, "lean_verify_proof", statement=statement, proof=proof, allowed_axioms=["sorryAx"]
        )
    assert full["proved"] is True and "Classical.choice" in full["axioms"]
    assert narrow["proved"] is False and narrow["checks"]["axioms"] == "FAILED"
    assert narrow["allowed_axioms"] == ["propext"]
    assert is_error and wider["error"]["field"] == "allowed_axioms"
    assert "sorryAx" in wider["error"]["message"]


async def test_tool_calls_count_in_the_metrics_with_door_mcp(served):
    port = free_port()
    door = await served(workers=1, server__metrics_port=port)
    async with http_agent(door.url) as agent:
        await ok(agent, "lean_check", code="theorem m1 : True := trivial")
        await call(agent, "lean_tactic", state_id="s-none", tactic="simp")
    async with httpx2.AsyncClient() as http:
        text = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    assert 'leanrpc_rpcs_total{code="OK",door="mcp",method="lean_check"} 1.0' in text
    assert 'leanrpc_rpcs_total{code="NOT_FOUND",door="mcp",method="lean_tactic"} 1.0' in text
    assert 'leanrpc_snippets_total{door="mcp",status="VALID"} 1.0' in text
