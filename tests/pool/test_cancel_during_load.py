"""A cancel or deadline during boot/header load answers the job at once but
keeps the load: the worker ends IDLE holding the header, not restarted.
A cancel during the body still kills the worker.

The process side of test_attempt_table.py's walks (LOADING -> LEFT_TO_LOAD ->
GIVEN_BACK or KILLED; RUNNING -> KILLED on a cancel): what only a real load
shows, on stand-in workers: the job answered while the import still runs,
the same process serving the next job warm, no restart counted, and no
process left when the pool closes during a kept load."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from leanrpc.core.headers import split_header
from leanrpc.services.verify import VerifyOptions
from leanrpc.worker.worker import WorkerState
from testkit import HEADER, start_service, verify, wait_until

SLOW_IMPORTS = [sys.executable, "-m", "leanrpc.standin", "--import-cost", "1.0"]
OTHER_HEADER = "import Mathlib.Tactic\n\n"


async def _slow_service(workers: int = 1):
    return await start_service(workers=workers, repl__command=list(SLOW_IMPORTS))


def _key(header: str) -> str:
    return split_header(header + "theorem k : True := trivial\n").import_key


async def _assert_warm_and_reused(service, header: str, pid: int, restarts_before: dict) -> None:
    """The worker that loaded `header` for a cancelled job serves the next one
    warm, with the same process and no restart."""
    pool = service.pool
    key = _key(header)
    await wait_until(
        lambda: any(w.state is WorkerState.IDLE and w.import_key == key for w in pool.workers),
        30.0,
        "the background header load to finish",
    )
    holder = next(w for w in pool.workers if w.import_key == key)
    assert holder.pid == pid
    result = await service.verify(
        "next", header + "theorem next : True := trivial\n", VerifyOptions(timeout_s=30)
    )
    assert result.status.name == "VALID"
    assert result.reuse.warm_header is True
    assert result.timings.header_s == 0
    assert holder.pid == pid and holder.alive
    assert dict(pool.stats.restarts) == restarts_before
    assert pool.stats.boot_failures == 0


async def test_task_cancel_during_header_load_keeps_the_worker_and_its_header():
    service = await _slow_service()
    pool = service.pool
    try:
        worker = pool.workers[0]
        pid = worker.pid
        restarts_before = dict(pool.stats.restarts)
        job = asyncio.ensure_future(verify(service, "theorem a : True := trivial\n", timeout_s=30))
        await wait_until(
            lambda: worker.state is WorkerState.LOADING, 20.0, "the header load to start"
        )
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(job, 5.0)
        # Answered while the import (1 s) is still running.
        assert worker.state is WorkerState.LOADING
        await _assert_warm_and_reused(service, HEADER, pid, restarts_before)
        assert pool.free_slots() == 0 and pool.worker_states()["idle"] == 1
    finally:
        await pool.close(2.0)


async def test_deadline_during_header_load_answers_timeout_and_keeps_the_header():
    service = await _slow_service()
    pool = service.pool
    try:
        worker = pool.workers[0]
        pid = worker.pid
        restarts_before = dict(pool.stats.restarts)
        result = await service.verify(
            "d",
            HEADER + "theorem d : True := trivial\n",
            VerifyOptions(timeout_s=30),
            deadline=time.monotonic() + 0.3,
        )
        assert result.status.name == "TIMEOUT"
        assert "loading the header" in result.error
        await _assert_warm_and_reused(service, HEADER, pid, restarts_before)
    finally:
        await pool.close(2.0)


async def test_cancel_while_booting_keeps_the_new_worker():
    service = await _slow_service(workers=2)
    pool = service.pool
    try:
        # The booted worker takes the first job; the second header needs a new REPL.
        first = asyncio.ensure_future(
            verify(service, "theorem a : True := trivial\n", timeout_s=30)
        )
        await wait_until(
            lambda: pool.workers[0].state is WorkerState.LOADING, 20.0, "the first header load"
        )
        restarts_before = dict(pool.stats.restarts)
        second = asyncio.ensure_future(
            service.verify(
                "b", OTHER_HEADER + "theorem b : True := trivial\n", VerifyOptions(timeout_s=30)
            )
        )
        await wait_until(lambda: len(pool.workers) == 2, 20.0, "a second worker to be spawned")
        booting = pool.workers[1]
        assert booting.state in (WorkerState.SPAWNING, WorkerState.PROBING)
        second.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(second, 5.0)
        assert (await asyncio.wait_for(first, 30)).status.name == "VALID"
        await wait_until(
            lambda: booting.state is WorkerState.IDLE, 30.0, "the booting worker to finish loading"
        )
        assert booting.import_key == _key(OTHER_HEADER)
        await _assert_warm_and_reused(service, OTHER_HEADER, booting.pid, restarts_before)
        assert pool.stats.header_loads == 2
    finally:
        await pool.close(2.0)


async def test_cancel_during_the_body_still_kills_the_worker():
    service = await _slow_service()
    pool = service.pool
    try:
        await verify(service, "theorem warm : True := trivial\n")
        worker = pool.workers[0]
        pid = worker.pid
        job = asyncio.ensure_future(
            verify(service, "theorem slow : True := trivial\n--@standin: hang\n", timeout_s=60)
        )
        await wait_until(lambda: worker.state is WorkerState.RUNNING, 20.0, "the body to be sent")
        await asyncio.sleep(0.2)
        job.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(job, 5.0)
        await wait_until(
            lambda: pool.stats.restarts["cancelled"] == 1, 10.0, "the cancelled worker to be reaped"
        )
        assert worker.state is WorkerState.DEAD and all(w.pid != pid for w in pool.workers)
        after = await verify(service, "theorem after : True := trivial\n", timeout_s=30)
        assert after.status.name == "VALID"
    finally:
        await pool.close(2.0)


async def test_close_during_a_kept_load_stops_it_and_leaves_no_process():
    service = await _slow_service()
    pool = service.pool
    worker = pool.workers[0]
    job = asyncio.ensure_future(verify(service, "theorem a : True := trivial\n", timeout_s=30))
    await wait_until(lambda: worker.state is WorkerState.LOADING, 20.0, "the header load to start")
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(job, 5.0)
    await asyncio.wait_for(pool.close(2.0), 30)
    assert worker.state is WorkerState.DEAD
    assert not pool.workers
    assert not pool.loads_in_flight
    assert pool.stats.restarts["cancelled"] == 0
    # The autouse fixture checks that no child process is left.
