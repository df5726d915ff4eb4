"""Issue 14 item 4: a worker killed by a signal is reported with the signal's
name every time, whichever arrives first: stdout EOF, the pidfd, or our next
request. 100 kill -9s mid-request, plus kills of idle workers."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from leanrpc import repl
from leanrpc.errors import WorkerCrashed
from leanrpc.worker import ExitCause, Worker, WorkerState
from workers_support import booted_worker

HANG = "--@standin: hang\ntheorem t : True := trivial"


async def _kill_mid_request(index: int) -> str:
    worker = await booted_worker(f"k{index}")
    request = asyncio.ensure_future(worker.request(repl.command(HANG), 60.0))
    # Vary the moment: right after sending, or once the REPL is surely inside.
    await asyncio.sleep(0 if index % 3 == 0 else 0.001 * (index % 7))
    while worker.state is not WorkerState.RUNNING:
        await asyncio.sleep(0)
    os.kill(worker.pid, signal.SIGKILL)
    with pytest.raises(WorkerCrashed) as caught:
        await request
    await worker.stop(5.0)
    assert worker.state is WorkerState.DEAD and worker.exit_cause is ExitCause.CRASH
    return caught.value.message


async def test_kill_9_mid_request_always_names_sigkill():
    messages: list[str] = []
    batch = 4
    for start in range(0, 100, batch):
        messages += await asyncio.gather(
            *(_kill_mid_request(i) for i in range(start, start + batch))
        )
    unnamed = [m for m in messages if "SIGKILL" not in m]
    assert len(messages) == 100 and not unnamed, unnamed[:3]


@pytest.mark.parametrize("wait_for_eof", [False, True])
async def test_kill_9_of_an_idle_worker_is_named_at_the_next_request(wait_for_eof):
    for index in range(10):
        worker = await booted_worker(f"i{index}")
        os.kill(worker.pid, signal.SIGKILL)
        if wait_for_eof:
            await asyncio.wait_for(_dead(worker), 10)
        with pytest.raises(WorkerCrashed, match="SIGKILL"):
            await worker.request(repl.command("theorem t : True := trivial"), 10.0)
        await worker.stop(5.0)
        assert worker.state is WorkerState.DEAD


async def _dead(worker: Worker) -> None:
    while worker.state is not WorkerState.DEAD:
        await asyncio.sleep(0.005)
