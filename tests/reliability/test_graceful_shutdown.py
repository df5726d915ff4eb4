"""Graceful shutdown under load: in-flight requests finish within the grace
period, new calls get UNAVAILABLE, no child process survives."""

from __future__ import annotations

import asyncio

import grpc
from google.protobuf import duration_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc

from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from reliability_support import HEADER, descendants, start_app, wait_for, wait_no_descendants


async def _open_streams(stub, streams: int, per_stream: int, body: str) -> list:
    calls = []
    for k in range(streams):
        call = stub.VerifyStream()
        await call.write(
            pb.VerifyStreamRequest(
                options=pb.VerifyOptions(timeout=duration_pb2.Duration(seconds=120))
            )
        )
        for i in range(per_stream):
            code = HEADER + body.format(i=f"{k}_{i}")
            await call.write(pb.VerifyStreamRequest(snippet=pb.Snippet(id=f"{k}-{i}", code=code)))
        await call.done_writing()
        calls.append(call)
    return calls


async def _drain(call) -> tuple[list, grpc.StatusCode]:
    answers = []
    try:
        async for message in call:
            answers.append(message.result)
    except grpc.aio.AioRpcError:
        pass
    return answers, await call.code()


async def _new_call_code(port: int) -> grpc.StatusCode:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = pb_grpc.VerifierStub(channel)
        request = pb.VerifyRequest(
            snippets=[pb.Snippet(id="new", code=HEADER + "theorem n : True := trivial\n")]
        )
        try:
            await stub.Verify(request, timeout=10)
            return grpc.StatusCode.OK
        except grpc.aio.AioRpcError as exc:
            return exc.code()


async def test_in_flight_requests_finish_and_new_ones_are_refused():
    app = await start_app(workers=2)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    stub = pb_grpc.VerifierStub(channel)
    health = health_pb2_grpc.HealthStub(channel)
    stopped = None
    try:
        calls = await _open_streams(
            stub,
            streams=4,
            per_stream=6,
            body="theorem t{i} : True := trivial\n--@standin: burn=0.15\n",
        )
        drains = [asyncio.ensure_future(_drain(call)) for call in calls]
        await wait_for(lambda: app.pool.stats.jobs_finished >= 2, 60.0, "the load to be under way")
        tree = descendants()
        watch = health.Watch(health_pb2.HealthCheckRequest(service="leanrpc.v1.Verifier"))
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.SERVING
        stopped = asyncio.ensure_future(app.stop(grace=60.0))
        # Watchers hear NOT_SERVING first (balancers drain before the stop).
        assert (await watch.read()).status == health_pb2.HealthCheckResponse.NOT_SERVING
        watch.cancel()
        # A new call is refused while the in-flight ones still run.
        assert await _new_call_code(app.port) is grpc.StatusCode.UNAVAILABLE
        assert not stopped.done()
        results = await asyncio.gather(*drains)
        for answers, code in results:
            assert code is grpc.StatusCode.OK
            assert [r.status for r in answers] == [pb.STATUS_VALID] * 6
        await asyncio.wait_for(stopped, 60)
        assert app.pool.stats.jobs_submitted == 24 == app.pool.stats.jobs_finished
        assert not (descendants() & tree)
    finally:
        if stopped is None:
            await app.stop(2.0)
        await channel.close()
    await wait_no_descendants()


async def test_grace_period_cuts_hung_requests_and_kills_every_worker():
    app = await start_app(workers=2)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    stub = pb_grpc.VerifierStub(channel)
    try:
        calls = await _open_streams(
            stub, streams=3, per_stream=4, body="theorem t{i} : True := trivial\n--@standin: hang\n"
        )
        drains = [asyncio.ensure_future(_drain(call)) for call in calls]
        await wait_for(
            lambda: sum(1 for w in app.pool.workers if w.busy) == 2, 60.0, "both workers to hang"
        )
        tree = descendants()
        assert tree
        # The hung bodies (120 s timeout) cannot finish in a 1 s grace.
        await asyncio.wait_for(app.stop(grace=1.0), 30)
        assert not (descendants() & tree)
        results = await asyncio.gather(*drains)
        for answers, code in results:
            # Cut: no VALID verdict is invented for a body that never ran.
            assert all(r.status != pb.STATUS_VALID for r in answers)
            assert code in (
                grpc.StatusCode.UNAVAILABLE,
                grpc.StatusCode.CANCELLED,
                grpc.StatusCode.OK,
            )
        assert app.pool.stats.jobs_submitted == app.pool.stats.jobs_finished
    finally:
        await channel.close()
    await wait_no_descendants()
