"""A real server on a loopback port with stand-in workers, for tests/verify."""

from __future__ import annotations

import contextlib

import testkit
from leanrpc.client import AsyncClient
from leanrpc.config import Config
from testkit import loopback_config


def small_config(workers: int = 1, **overrides) -> Config:
    """Config for a test server; overrides are `section__key=value`."""
    overrides.setdefault("pool__default_timeout_s", 20)
    return loopback_config(workers, **overrides)


@contextlib.asynccontextmanager
async def running_server(workers: int = 1, **overrides):
    """Yields (app, client): testkit's shared server plus a client without retries."""
    async with testkit.running_server(small_config(workers, **overrides)) as app:
        client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
        try:
            yield app, client
        finally:
            await client.close()
