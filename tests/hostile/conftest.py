"""Fixtures for the hostile-REPL tests: no child process may outlive a test."""

from __future__ import annotations

import pytest

from testkit import descendants, wait_until


@pytest.fixture(autouse=True)
async def no_orphans():
    before = descendants()
    yield
    await wait_until(lambda: not (descendants() - before), 15.0, "child processes to exit")
