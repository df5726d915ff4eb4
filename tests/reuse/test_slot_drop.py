"""A worker's slot owns every REPL handle it holds; its death drops them all, in one place.

Through a real server with a stand-in worker: the worker holds a header env,
a preamble env, a session's envs, a proof's states and prefix-index entries;
a kill -9 leaves none of them anywhere, and the next calls rebuild on the
fresh worker (pool/replay.py).
"""

from __future__ import annotations

import os
import signal

from leanrpc.worker.worker import WorkerState
from reuse_support import start, stop
from testkit import wait_until

OWNER = "peer:ipv4:127.0.0.1"  # the loopback caller
AND_STATEMENT = "theorem and_intro_t (p q : Prop) (hp : p) (hq : q) : p ∧ q"


def _index_entries(pool, name: str) -> list[str]:
    return [key for key in pool.index if key.endswith("\x00" + name)]


async def test_a_dead_workers_handles_are_dropped_from_every_store():
    app, client = await start(workers=1)
    try:
        await client.open_session("import Mathlib\nopen Nat\n", name="s")
        step = await client.run_in_session(
            "s", "theorem t : True := trivial", env=0, check_axioms=False
        )
        assert step.result.status == "VALID"
        proof = await client.start_proof(AND_STATEMENT)
        split = await client.run_tactic(proof.states[0].state_id, "constructor")
        assert split.status == "INCOMPLETE"

        pool = app.pool
        worker = next(w for w in pool.workers if w.alive)
        name = worker.name
        slot = pool.slots.of(name)
        session = pool.sessions.get("s", OWNER)
        proofs = list(app.prover.registry._proofs.values())
        # Before: every store holds something of this worker.
        assert slot.headers and worker.headers is slot.headers
        assert slot.preamble_count >= 1
        assert session.realized.get(name)
        assert any(p.realized.get(name) for p in proofs)
        assert pool.index.history_size(name) >= 1 and _index_entries(pool, name)
        assert app.prover.registry.held_states(name)

        os.kill(worker.pid, signal.SIGKILL)
        await wait_until(lambda: worker.state is WorkerState.DEAD, 30.0, "the worker to be DEAD")

        # After: none of them knows it.
        assert name not in pool.slots
        assert worker.headers == {} and slot.preamble_count == 0 and slot.chains() == []
        assert name not in session.realized
        assert all(name not in p.realized for p in proofs)
        assert pool.index.history_size(name) == 0 and not _index_entries(pool, name)
        assert app.prover.registry.held_states(name) == []
        # A late writer under the dead name keeps nothing.
        assert pool.slots.of(name).built(session) == {} and name not in session.realized

        # The fresh worker rebuilds what it lacks: the session env and the proof state.
        again = await client.run_in_session("s", "#check t", env=1, check_axioms=False)
        assert again.result.status == "VALID"
        left = await client.run_tactic(split.state_id, "exact hp")
        assert left.status in ("INCOMPLETE", "COMPLETED")
        fresh = next(w for w in pool.workers if w.alive)
        assert fresh.name != name and session.realized.get(fresh.name)
        assert app.prover.registry.stats.states_rebuilt >= 1
    finally:
        await stop(app, client)
