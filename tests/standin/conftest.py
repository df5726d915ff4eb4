"""Fixtures for the REPL stand-in tests (helpers live in standin_support.py)."""

from __future__ import annotations

import pytest

from standin_support import StandIn


@pytest.fixture
def standin():
    """Factory: ``standin(*args, cwd=..., fixtures=False)``; every process is killed at teardown."""
    procs: list[StandIn] = []

    def make(*args, **kw) -> StandIn:
        p = StandIn(*args, **kw)
        procs.append(p)
        return p

    yield make
    for p in procs:
        p.kill()
