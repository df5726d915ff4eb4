"""A cancelled command whose answer is already in the pipe: the worker is killed
for the cancellation, and counted so, not as a REPL that wrote garbage.

The race, as the reliability report's cancellation storm met it (2 of 9 restarts
counted "garbage"): one loop iteration carries both the client's cancel and the
REPL's answer. The cancel cancels the exchange's pending future at once, but the
exchange only handles it in a later step, so the reader delivers the answer to a
future that is already done. That answer is believed no more than garbage (the
worker dies either way); only its restart cause was wrong. Here the order is made
deterministic: the answer is in the pipe, then the cancel and the read run in the
same iteration, cancel first.

The accounting itself is a table without processes (tests/pool/test_pending_take.py:
an answer to a cancelled exchange is "cancelled"); this stays here because only a
real reader on a real pipe shows the race happening and its cause reaching the
worker's exit.
"""

from __future__ import annotations

import asyncio
import logging
import time

from leanrpc import repl
from leanrpc.worker import ExitCause, WorkerState
from workers_support import booted_worker

QUICK = "--@standin: burn=0.05\ntheorem t : True := trivial"


async def test_the_answer_to_a_cancelled_command_is_counted_as_the_cancellation(caplog):
    caplog.set_level(logging.DEBUG, logger="leanrpc.worker")
    worker = await booted_worker("c1")
    try:
        request = asyncio.ensure_future(worker.request(repl.command(QUICK), 30.0))
        while worker.state is not WorkerState.RUNNING:
            await asyncio.sleep(0)
        await asyncio.sleep(0)  # the command is written (the exchange awaits its answer)
        time.sleep(1.0)  # the loop is blocked: the answer and the fence land in the pipe
        # Next iteration: this callback first (queued before the select), then the reader.
        asyncio.get_running_loop().call_soon(request.cancel)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        try:
            await request
        except asyncio.CancelledError:
            pass
        await worker.stop(5.0)
        why = [r.getMessage() for r in caplog.records if " poisoned: " in r.getMessage()]
        # The reader did meet the answer after the cancel (the race happened) ...
        assert any("after its command was cancelled" in m for m in why), why
        # ... and the worker went away for the cancellation.
        assert worker.state is WorkerState.DEAD
        assert worker.exit_cause is ExitCause.CANCELLED, worker.exit_cause
    finally:
        if worker.alive:
            await worker.stop(5.0)
