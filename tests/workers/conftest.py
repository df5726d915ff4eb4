"""Fixtures for the supervised-worker tests: real stand-in processes, no gRPC.

Every test ends by checking that no child process of the test survives
(testkit's `no_orphans`, autouse here).
"""

from __future__ import annotations

from testkit import no_orphans  # noqa: F401  (the autouse fixture)
