"""tests/pool: the pool's lifecycle. Most tests here drive its tables without
processes; the few that need the lifecycle on real stand-in workers (a load a
cancelled job leaves running, a boot the shutdown stops) sit next to the table
test of the same lifecycle. Every test ends by checking that no child process
it started survives (testkit's `no_orphans`, autouse here).
"""

from __future__ import annotations

from testkit import no_orphans  # noqa: F401  (the autouse fixture)
