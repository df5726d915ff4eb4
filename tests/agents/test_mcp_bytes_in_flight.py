"""The MCP door charges request bodies to the server's one byte budget (issue 44 item 1,
agents/intake.py): over real sockets, a body past the peer's budget is refused with 503
and Retry-After that the client reads, every charge is given back, and agents whose
requests fit are served as before."""

from __future__ import annotations

import json

import httpx2

from agents_support import http_agent, ok

MB = 2**20


async def test_a_body_over_the_peers_budget_is_refused_readably(served):
    door = await served(memory__in_flight_mb_per_peer=2, memory__discard_mb=16)
    budget = door.app.budget
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "x" * (3 * MB)})
    async with httpx2.AsyncClient(timeout=60.0) as http:
        answer = await http.post(
            door.url,
            content=big.encode(),
            headers={"content-type": "application/json", "accept": "application/json"},
        )
    assert answer.status_code == 503, answer.text
    assert int(answer.headers["retry-after"]) >= 1
    assert "memory.in_flight_mb_per_peer" in answer.json()["error"]
    assert budget.refused["peer"] >= 1
    assert budget.held_total == 0 and sum(budget.held.values()) == 0


async def test_a_chunked_body_is_charged_as_it_arrives(served):
    door = await served(memory__in_flight_mb_per_peer=2, memory__discard_mb=16)

    async def chunks():
        for _ in range(6):
            yield b"x" * MB

    async with httpx2.AsyncClient(timeout=60.0) as http:
        answer = await http.post(
            door.url, content=chunks(), headers={"content-type": "application/json"}
        )
    assert answer.status_code == 503, answer.text
    assert door.app.budget.held_total == 0


async def test_agents_that_fit_are_served_and_every_charge_is_given_back(served):
    door = await served(memory__in_flight_mb_per_peer=2)
    async with http_agent(door.url) as agent:
        checked = await ok(agent, "lean_check", code="theorem t : 1 + 1 = 2 := rfl")
        assert checked["status"] == "VALID"
        await ok(agent, "lean_status")
    assert door.app.budget.held_total == 0
