"""A real leanrpc server on the stand-in REPL, and a scripted Verifier, for the reward tests."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from leanrpc.app import create_server
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc as pb_grpc
from testkit import loopback_config


@pytest.fixture
async def server():
    """Starts leanrpc (2 stand-in workers) on a free port; yields its address."""
    started = []

    async def start(workers: int = 2, **overrides) -> str:
        app = await create_server(loopback_config(workers=workers, **overrides))
        started.append(app)
        return f"127.0.0.1:{app.port}"

    start.apps = started
    yield start
    for app in started:
        await app.stop(2.0)


class ScriptedVerifier(pb_grpc.VerifierServicer):
    """A real gRPC server that answers Verify as a test scripts it: an abort with a
    status code, a result status for every snippet, or a delay (infrastructure
    failures a healthy leanrpc cannot be made to show on demand)."""

    def __init__(self) -> None:
        self.abort: grpc.StatusCode | None = None
        self.status = pb.STATUS_VALID
        self.retry_after_s: float | None = None
        self.delay_s = 0.0
        self.calls = 0
        self.snippets: list[int] = []

    async def Verify(self, request, context):
        self.calls += 1
        self.snippets.append(len(request.snippets))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.abort is not None:
            await context.abort(self.abort, f"scripted {self.abort.name}")
        results = []
        for snippet in request.snippets:
            result = pb.Result(id=snippet.id, status=self.status, error="scripted")
            if self.retry_after_s is not None:
                result.retry_after.FromNanoseconds(int(self.retry_after_s * 1e9))
            results.append(result)
        return pb.VerifyResponse(results=results)


@pytest.fixture
async def scripted():
    servicer = ScriptedVerifier()
    server = grpc.aio.server()
    pb_grpc.add_VerifierServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    servicer.address = f"127.0.0.1:{port}"
    yield servicer
    await server.stop(0)
