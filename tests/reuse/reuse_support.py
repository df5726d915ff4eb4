"""Shared helpers: a server on loopback with the stand-in REPL in fork mode."""

from __future__ import annotations

import sys

from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from leanrpc.config import Config
from testkit import loopback_config, stop_server


def standin_command(*flags: str) -> list[str]:
    return [sys.executable, "-m", "leanrpc.standin", "--no-replay", *flags]


def make_config(workers: int = 2, command: list[str] | None = None, **overrides) -> Config:
    """testkit.loopback_config, with the result cache at its default (on) and the forking
    stand-in unless `command` is given."""
    overrides.setdefault("cache__enabled", Config().cache.enabled)
    return loopback_config(workers, repl__command=command or standin_command("--fork"), **overrides)


async def start(workers: int = 2, command: list[str] | None = None, **overrides):
    app = await create_server(make_config(workers, command, **overrides))
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    return app, client


async def stop(app, client) -> None:
    await stop_server(app, client)


def lean_file(n_lemmas: int, tag: str = "", last: str | None = None) -> str:
    """A file of `n_lemmas` small lemmas (2 lines each) under one header."""
    lines = ["import Mathlib", ""]
    for i in range(n_lemmas - 1):
        lines.append(f"theorem {tag}l{i} (a b : Nat) (h : a = b) : b + {i} = a + {i} := by")
        lines.append("  simp [h]")
    lines.append(last or f"theorem {tag}last : {n_lemmas} = {n_lemmas} := rfl")
    return "\n".join(lines) + "\n"
