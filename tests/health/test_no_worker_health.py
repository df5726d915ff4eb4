"""Health says NOT_SERVING, with the reason, when no worker can take a job
(issue 16 item 3), and SERVING again when the worker recovers. A real server,
a real REPL process that refuses to stop; the grpc health Watch stream
reports each change (no polling of our own)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from leanrpc.app import create_server
from leanrpc.config import Config
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc

STUCK = str(Path(__file__).with_name("stuck_repl.py"))


async def test_every_slot_stuck_is_not_serving_with_the_reason_then_serving_again():
    config = Config()
    config.server.port = 0
    config.pool.workers = 1
    config.pool.stuck_after_s = 0.5
    config.limits.max_system_memory_percent = 0
    config.repl.command = [sys.executable, STUCK]
    app = await create_server(config)
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
    health = health_pb2_grpc.HealthStub(channel)
    verifier = pb_grpc.VerifierStub(channel)
    try:
        watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
        seen = []

        async def next_status(want):
            async for reply in watch:
                seen.append(reply.status)
                if reply.status == want:
                    return

        await asyncio.wait_for(next_status(health_pb2.HealthCheckResponse.SERVING), 10)
        worker = app.pool.workers[0]
        # Graded stop: stdin closed, SIGTERM (ignored), SIGKILL after 6 s.
        stopping = asyncio.create_task(worker.stop(12.0))
        await asyncio.wait_for(next_status(health_pb2.HealthCheckResponse.NOT_SERVING), 5)
        info = await verifier.GetServerInfo(pb.GetServerInfoRequest(), timeout=5)
        assert not info.serving
        assert "no worker can take a job" in info.not_serving_reason
        assert f"{worker.name} stuck stopping" in info.not_serving_reason
        # SIGKILL ends it; its slot frees and the server serves again.
        await asyncio.wait_for(next_status(health_pb2.HealthCheckResponse.SERVING), 20)
        await stopping
        info = await verifier.GetServerInfo(pb.GetServerInfoRequest(), timeout=5)
        assert info.serving and info.not_serving_reason == ""
        reply = await verifier.Verify(
            pb.VerifyRequest(snippets=[pb.Snippet(id="a", code="theorem x : 1 = 1 := rfl")]),
            timeout=30,
        )
        assert reply.results[0].status == pb.STATUS_VALID
        watch.cancel()
    finally:
        await channel.close()
        # The replacement worker ignores SIGTERM too: a short grace reaches SIGKILL.
        await app.stop(1.0)
