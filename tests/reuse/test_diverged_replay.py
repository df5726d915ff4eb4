"""A session replay that answers otherwise than the first time: the pool kills
that worker (WorkerDiverged; services never kill), retries on a fresh one, and
the call ends in one answer, never a reused unfaithful process."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil

from reuse_support import start, stop
from testkit import wait_until

FAKE = [sys.executable, str(Path(__file__).with_name("diverging_repl.py"))]


async def test_a_diverged_replay_kills_the_worker_and_is_retried(tmp_path):
    app, client = await start(
        workers=1, command=FAKE + [str(tmp_path / "seen")], pool__max_retries=1, sandbox__mode="off"
    )  # the marker file is shared by the processes
    try:
        opened = await client.open_session("import Mathlib\n", name="s")
        step = await client.run_in_session(
            "s", "theorem t : True := trivial -- DIVERGE", env=0, check_axioms=False
        )
        assert step.env == 1 and step.result.status == "VALID"
        first = next(w for w in app.pool.workers if w.alive)
        os.kill(first.pid, signal.SIGKILL)  # the holder goes; env 1 must be replayed
        await wait_until(
            lambda: (
                not psutil.pid_exists(first.pid)
                or psutil.Process(first.pid).status() == psutil.STATUS_ZOMBIE
            ),
            30.0,
            "the holder to die",
        )
        await wait_until(
            lambda: any(w.alive and w.pid for w in app.pool.workers), 30.0, "a fresh worker"
        )
        fresh = {w.pid for w in app.pool.workers if w.alive}

        after = await client.run_in_session("s", "#check t", env=1, check_axioms=False)
        # Every fresh process diverged on the replay: one answer, not a forged env.
        assert after.result.status != "VALID"
        assert "replaying session" in after.result.error and "otherwise" in after.result.error
        assert app.pool.stats.retries >= 1
        # The process that diverged is not reused: the pool killed it.
        await wait_until(
            lambda: not fresh & {w.pid for w in app.pool.workers if w.alive},
            30.0,
            "the diverged worker to be replaced",
        )
        session = app.pool.sessions.get("s", "peer:ipv4:127.0.0.1")  # the loopback caller owns it
        live = {w.name for w in app.pool.workers if w.alive}
        assert not any(name in live and 1 in envs for name, envs in session.realized.items())
        assert opened.env == 0
    finally:
        await stop(app, client)
