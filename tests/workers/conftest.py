"""Fixtures for the supervised-worker tests: real stand-in processes, no gRPC.

Every test ends by checking that no child process of the test survives.
"""

from __future__ import annotations

import pytest

from workers_support import descendants, wait_until


@pytest.fixture(autouse=True)
async def no_orphans():
    before = descendants()
    yield
    # Children this test started must all be gone (not even zombies left
    # unreaped for long).
    await wait_until(lambda: not (descendants() - before), 15.0, "child processes to exit")
