"""A client owns its connection: another channel's reconnect backoff is never its own,
and its own backoff is short.

gRPC shares one connection (a subchannel) per address among all of a process's channels
with the same options, and with it the reconnect backoff. A client made after its server
came back on the same port then got UNAVAILABLE on every call while an older channel to
the gone server waited out its backoff (gRPC's default: at least 0.8 s, growing to 2
minutes): CI's
tests/security/test_limits.py saw 40 calls of 40 fail so, when an earlier test's client
was still open to a port its server had used. The client now asks for a subchannel pool
of its own (leanrpc_client/aio.py).

The servers here are bare gRPC servers (no REPL): what is tested is the client's
channel. The new server answers within milliseconds of the old channel's backoff
starting (now at least 80 ms); on a machine slow enough to let that backoff run out
first, the first test would pass without its fix, never fail with it.
"""

from __future__ import annotations

import asyncio
import time

import grpc

from leanrpc.client import AsyncClient, ClientError
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc

CODE = "theorem t : True := trivial"


class _Answers(pb_grpc.VerifierServicer):
    """Answers every snippet VALID (the REPL is not what is tested here)."""

    async def Verify(self, request, context):
        return pb.VerifyResponse(
            results=[pb.Result(id=s.id, status=pb.STATUS_VALID) for s in request.snippets]
        )


async def _server(port: int, *, answers: bool) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    if answers:
        pb_grpc.add_VerifierServicer_to_server(_Answers(), server)
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    return server, bound


async def _code_of(client: AsyncClient) -> str:
    try:
        await client.verify_batch([CODE])  # one unary Verify call
    except ClientError as exc:
        return exc.code.name
    return "OK"


async def test_a_new_client_does_not_inherit_an_old_channels_backoff():
    gone, port = await _server(0, answers=False)
    stale = AsyncClient(f"127.0.0.1:{port}", max_retries=0)
    try:
        # Connected (the bare server has no Verifier: UNIMPLEMENTED), then the server goes,
        # and the stale channel's next call starts its reconnect backoff.
        assert await _code_of(stale) == "UNIMPLEMENTED"
        await gone.stop(0)
        assert await _code_of(stale) == "UNAVAILABLE"
        back, _ = await _server(port, answers=True)
        try:
            codes = []
            for _ in range(5):
                async with AsyncClient(f"127.0.0.1:{port}", max_retries=0) as fresh:
                    codes.append(await _code_of(fresh))
            assert codes == ["OK"] * 5
        finally:
            await back.stop(0)
    finally:
        await stale.close()


async def test_a_client_notices_its_server_back_within_about_a_second():
    """After 10 s of calls failing, gRPC's default backoff (1 s, x1.6 per attempt, up to
    2 minutes) made the next connection attempt 3-6 s after the server was back (4.7 s
    measured); capped at 1 s it is at most about a second (0.1 s measured)."""
    gone, port = await _server(0, answers=True)
    client = AsyncClient(f"127.0.0.1:{port}", max_retries=0)
    try:
        assert await _code_of(client) == "OK"
        await gone.stop(0)
        outage = time.monotonic() + 10.0
        while time.monotonic() < outage:
            assert await _code_of(client) == "UNAVAILABLE"
            await asyncio.sleep(0.2)
        back, _ = await _server(port, answers=True)
        try:
            since = time.monotonic()
            while await _code_of(client) != "OK":
                assert time.monotonic() - since < 3.0, "the server was back 3 s ago"
                await asyncio.sleep(0.05)
        finally:
            await back.stop(0)
    finally:
        await client.close()
