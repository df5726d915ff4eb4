"""Twenty agents at once on one 2-worker server: every call is answered, and no REPL
process is started per agent (the REPL processes are counted all along)."""

from __future__ import annotations

import asyncio

import psutil

from agents_support import AND_CODE, http_agent, ok
from leanrpc.worker.worker import WorkerState
from testkit import wait_until


def _repls(app) -> set[int]:
    """Live REPL processes of the server: its workers' processes and their children."""
    found = set()
    for worker in app.pool.workers:
        if not worker.pid:
            continue
        try:
            root = psutil.Process(worker.pid)
            found.add(root.pid)
            found.update(p.pid for p in root.children(recursive=True))
        except psutil.NoSuchProcess:
            pass
    return found


async def test_twenty_agents_on_two_workers(served):
    tokens = [f"agent-{n}" for n in range(20)]
    door = await served(workers=2, tokens=tokens, pool__min_warm=2)
    await wait_until(
        lambda: sum(w.state is WorkerState.IDLE for w in door.app.pool.workers) == 2,
        120,
        "both workers warm",
    )
    before = _repls(door.app)
    assert len(before) >= 2
    seen: set[int] = set()
    most = 0

    async def watch():
        nonlocal most
        while True:
            now = _repls(door.app)
            seen.update(now)
            most = max(most, len(now))
            await asyncio.sleep(0.05)

    async def agent(token: str) -> list[str]:
        answered = []
        async with http_agent(door.url, token) as client:
            checked = await ok(
                client, "lean_check", code=f"theorem {token.replace('-', '_')} : True := trivial"
            )
            answered.append(checked["status"])
            started = await ok(client, "lean_proof_state", code_with_sorry=AND_CODE)
            state = started["states"][0]["state_id"]
            moved = await ok(client, "lean_tactic", state_id=state, tactic="exact ⟨hp, hq⟩")
            answered.append(moved["status"])
            status = await ok(client, "lean_status")
            answered.append(str(status["you"]["proof_states"]))
            released = await ok(
                client, "lean_release", proof_ids=[started["proof_id"]], state_ids=[]
            )
            answered.append(str(released["released"]))
        return answered

    watcher = asyncio.ensure_future(watch())
    try:
        results = await asyncio.gather(*(agent(t) for t in tokens))
    finally:
        watcher.cancel()
    assert results == [["VALID", "COMPLETED", "2", "2"]] * 20
    assert door.app.pool.size == 2
    # The same processes served all twenty agents: none was started for an agent.
    assert seen == before and most == len(before), (sorted(before), sorted(seen))
