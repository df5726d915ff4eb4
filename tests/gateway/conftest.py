"""Fixtures for the REST gateway: a leanrpc server with the gateway on a real
port, and the peers' Python (>= 3.12) where Kimina's own client is installed."""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path

import pytest

from kimina_support import PEERS_PYTHON, REPO
from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from leanrpc.config import GatewayConfig
from leanrpc.gateway import start_gateway
from testkit import loopback_config


@pytest.fixture(scope="session")
def peers_python() -> Path:
    """The peers' virtualenv with kimina-ast-client; made by setup.sh when missing (CI reaches PyPI)."""

    def ready() -> bool:
        return (
            PEERS_PYTHON.exists()
            and subprocess.run(
                [str(PEERS_PYTHON), "-c", "import kimina_client"], capture_output=True
            ).returncode
            == 0
        )

    if not ready():
        done = subprocess.run(
            ["bash", str(REPO / "benchmarks" / "peers" / "setup.sh")],
            capture_output=True,
            text=True,
            timeout=1200,
        )
        if done.returncode != 0 or not ready():
            pytest.fail(
                f"benchmarks/peers/setup.sh could not install kimina-ast-client:\n{done.stderr[-3000:]}"
            )
    return PEERS_PYTHON


@dataclasses.dataclass
class Served:
    app: object
    gateway: object
    url: str
    grpc: AsyncClient


@pytest.fixture
async def served():
    """leanrpc with 2 stand-in workers, gRPC and the REST gateway (file lines)."""
    started: list = []

    async def start(workers: int = 2, message_lines: str = "file", **overrides) -> Served:
        config = loopback_config(workers=workers, **overrides)
        config.gateway = GatewayConfig(message_lines=message_lines)
        app = await create_server(config)
        gateway = await start_gateway(app.verify, config, port=0)
        client = AsyncClient(
            f"127.0.0.1:{app.port}", max_retries=0, token=(config.server.auth_tokens or [None])[0]
        )
        s = Served(app, gateway, f"http://127.0.0.1:{gateway.port}", client)
        started.append(s)
        return s

    yield start
    for s in started:
        await s.grpc.close()
        await s.gateway.stop(2.0)
        await s.app.stop(2.0)
