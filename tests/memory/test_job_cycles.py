"""A finished pool job is freed at once (issue 44's deep-chain leftover): no
job, ticket, job view or attempt is left in a reference cycle for the cycle
collector, for a body job (Verify), a call job (a tactic) and a session job.
Before Pool._settle dropped the view and the attempt, each job (now its
pool-private ticket, pool/ticket.py) stayed in a cycle with its view (and its
attempt's task), so a deep chain of long tactics kept every call's texts alive
until the next collection (231 MB at depth 14)."""

from __future__ import annotations

import gc

from leanrpc.app import create_server
from leanrpc.client import AsyncClient
from leanrpc.pool.attempt import Attempt
from leanrpc.pool.job import Job
from leanrpc.pool.plan import JobView
from leanrpc.pool.ticket import Ticket
from testkit import loopback_config, stop_server

STATEMENT = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n  sorry\n"


def _cyclic_pool_objects() -> list[str]:
    """The pool objects only the cycle collector would free now."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        found = [
            type(o).__name__ for o in gc.garbage if isinstance(o, (Job, Ticket, JobView, Attempt))
        ]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return found


async def test_finished_jobs_leave_no_reference_cycle():
    app = await create_server(loopback_config(1))
    client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
    try:
        await client.verify_batch(["theorem w : True := trivial"])  # boots and warms the worker
        gc.collect()
        gc.disable()  # what is left in a cycle now stays there for the check
        try:
            [result] = await client.verify_batch(["theorem a : 1 + 1 = 2 := rfl"])
            assert result.status == "VALID"
            started = await client.start_proof(STATEMENT, check_axioms=False)
            ran = await client.run_tactic(started.states[0].state_id, "constructor")
            assert ran.status == "INCOMPLETE", ran.error
            opened = await client.open_session("def d := 1", name="s")
            assert opened.result.status == "VALID", opened
            assert _cyclic_pool_objects() == []
        finally:
            gc.enable()
    finally:
        await stop_server(app, client)
