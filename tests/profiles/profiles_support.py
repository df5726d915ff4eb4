"""Shared helpers: a server on loopback serving several REPL profiles of the
stand-in (each its own Lean version, fork or upstream), and a client."""

from __future__ import annotations

import sys
from pathlib import Path

from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from leanrpc.config import Config
from testkit import stop_server

RECORDING_REPL = str(Path(__file__).with_name("recording_repl.py"))


def standin(*flags: str) -> list[str]:
    return [sys.executable, "-m", "leanrpc.standin", "--no-replay", *flags]


def recording_standin(*flags: str) -> list[str]:
    """The stand-in behind a recorder of its requests (see recording_repl.py)."""
    return [sys.executable, RECORDING_REPL, "--no-replay", *flags]


def profiles_config(
    default: dict, profiles: dict[str, dict], *, workers: int = 2, **pool
) -> Config:
    """A loopback config whose `[repl]` is `default` and whose `[repl.<name>]`
    tables are `profiles`; `pool` sets `[pool]` keys."""
    base = Config()
    base.server.port = 0
    base.pool.workers = workers
    base.pool.default_timeout_s = 30
    base.limits.max_system_memory_percent = 0  # no recycling behind the test's back
    data = base.to_dict()
    data["repl"] = {**data["repl"], **default, **profiles}
    data["pool"] = {**data["pool"], **pool}
    return Config.from_dict(data)


async def start(config: Config):
    app = await create_server(config)
    return app, AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)


async def stop(app, client) -> None:
    await stop_server(app, client)
