"""Helpers for the ecosystem tests: a live server on free loopback ports."""

from __future__ import annotations

from leanrpc.app import create_server
from leanrpc.config import Config

HEADERS = ["import Mathlib", "import Mathlib.Tactic"]
EXPECTED_BY_KIND = {0: "VALID", 1: "SORRY", 2: "INVALID"}


def snippet(i: int) -> tuple[str, str, str]:
    """(id, code, expected status): VALID, SORRY and INVALID in turn, two headers."""
    header = HEADERS[i % 2]
    kind = i % 3
    if kind == 0:
        proof = "rfl"
    elif kind == 1:
        proof = "sorry"
    else:
        proof = "exact Nat.nonexistent_lemma x"
    code = f"{header}\n\ntheorem t{i} (x : Nat) : x + {i} = x + {i} := by\n  {proof}\n"
    return f"s{i}", code, EXPECTED_BY_KIND[kind]


async def start_app(*, workers: int = 2, metrics_port: int = 0, **server):
    config = Config()
    config.server.port = 0
    config.server.metrics_port = metrics_port
    config.pool.workers = workers
    config.pool.default_timeout_s = 30
    for key, value in server.items():
        setattr(config.server, key, value)
    return await create_server(config)
