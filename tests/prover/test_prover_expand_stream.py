"""Expand runs on the same stream machinery as VerifyStream (edge/streaming.py):
at most server.max_stream_in_flight pairs in flight per stream, and every
accepted pair answered exactly once, also when the server shuts down. A real
gRPC server with stand-in workers; the Prover's `expand` (which runs a pair
its door resolved) is wrapped so a test holds chosen pairs (the held ones
never reach a worker)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from prover_support import AND_STATEMENT
from testkit import stop_app, wait_until
from verify_support import small_config

pytestmark = pytest.mark.timeout(120)

LIMIT = 4
HOLD = "hold_me"  # a tactic the wrapper keeps waiting (until released, or forever)


def _hold(app, gate: asyncio.Event) -> dict[str, int]:
    """Wraps app.prover.expand: pairs with tactic HOLD wait for `gate`;
    returns live counters (running now, most at once, calls)."""
    real = app.prover.expand
    seen = {"running": 0, "most": 0, "calls": 0}

    async def expand(request):
        seen["calls"] += 1
        seen["running"] += 1
        seen["most"] = max(seen["most"], seen["running"])
        try:
            if request.tactics == (HOLD,):
                await gate.wait()
                request = dataclasses.replace(request, tactics=("constructor",))
            return await real(request)
        finally:
            seen["running"] -= 1

    app.prover.expand = expand
    return seen


async def test_expand_keeps_at_most_max_stream_in_flight_pairs_running():
    config = small_config(1)
    config.server.max_stream_in_flight = LIMIT
    app = await create_server(config)
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        gate = asyncio.Event()
        seen = _hold(app, gate)
        results = []

        async def read_all():
            # One request per pair (not one request of 20 tactics): the cap counts requests.
            async for result in client.expand([(root, HOLD)] * 20, batch=False):
                results.append(result)

        reading = asyncio.ensure_future(read_all())
        await wait_until(lambda: seen["running"] == LIMIT, 20, f"{LIMIT} held pairs in flight")
        await asyncio.sleep(0.5)  # a reader without a cap would start all 20 meanwhile
        assert seen["calls"] == LIMIT and not results
        gate.set()
        await asyncio.wait_for(reading, 60)
        assert sorted((r.request_id for r in results), key=int) == [str(k) for k in range(20)]
        assert all(r.status == "INCOMPLETE" for r in results), [r.error for r in results]
        assert seen["most"] == LIMIT and seen["calls"] == 20
    finally:
        await client.close()
        await stop_app(app)


async def test_shutdown_answers_every_accepted_expand_pair_once():
    app = await create_server(small_config(1))
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        seen = _hold(app, asyncio.Event())  # never set: the held pairs run until the shutdown
        pairs = [(root, HOLD if k % 2 else "constructor") for k in range(10)]
        results = []

        async def read_all():
            async for result in client.expand(pairs, batch=False):
                results.append(result)

        reading = asyncio.ensure_future(read_all())
        await wait_until(
            lambda: seen["running"] == 5 and len(results) == 5,
            20,
            "the 5 free pairs answered and the 5 held ones running",
        )
        await stop_app(app)  # App.stop: the Expand stream is told as VerifyStreams are
        await asyncio.wait_for(reading, 30)  # the stream ends OK (the client raises otherwise)
    finally:
        await client.close()
    by_id = {}
    for result in results:
        assert result.request_id not in by_id, f"{result.request_id} answered twice"
        by_id[result.request_id] = result
    assert sorted(by_id, key=int) == [str(k) for k in range(10)]
    for k, result in by_id.items():
        if int(k) % 2:
            assert result.status == "REJECTED", result
            assert result.error.startswith("UNAVAILABLE: server shutting down"), result.error
            assert "safe to resend" in result.error
        else:
            assert result.status == "INCOMPLETE", result.error
