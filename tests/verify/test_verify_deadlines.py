"""Client deadlines end to end: the server drops or kills the work behind them."""

from __future__ import annotations

import asyncio

import grpc
import psutil
import pytest

from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc
from verify_support import running_server

# Far longer than any deadline below: if the next call had to wait for it,
# that call's own (generous) deadline would pass.
SLOW = "import Mathlib\n\ntheorem slow : True := trivial\n--@standin: burn=120\n"
OK = "import Mathlib\n\ntheorem fine : True := trivial\n"


def _request(snippet_id: str, code: str) -> pb.VerifyRequest:
    return pb.VerifyRequest(snippets=[pb.Snippet(id=snippet_id, code=code)])


async def test_deadline_kills_running_worker_and_drops_queued_job():
    async with running_server(workers=1) as (app, _client):
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        stub = verifier_pb2_grpc.VerifierStub(channel)
        # Warm the header so the slow one starts at once on the one worker.
        assert (await stub.Verify(_request("warm", OK), timeout=60)).results[
            0
        ].status == pb.STATUS_VALID
        [worker] = app.pool.workers
        slow_pid = worker.pid

        running = asyncio.ensure_future(stub.Verify(_request("slow", SLOW), timeout=4.0))
        for _ in range(400):  # until the slow body is on the worker
            if worker.busy:
                break
            await asyncio.sleep(0.01)
        assert worker.busy
        queued = stub.Verify(_request("queued", SLOW), timeout=1.0)
        with pytest.raises(grpc.aio.AioRpcError) as info:
            await queued
        assert info.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        # Dropped from the queue (the server sees its deadline a moment after
        # the client does), never run.
        for _ in range(200):
            if app.pool.queue_depth == 0:
                break
            await asyncio.sleep(0.05)
        assert app.pool.queue_depth == 0
        assert worker.busy and worker.pid == slow_pid
        # The job's time is the call's remaining deadline: the server's own
        # timeout and the client's deadline end together, so the call ends
        # either way (DEADLINE_EXCEEDED, or a TIMEOUT answer that got back first).
        try:
            answered = await running
        except grpc.aio.AioRpcError as error:
            assert error.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        else:
            [result] = answered.results
            assert result.status == pb.STATUS_TIMEOUT and "killed" in result.error, result

        [after] = (await stub.Verify(_request("after", OK), timeout=60)).results
        assert after.status == pb.STATUS_VALID
        # The worker that ran the slow body was killed, not left burning.
        for _ in range(200):
            if (
                not psutil.pid_exists(slow_pid)
                or psutil.Process(slow_pid).status() == psutil.STATUS_ZOMBIE
            ):
                break
            await asyncio.sleep(0.05)
        assert (
            not psutil.pid_exists(slow_pid)
            or psutil.Process(slow_pid).status() == psutil.STATUS_ZOMBIE
        )
        assert after.reuse.worker != worker.name or app.pool.workers[0].pid != slow_pid
        assert app.pool.stats.jobs_submitted == app.pool.stats.jobs_finished
        await channel.close()
