"""tests/reliability: bounded load and fault runs on loopback (stand-in REPL)."""

from __future__ import annotations

import pytest

from reliability_support import descendants, wait_for


@pytest.fixture(autouse=True)
async def no_leaked_processes():
    before = descendants()
    yield
    await wait_for(lambda: not (descendants() - before), 15.0, "child processes to exit")
