"""VerifyStream with a full queue: per-snippet RESOURCE_EXHAUSTED, the stream goes on."""

from __future__ import annotations

import asyncio
import re

import grpc

from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc
from verify_support import running_server

HANG = "import Mathlib\n\ntheorem stuck : True := trivial\n--@standin: hang\n"


def ok(i: int) -> str:
    return f"import Mathlib\n\ntheorem t{i} : {i} = {i} := rfl\n"


def snippet(snippet_id: str, code: str) -> pb.VerifyStreamRequest:
    return pb.VerifyStreamRequest(snippet=pb.Snippet(id=snippet_id, code=code))


async def _wait_busy(app) -> None:
    for _ in range(500):
        if app.pool.queue_depth == 0 and any(w.busy for w in app.pool.workers):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the hanging snippet never started")


async def test_snippets_over_the_queue_limit_are_refused_one_by_one():
    async with running_server(workers=1, pool__queue_limit=2) as (app, _client):
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        call = verifier_pb2_grpc.VerifierStub(channel).VerifyStream(timeout=120)
        await call.write(snippet("stuck", HANG))
        await _wait_busy(app)
        for i in range(2):
            await call.write(snippet(f"queued{i}", ok(i)))
        for i in range(4):
            await call.write(snippet(f"over{i}", ok(10 + i)))
        refused = [(await call.read()).result for _ in range(4)]
        assert sorted(r.id for r in refused) == [f"over{i}" for i in range(4)]
        for result in refused:
            assert result.status == pb.STATUS_REJECTED
            assert re.fullmatch(r"RESOURCE_EXHAUSTED: queue full .*", result.error), result.error
            # The hint is a field, not text: Result.retry_after.
            assert result.HasField("retry_after") and result.retry_after.ToNanoseconds() > 0, result
        # The stream keeps going: cancel the stuck one, the queued ones run,
        # and a new snippet is taken.
        await call.write(pb.VerifyStreamRequest(cancel_id="stuck"))
        rest = {}
        for _ in range(3):
            message = await call.read()
            rest[message.result.id] = message.result.status
        assert rest == {
            "stuck": pb.STATUS_CANCELLED,
            "queued0": pb.STATUS_VALID,
            "queued1": pb.STATUS_VALID,
        }
        await call.write(snippet("later", ok(99)))
        await call.done_writing()
        later = await call.read()
        assert (later.result.id, later.result.status) == ("later", pb.STATUS_VALID)
        assert await call.read() is grpc.aio.EOF
        assert await call.code() is grpc.StatusCode.OK
        await channel.close()


async def test_client_resends_refused_snippets_with_backoff():
    async with running_server(workers=1, pool__queue_limit=2) as (app, _client):
        from leanrpc.client import AsyncClient

        address = f"127.0.0.1:{app.port}"
        items = [("slow", "import Mathlib\n\ntheorem s : True := trivial\n--@standin: burn=1\n")]
        items += [(f"q{i}", ok(i)) for i in range(6)]
        # Without retries the refusals are the answers.
        async with AsyncClient(address, max_retries=0) as client:
            first = await client.verify([("stuck", HANG)] + items[1:], timeout_s=3.0, window=16)
        assert first[0].status == "TIMEOUT"
        refused = [r for r in first if r.status == "REJECTED"]
        assert refused and all(r.error.startswith("RESOURCE_EXHAUSTED: ") for r in refused)
        assert sum(r.status == "VALID" for r in first) == 6 - len(refused)
        # With retries every snippet ends up verified, in input order.
        async with AsyncClient(address, max_retries=8, backoff_s=0.1) as client:
            results = await client.verify(items, window=16)
        assert [(r.id, r.status) for r in results] == [(i, "VALID") for i, _ in items]
