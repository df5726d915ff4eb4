"""A worker still booting when the server shuts down is stopped quietly, and the
job that waited for it is answered.

* Its interrupted boot is not a REPL's boot failure (no WARNING "boot failed",
  no count, nothing for the circuit breaker). The reliability report's
  cancellation storm met it at every run: the replacement of a cancelled worker
  was booting when the server stopped, and the log said "boot failed ... exited
  (exit status 0)".
* The job was never answered: a failed boot requeues its job (another boot may
  work), and the requeue went into the queue that the shutdown had already
  answered and cleared. Now a requeue during shutdown answers the job "server
  is shutting down" (pool.requeue).

The process side of test_attempt_table.py's shutdown-during-boot walk (a left
load cancelled by the shutdown kills only a worker still alive): a real boot
stopped by a real shutdown, its job's one answer, the supervisor's count and log."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

import pytest

from leanrpc.errors import NotServingError
from leanrpc.worker import WorkerState
from testkit import start_service, verify, wait_until


async def test_a_boot_stopped_by_the_shutdown_is_no_boot_failure(tmp_path, caplog):
    caplog.set_level(logging.DEBUG, logger="leanrpc.pool")
    slow = tmp_path / "slow-boots"  # once it exists, every new REPL takes 30 s to start
    script = f'if [ -e "{slow}" ]; then sleep 30; fi; exec "{sys.executable}" -m leanrpc.standin'
    service = await start_service(1, repl__command=["sh", "-c", script])
    pool = service.pool
    try:
        first = pool.workers[0]
        await wait_until(lambda: first.state is WorkerState.IDLE, 30.0, "the first boot")
        slow.write_text("")
        os.kill(first.pid, signal.SIGKILL)
        await wait_until(lambda: first.state is WorkerState.DEAD, 30.0, "the first to die")
        # A job starts a replacement (workers are started on demand).
        job = asyncio.ensure_future(verify(service, "theorem t : True := trivial\n"))
        await wait_until(
            lambda: any(
                w is not first and w.state in (WorkerState.SPAWNING, WorkerState.PROBING)
                for w in pool.workers
            ),
            30.0,
            "the replacement to be booting",
        )
    finally:
        await pool.close(2.0)
    # Every accepted snippet gets exactly one answer, the shutdown's included.
    with pytest.raises(NotServingError, match="shutting down"):
        await asyncio.wait_for(job, 10.0)
    assert pool.stats.boot_failures == 0
    assert not any("boot failed" in r.getMessage() for r in caplog.records), [
        r.getMessage() for r in caplog.records
    ]
    assert any("boot stopped by the shutdown" in r.getMessage() for r in caplog.records)
