"""Fixtures for the hostile-REPL tests: no child process may outlive a test,
and every async test runs on both event loops `leanrpc serve` may use
(asyncio's and uvloop: [server] event_loop), so the fence and its audit are
proven on each (tests/workers/test_pipes.py also runs `leanrpc serve` on
uvloop; the tests here that start it as a process use its default, asyncio's)."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from testkit import descendants, wait_until


@pytest.fixture(autouse=True)
async def no_orphans():
    before = descendants()
    yield
    await wait_until(lambda: not (descendants() - before), 15.0, "child processes to exit")


def pytest_asyncio_loop_factories(config, item):
    """Each async test here runs once per loop (pytest-asyncio parametrizes by these)."""
    return {"asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}
