"""A server restarted under a client's stream (a rolling deploy): the client's
`verify` keeps what was answered, re-sends the rest to the new server, and
every snippet comes back once, in input order.

The graceful stop ends the stream while the client is still sending, which
grpc's aio client reports as a local INTERNAL ("Internal error from Core",
the server's own status lost); the client reads that as a broken stream
(leanrpc_client/_retry.py). Before, it raised INTERNAL and the rest was lost.
"""

from __future__ import annotations

import asyncio

import grpc
import pytest

from leanrpc.app import create_server
from leanrpc.client import AsyncClient, ClientError
from leanrpc.client._retry import LOCAL_WRITE_RACE, client_error, stream_code
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from testkit import free_port, stop_app, wait_until
from verify_support import small_config

pytestmark = pytest.mark.timeout(240)

SLOW = "import Mathlib\n\n--@standin: burn=0.005\ntheorem s{i} : True := trivial\n"


async def test_a_stream_cut_by_a_graceful_stop_finishes_on_the_restarted_server():
    config = small_config(2)
    config.server.port = free_port()
    items = [(f"s{i}", SLOW.format(i=i)) for i in range(3000)]
    seen: list[int] = []
    app = await create_server(config)
    try:
        async with AsyncClient(
            f"127.0.0.1:{config.server.port}", max_retries=30, backoff_s=0.1
        ) as client:
            pending = asyncio.ensure_future(
                client.verify(items, on_result=lambda index, _r: seen.append(index))
            )
            await wait_until(lambda: len(seen) >= 100, 60.0, "the first answers")
            await app.stop(0.5)  # what SIGTERM runs
            assert not pending.done() and len(seen) < len(items)
            app = await create_server(config)  # the same port: the deploy's new server
            results = await asyncio.wait_for(pending, 180)
    finally:
        await stop_app(app)
    assert [r.id for r in results] == [sid for sid, _code in items]
    assert all(r.status == "VALID" for r in results), {r.status for r in results}
    assert sorted(seen) == list(range(len(items)))  # each final answer reported once


def _rpc_error(code: grpc.StatusCode, details: str) -> grpc.aio.AioRpcError:
    return grpc.aio.AioRpcError(code, grpc.aio.Metadata(), grpc.aio.Metadata(), details=details)


def test_only_grpcs_local_write_race_reads_as_a_broken_stream():
    race = _rpc_error(grpc.StatusCode.INTERNAL, LOCAL_WRITE_RACE)
    assert stream_code(race) is grpc.StatusCode.UNAVAILABLE
    error = client_error(race, [])
    assert isinstance(error, ClientError) and error.code is grpc.StatusCode.UNAVAILABLE
    assert "still sending" in str(error)
    # A server's own INTERNAL (a bug on its side) stays INTERNAL: never re-sent.
    server_bug = _rpc_error(grpc.StatusCode.INTERNAL, "INTERNAL: something broke")
    assert stream_code(server_bug) is grpc.StatusCode.INTERNAL
    assert client_error(server_bug).code is grpc.StatusCode.INTERNAL


class _StopsReading(pb_grpc.VerifierServicer):
    """A VerifyStream that, on its first call, answers the first two snippets
    and ends OK with the rest unread (what a shutting-down server does at its
    deadline), once the client's next writes have gone out; later calls
    answer everything."""

    def __init__(self) -> None:
        self.calls = 0
        self.answered: list[str] = []

    async def VerifyStream(self, request_iterator, context):
        self.calls += 1
        first = self.calls == 1
        read = 0
        async for message in request_iterator:
            if message.WhichOneof("kind") != "snippet":
                continue
            self.answered.append(message.snippet.id)
            yield pb.VerifyStreamResponse(
                result=pb.Result(id=message.snippet.id, status=pb.STATUS_VALID)
            )
            read += 1
            if first and read == 2:
                # The client's next writes land in the transport, unread.
                await asyncio.sleep(0.3)
                return


async def test_an_ok_end_short_of_answers_resends_the_unread_and_never_hangs():
    """Window 2: after the two answers the client's sender waits for a slot
    no answer will free. It is cancelled, the stream counts as broken
    (UNAVAILABLE: the server answers all it read), and the rest goes again."""
    servicer = _StopsReading()
    server = grpc.aio.server()
    pb_grpc.add_VerifierServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        items = [(f"s{i}", f"theorem s{i} : True := trivial\n") for i in range(10)]
        async with AsyncClient(f"127.0.0.1:{port}", max_retries=3, backoff_s=0.01) as client:
            results = await asyncio.wait_for(client.verify(items, window=2), 30)
    finally:
        await server.stop(0)
    assert [(r.id, r.status) for r in results] == [(sid, "VALID") for sid, _code in items]
    assert servicer.calls == 2
    assert sorted(servicer.answered) == sorted(f"{i}:s{i}" for i in range(10))  # each once
