"""`Pool.submit(job, finish_if_running=True)` (issue 42 item 1): a caller
cancelled while its job runs leaves the job to finish on a worker that lives
on; without it the cancel kills the worker mid-command. Real stand-in workers
(the kill is a real process's); the table side of the same lifecycle, a
cancel mid-command that kills, is test_attempt_table.py's."""

from __future__ import annotations

import asyncio

from leanrpc.core.headers import split_header
from leanrpc.pool import CallJob
from testkit import HEADER, start_service, wait_until


class _Slow:
    """A WorkerCall that is mid-call (awaiting) until released."""

    scope = "slow"
    text = "theorem slow : True := trivial\n"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.finished = False

    def held_chars(self, worker_name: str) -> int:
        return 0

    async def run(self, worker, base_env: int, timeout: float):
        self.started.set()
        await self.release.wait()
        self.finished = True
        return base_env


def _job(call: _Slow) -> CallJob:
    return CallJob(
        split=split_header(HEADER + "theorem x : True := trivial\n"), timeout_s=30, call=call
    )


async def _cancel_while_running(pool, call: _Slow, **kw) -> tuple[str, int]:
    caller = asyncio.ensure_future(pool.submit(_job(call), **kw))
    await asyncio.wait_for(call.started.wait(), 30)
    [worker] = [w for w in pool.workers if w.busy]
    name, pid = worker.name, worker.pid
    caller.cancel()
    await asyncio.gather(caller, return_exceptions=True)
    assert caller.cancelled()
    return name, pid


async def test_a_running_job_finishes_unread_and_its_worker_lives_on():
    service = await start_service(1)
    pool = service.pool
    try:
        call = _Slow()
        finished_before = pool.stats.jobs_finished
        name, pid = await _cancel_while_running(pool, call, finish_if_running=True)
        assert pool.stats.jobs_finished == finished_before  # still running, unread
        call.release.set()
        await wait_until(lambda: pool.stats.jobs_finished == finished_before + 1, 30, "the end")
        assert call.finished
        [worker] = [w for w in pool.workers if w.name == name]
        assert worker.pid == pid and worker.alive
        assert dict(pool.stats.restarts).get("cancelled", 0) == 0
    finally:
        await pool.close(2.0)


async def test_without_it_the_cancel_kills_the_worker_mid_call():
    service = await start_service(1)
    pool = service.pool
    try:
        call = _Slow()
        name, _pid = await _cancel_while_running(pool, call)
        await wait_until(lambda: dict(pool.stats.restarts).get("cancelled", 0) == 1, 30, "the kill")
        assert not call.finished
        assert all(w.name != name for w in pool.workers if w.alive)
    finally:
        await pool.close(2.0)
