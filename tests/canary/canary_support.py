"""Shared by tests/canary: two clients' tokens, a wrong proof, a one-worker server config
with a result cache in front of a planted hostile REPL (testkit.TRAPDOOR), and that server
with its two clients (`serving`)."""

from __future__ import annotations

import contextlib

from cache_support import TEST_SECRET, cached_config
from leanrpc.app import create_server
from leanrpc.client import AsyncClient

TOKENS = ["alice-token-1", "bob-token-2"]
WRONG = "exact Nat.nonexistent_lemma x"  # the stand-in's unknown identifier: INVALID


def trapdoor_config(tmp_path, command, **canary):
    """One worker running `command`, a cache under `tmp_path`, no sandbox, the two
    tokens; `canary` sets `[canary]` keys (rate, timeout_s)."""
    config = cached_config(1, cache_dir=str(tmp_path / "cache"))
    config.repl.command = command
    config.sandbox.mode = "off"
    config.server.auth_tokens = TOKENS
    for key, value in canary.items():
        setattr(config.canary, key, value)
    return config


@contextlib.asynccontextmanager
async def serving(config, monkeypatch):
    """A server of `config` (the cache's secret set, no token file) and one client per
    token (alice, bob); all closed and stopped after."""
    monkeypatch.setenv("LEANRPC_CACHE_SECRET", TEST_SECRET)
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    app = await create_server(config)
    clients = [AsyncClient(f"127.0.0.1:{app.port}", token=t, max_retries=0) for t in TOKENS]
    try:
        yield app, clients
    finally:
        for client in clients:
            await client.close()
        await app.stop(2.0)
