"""A real server on a loopback port with stand-in workers, for tests/verify."""

from __future__ import annotations

import contextlib
import socket

import psutil

from leanrpc.app import App, create_server
from leanrpc.client import AsyncClient
from leanrpc.config import Config
from testkit import loopback_config


def small_config(workers: int = 1, **overrides) -> Config:
    """Config for a test server; overrides are `section__key=value`."""
    overrides.setdefault("pool__default_timeout_s", 20)
    return loopback_config(workers, **overrides)


@contextlib.asynccontextmanager
async def running_server(workers: int = 1, **overrides):
    """Yields (app, client); stops both and checks no worker process is left."""
    app = await create_server(small_config(workers, **overrides))
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        yield app, client
    finally:
        await client.close()
        await stop_app(app)


async def stop_app(app: App) -> None:
    children = [w.pid for w in app.pool.workers if w.pid]
    await app.stop(2.0)
    for pid in children:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
