"""A real leanrpc server on the stand-in REPL, for the reward adapters' tests."""

from __future__ import annotations

import pytest

from leanrpc.app import create_server
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
