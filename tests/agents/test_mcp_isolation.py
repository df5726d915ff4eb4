"""Two agents, two tokens: B cannot use, see or release A's states ("not found"),
and while B floods the pool with lean_multi_attempt, A's lean_check is answered
within a bounded wait (fair admission by identity)."""

from __future__ import annotations

import asyncio
import time

from agents_support import AND_CODE, call, http_agent, ok


async def test_b_cannot_use_see_or_release_a_states(served):
    door = await served(tokens=["tok-a", "tok-b"])
    async with http_agent(door.url, "tok-a") as a, http_agent(door.url, "tok-b") as b:
        started = await ok(a, "lean_proof_state", code_with_sorry=AND_CODE)
        state = started["states"][0]["state_id"]
        for name, args in (
            ("lean_tactic", {"state_id": state, "tactic": "constructor"}),
            ("lean_multi_attempt", {"state_id": state, "tactics": ["constructor"]}),
        ):
            is_error, refused = await call(b, name, **args)
            assert is_error and refused["error"]["code"] == "NOT_FOUND", (name, refused)
            assert state in refused["error"]["message"]
        released = await ok(b, "lean_release", state_ids=[state], proof_ids=[started["proof_id"]])
        assert released == {"released": 0, "not_found": [state, started["proof_id"]]}
        seen_by_b = await ok(b, "lean_status")
        assert (
            seen_by_b["you"]["proof_states"] == 0
            and seen_by_b["you"]["identity"] != ((await ok(a, "lean_status"))["you"]["identity"])
        )
        # A's state survived all of that, and is A's to use and release.
        moved = await ok(a, "lean_tactic", state_id=state, tactic="constructor")
        assert moved["status"] == "INCOMPLETE"
        assert (await ok(a, "lean_release", state_ids=[state]))["released"] == 1


COSTLY = "skip\n--@standin: burn=0.3\nconstructor -- {k}"


async def test_a_is_answered_while_b_floods_multi_attempt(served):
    door = await served(tokens=["tok-a", "tok-b"])
    async with http_agent(door.url, "tok-a") as a, http_agent(door.url, "tok-b") as b:
        started = await ok(b, "lean_proof_state", code_with_sorry=AND_CODE)
        state = started["states"][0]["state_id"]
        flood = [
            asyncio.ensure_future(
                call(
                    b,
                    "lean_multi_attempt",
                    state_id=state,
                    tactics=[COSTLY.format(k=f"{n}-{k}") for k in range(8)],
                )
            )
            for n in range(4)
        ]  # 32 jobs of 0.3 s CPU on 2 workers
        everything = asyncio.ensure_future(asyncio.gather(*flood))
        await asyncio.sleep(0.5)
        waits = []
        for n in range(3):
            sent = time.monotonic()
            checked = await ok(a, "lean_check", code=f"theorem fair{n} : True := trivial")
            waits.append(time.monotonic() - sent)
            assert checked["status"] == "VALID"
        assert not everything.done(), "the flood ended before A was answered: no contention shown"
        floods = await everything
    # A waited for at most the running jobs, never behind B's queue of 32.
    assert max(waits) < 5.0, waits
    for is_error, answer in floods:
        assert not is_error and len(answer["attempts"]) == 8
        assert all(at["status"] == "INCOMPLETE" for at in answer["attempts"]), answer


async def test_a_session_id_is_no_identity(served):
    """Legacy MCP sessions have ids; B sending on A's session is still B (identity per request)."""
    import httpx2

    door = await served(tokens=["tok-a", "tok-b"])
    accept = {"Accept": "application/json, text/event-stream"}

    async def rpc(http, token, session, method, params, id_=1):
        headers = {**accept, "Authorization": f"Bearer {token}"}
        if session:
            headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-06-18"}
        body = {"jsonrpc": "2.0", "method": method, "params": params}
        if id_ is not None:
            body["id"] = id_
        return await http.post(door.url, json=body, headers=headers)

    async with httpx2.AsyncClient(timeout=60) as http:
        hello = await rpc(
            http,
            "tok-a",
            None,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "a", "version": "1"},
            },
        )
        session = hello.headers["mcp-session-id"]
        await rpc(http, "tok-a", session, "notifications/initialized", {}, id_=None)
        started = await rpc(
            http,
            "tok-a",
            session,
            "tools/call",
            {"name": "lean_proof_state", "arguments": {"code_with_sorry": AND_CODE}},
            id_=2,
        )
        state = started.json()["result"]["structuredContent"]["states"][0]["state_id"]
        stolen = await rpc(
            http,
            "tok-b",
            session,
            "tools/call",
            {"name": "lean_release", "arguments": {"state_ids": [state]}},
            id_=3,
        )
        assert stolen.json()["result"]["structuredContent"] == {
            "released": 0,
            "not_found": [state],
        }
        mine = await rpc(
            http,
            "tok-a",
            session,
            "tools/call",
            {"name": "lean_release", "arguments": {"state_ids": [state]}},
            id_=4,
        )
        assert mine.json()["result"]["structuredContent"]["released"] == 1
