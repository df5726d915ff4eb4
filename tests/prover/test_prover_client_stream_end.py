"""The Python client's `expand` when the server ends the Expand stream first
(a graceful stop stops reading, answers what it read, and ends OK).

A search feeds `expand` from an async generator that waits on the results of
this very stream. When the call ended before every pair was sent, the client
used to wait for its sender, which waited on the generator, which waited on
results that would never come: a hang. Now the sender is cancelled and the
stream raises UNAVAILABLE (the pairs without a result never ran)."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from leanrpc.client import AsyncClient
from leanrpc.v1 import prover_pb2 as ppb
from leanrpc.v1 import prover_pb2_grpc as ppb_grpc


class _AnswersOneThenEnds(ppb_grpc.ProverServicer):
    def __init__(self, linger_s: float = 0.0) -> None:
        self.read: list[str] = []
        self.linger_s = linger_s  # how long the call stays open after its one answer

    async def Expand(self, request_iterator, context):
        async for request in request_iterator:
            self.read.append(request.request_id)
            yield ppb.TacticResult(
                request_id=request.request_id,
                parent_state_id=request.state_id,
                tactic=request.tactic,
                status=ppb.PROOF_STATUS_INCOMPLETE,
                state_id="s1",
            )
            await asyncio.sleep(self.linger_s)
            return  # stops reading: the rest is never read


@pytest.mark.parametrize(
    ("wait_for", "linger_s"),
    [(1, 0.0), (1, 0.5), (2, 0.0)],
    ids=["writes-after-the-end", "writes-before-the-end", "waits-forever"],
)
async def test_expand_fed_by_its_own_results_when_the_server_ends_first(wait_for, linger_s):
    """`wait_for` results before the next pair: after 1, the next write races
    the call's end (grpc's local INTERNAL, before); when the call lingers, that
    write wins and the client half-closes before the end (an OK end with a pair
    never answered, before: CI, 2026-12-06); after 2, the generator would wait
    forever (a hang, before). All: UNAVAILABLE now."""
    servicer = _AnswersOneThenEnds(linger_s)
    server = grpc.aio.server()
    ppb_grpc.add_ProverServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    answered = asyncio.Event()

    async def pairs():
        yield ("s0", "constructor")
        while len(seen) < wait_for:  # a search: the next tactic depends on the results
            await answered.wait()
            answered.clear()
        yield ("s1", "simp")

    seen = []
    try:
        async with AsyncClient(f"127.0.0.1:{port}", max_retries=0) as client:

            async def search():
                async for result in client.expand(pairs()):
                    seen.append(result)
                    answered.set()

            try:
                await asyncio.wait_for(search(), 20)
                raised = None
            except grpc.aio.AioRpcError as exc:
                raised = exc
    finally:
        await server.stop(0)
    assert [r.tactic for r in seen] == ["constructor"] and servicer.read == ["0"]
    assert raised is not None and raised.code() is grpc.StatusCode.UNAVAILABLE, raised
    assert "never ran" in raised.details()
