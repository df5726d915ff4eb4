"""A one-worker server on the stand-in for the Extract RPC tests of this folder."""

from __future__ import annotations

import grpc
import pytest

import testkit
from leanrpc.config import Config
from leanrpc.v1 import verifier_pb2_grpc


@pytest.fixture
async def server():
    """(app, Verifier stub) over loopback."""
    config = Config()
    config.server.port = 0
    config.pool.workers = 1
    config.pool.default_timeout_s = 20
    async with testkit.running_server(config) as app:  # the shared server helper
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        try:
            yield app, verifier_pb2_grpc.VerifierStub(channel)
        finally:
            await channel.close()


@pytest.fixture
def stub(server):
    return server[1]
