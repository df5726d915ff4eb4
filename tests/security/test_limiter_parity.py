"""One per-client limiter for every door (edge/limiter.py): the gRPC
interceptor and the REST gateway count and refuse the same way, with the
same text, each client on its own."""

from __future__ import annotations

import asyncio

import aiohttp
import grpc
import pytest

from leanrpc.edge.identity import CallerIdentity
from leanrpc.edge.interceptors.auth import ClientConcurrencyInterceptor
from leanrpc.edge.limiter import ClientLimiter, LimitExceeded
from leanrpc.gateway.server import KiminaGateway
from leanrpc.v1 import verifier_pb2 as pb
from security_support import HEADER, bearer, make_config, one_snippet, running_server, stub
from testkit import free_port, wait_until

CODE = HEADER + "theorem t : 1 = 1 := rfl\n"
SLOW = HEADER + "theorem s : True := trivial\n--@standin: burn=2\n"


def test_the_limiter_counts_per_key_and_refuses_the_one_over():
    limiter = ClientLimiter(2)
    limiter.enter("a")
    limiter.enter("a")
    limiter.enter("b")
    with pytest.raises(LimitExceeded) as refused:
        limiter.enter("a")
    assert refused.value.held == 2 and refused.value.limit == 2
    assert (
        "2 calls in flight" in refused.value.message
        and "max_concurrent_per_client" in refused.value.message
    )
    assert limiter.in_flight == {"a": 2, "b": 1}  # the refusal counted nothing
    limiter.leave("a")
    with limiter.holding("a"):
        assert limiter.in_flight["a"] == 2
    limiter.leave("a")
    limiter.leave("b")
    assert not limiter.in_flight
    assert ClientLimiter(0).refusal("a") is None  # 0: no limit


def test_both_doors_use_the_one_limiter_class():
    interceptor = ClientConcurrencyInterceptor(3, CallerIdentity(tokens_checked=True))
    gateway = KiminaGateway(object(), make_config(server__max_concurrent_per_client=3))
    assert type(interceptor.limiter) is type(gateway.limiter) is ClientLimiter
    assert interceptor.limiter.limit == gateway.limiter.limit == 3


async def _post(url: str, body: dict, token: str):
    async with aiohttp.ClientSession() as session:
        async with session.post(
            url + "/api/check", json=body, headers={"Authorization": f"Bearer {token}"}
        ) as r:
            return r.status, await r.json()


async def test_grpc_and_gateway_refuse_the_same_way(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    config = make_config(server__max_concurrent_per_client=1, server__auth_tokens=["alice", "bob"])
    config.gateway.http_port = free_port()
    async with running_server(config) as app:
        url = f"http://127.0.0.1:{config.gateway.http_port}"
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            verifier = stub(channel)
            # gRPC: alice holds one open stream (admitted: it answered).
            held = verifier.VerifyStream(metadata=bearer("alice"))
            await held.write(pb.VerifyStreamRequest(snippet=pb.Snippet(id="held", code=CODE)))
            assert (await held.read()).result.status == pb.STATUS_VALID
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await verifier.Verify(one_snippet(CODE), metadata=bearer("alice"))
            assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            grpc_text = refused.value.details()
            assert (await verifier.Verify(one_snippet(CODE), metadata=bearer("bob"))).results[
                0
            ].status == pb.STATUS_VALID
            await held.done_writing()
            assert await held.code() == grpc.StatusCode.OK

            # REST: alice holds one batch in flight.
            limiter = app.gateway.handlers.limiter
            first = asyncio.ensure_future(
                _post(url, {"snippets": [{"id": "s", "code": SLOW}]}, "alice")
            )
            await wait_until(
                lambda: sum(limiter.in_flight.values()) == 1, 20, "the slow batch admitted"
            )
            status, body = await _post(url, {"snippets": [{"id": "q", "code": CODE}]}, "alice")
            assert status == 429
            rest_text = body["detail"]
            status, _ = await _post(url, {"snippets": [{"id": "b", "code": CODE}]}, "bob")
            assert status == 200
            assert (await first)[0] == 200
            assert not limiter.in_flight
            status, _ = await _post(url, {"snippets": [{"id": "again", "code": CODE}]}, "alice")
            assert status == 200
    assert grpc_text == rest_text == LimitExceeded(1, 1).message
