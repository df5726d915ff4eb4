"""Helpers for the MCP door's tests: an agent is the official `mcp` client (HTTP or
stdio), and `exercise_every_tool` drives all ten tools and checks their answers."""

from __future__ import annotations

import contextlib
import json

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

AND_CODE = "theorem and_t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by sorry"
STEPS_CODE = "theorem steps_t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n  constructor\n  exact hp\n  exact hq"
BAD = "import Mathlib\n\ntheorem b : 1 = 2 := by\n  exact Nat.nonexistent_lemma\n"
READ_ONLY = {
    "lean_check",
    "lean_verify_proof",
    "lean_extract",
    "lean_search",
    "lean_environments",
    "lean_status",
}
ALL_TOOLS = READ_ONLY | {"lean_proof_state", "lean_tactic", "lean_multi_attempt", "lean_release"}


@contextlib.asynccontextmanager
async def http_agent(url: str, token: str | None = None, mode: str = "auto"):
    """One agent on the streamable HTTP door, with its bearer token; `mode` "legacy" speaks
    the initialize handshake with a session id, as hosts on mcp 1.x do."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))
    transport = streamable_http_client(url, http_client=http)
    async with http, Client(transport, mode=mode) as client:
        yield client


async def call(client, name: str, **arguments) -> tuple[bool, dict]:
    """(is_error, structured result) of one tool call; the text content says the same."""
    result = await client.call_tool(name, arguments)
    assert result.structured_content is not None, result
    assert json.loads(result.content[0].text) == result.structured_content
    return bool(result.is_error), result.structured_content


async def ok(client, name: str, **arguments) -> dict:
    is_error, payload = await call(client, name, **arguments)
    assert not is_error, payload
    return payload


async def exercise_every_tool(client) -> None:
    """Every tool, once or more, with answers that could have been otherwise."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert set(listed) == ALL_TOOLS
    for name, tool in listed.items():
        assert tool.annotations is not None and tool.annotations.read_only_hint == (
            name in READ_ONLY
        ), name
        assert tool.output_schema is not None and tool.description, name
    assert listed["lean_release"].annotations.destructive_hint is True

    checked = await ok(client, "lean_check", code="theorem t1 : 1 + 1 = 2 := rfl")
    assert checked["status"] == "VALID" and checked["checks"]["axioms"] == "PASSED"
    assert (
        checked["verifier"]["kind"] == "stand-in" and "not from Lean" in checked["verifier"]["note"]
    )
    wrong = await ok(client, "lean_check", code=BAD)
    assert wrong["status"] == "INVALID" and wrong["messages"][0]["severity"] == "error"
    assert wrong["messages"][0]["start"] == {"line": 4, "column": 8}

    proved = await ok(
        client,
        "lean_verify_proof",
        statement="theorem t3 : 2 + 2 = 4 := sorry",
        proof="theorem t3 : 2 + 2 = 4 := rfl",
    )
    assert proved["proved"] is True and proved["checks"]["statement"] == "PASSED"
    moved = await ok(
        client,
        "lean_verify_proof",
        statement="theorem t3 : 2 + 2 = 4 := sorry",
        proof="theorem t3 : 2 + 2 = 2 + 2 := rfl",
    )
    assert moved["proved"] is False and moved["checks"]["statement"] == "FAILED"

    started = await ok(client, "lean_proof_state", code_with_sorry=AND_CODE)
    (state,) = started["states"]
    assert "⊢ p ∧ q" in state["goals"][0] and started["proof_id"]
    split = await ok(client, "lean_tactic", state_id=state["state_id"], tactic="constructor")
    assert split["status"] == "INCOMPLETE" and len(split["goals"]) == 2
    tried = await ok(
        client,
        "lean_multi_attempt",
        state_id=state["state_id"],
        tactics=["exact ⟨hp, hq⟩", "exact Nat.nonexistent_lemma", "constructor"],
    )
    assert [a["status"] for a in tried["attempts"]] == ["COMPLETED", "ERROR", "INCOMPLETE"]
    assert tried["attempts"][0]["verification"]["status"] == "VALID"

    extracted = await ok(client, "lean_extract", code=STEPS_CODE)
    (declaration,) = extracted["declarations"]
    assert [s["text"] for s in declaration["steps"]] == ["constructor", "exact hp", "exact hq"]
    assert declaration["steps"][0]["goals_after"] and not declaration["steps"][-1]["goals_after"]

    named = await ok(client, "lean_search", query="Nat.add_comm", k=3)
    assert named["results"][0] == {"name": "Nat.add_comm", "system": "A (name)", "exact": True}
    worded = await ok(client, "lean_search", query="sum of four squares", k=5)
    assert any("SumFourSquares" in r.get("module", "") for r in worded["results"])

    environments = await ok(client, "lean_environments")
    assert environments["environments"][0]["profile"] == ""
    assert environments["environments"][0]["toolchain"]["kind"] == "stand-in"

    status = await ok(client, "lean_status")
    assert status["workers"] >= 1 and status["you"]["proof_states"] >= 2

    released = await ok(client, "lean_release", state_ids=[state["state_id"], "s-none"])
    assert released == {"released": 1, "not_found": ["s-none"]}
    is_error, gone = await call(client, "lean_tactic", state_id=state["state_id"], tactic="simp")
    assert is_error and gone["error"]["code"] == "NOT_FOUND"
    assert gone["error"]["retry"]["retryable"] is False
