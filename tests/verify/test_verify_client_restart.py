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
from verify_support import free_port, small_config, stop_app

pytestmark = pytest.mark.timeout(240)

SLOW = "import Mathlib\n\n--@standin: burn=0.005\ntheorem s{i} : True := trivial\n"


async def _wait_for(predicate, timeout: float, what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


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
            await _wait_for(lambda: len(seen) >= 100, 60.0, "the first answers")
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
