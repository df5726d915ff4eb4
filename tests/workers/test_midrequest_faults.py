"""Faults in the middle of a request: memory balloon, kill -9, hang."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from workers_support import cpu_seconds, start_service, verify, wait_until


async def test_balloon_past_the_rss_limit_is_killed_mid_request_while_others_continue():
    service = await start_service(
        workers=2, limits__max_worker_rss_mb=300, limits__memory_poll_s=0.05
    )
    pool = service.pool
    try:
        # Both workers warm on the same header first.
        await asyncio.gather(
            *(
                verify(service, f"theorem w{i} : True := trivial\n--@standin: burn=0.2\n")
                for i in range(2)
            )
        )
        # The balloon hangs after growing: only the memory watch can end it
        # before its 30 s timeout.
        balloon = asyncio.ensure_future(
            verify(
                service,
                "theorem big : True := trivial\n--@standin: grow=600\n--@standin: hang\n",
                snippet_id="big",
                timeout_s=30,
            )
        )
        others = [
            await verify(service, f"theorem t{i} : {i} = {i} := rfl\n", snippet_id=f"t{i}")
            for i in range(10)
        ]
        result = await asyncio.wait_for(balloon, 25)
        assert result.status.name == "OUT_OF_MEMORY"
        assert "300 MB limit" in result.error
        assert [r.status.name for r in others] == ["VALID"] * 10
        await wait_until(
            lambda: pool.stats.restarts["out_of_memory"] == 1, 10.0, "the OOM worker to be reaped"
        )
        after = await verify(service, "theorem after : True := trivial\n")
        assert after.status.name == "VALID"
    finally:
        await pool.close(2.0)


async def _busy_worker_pid(pool) -> int:
    await wait_until(lambda: any(w.busy for w in pool.workers), 20.0, "a busy worker")
    worker = next(w for w in pool.workers if w.busy)
    # Burning CPU means the body is being elaborated, not merely assigned.
    before = cpu_seconds(worker.pid)
    await wait_until(lambda: cpu_seconds(worker.pid) > before + 0.3, 20.0, "the body to be running")
    return worker.pid


async def test_kill_9_of_a_busy_worker_is_retried_to_success():
    service = await start_service(workers=1, pool__max_retries=1)
    pool = service.pool
    try:
        await verify(service, "theorem warm : True := trivial\n")
        job = asyncio.ensure_future(
            verify(service, "theorem slow : True := trivial\n--@standin: burn=0.8\n", timeout_s=60)
        )
        os.kill(await _busy_worker_pid(pool), signal.SIGKILL)
        result = await asyncio.wait_for(job, 60)
        assert result.status.name == "VALID"
        assert result.reuse.attempts == 2
        assert pool.stats.retries == 1
        await wait_until(
            lambda: pool.stats.restarts["crash"] == 1, 10.0, "the killed worker to be reaped"
        )
    finally:
        await pool.close(2.0)


@pytest.mark.parametrize("shared", [False, True], ids=["fresh-process", "shared-process"])
async def test_kill_9_of_a_busy_worker_without_retries(shared):
    """Crash retries off. On a process nothing else ran on, the crash is the
    job's: CRASH. On one another job ran on first, it may be that job's doing
    (pool/runner.py): the job goes again, uncharged, on a fresh process."""
    service = await start_service(workers=1, pool__max_retries=0)
    pool = service.pool
    try:
        if shared:
            await verify(service, "theorem warm : True := trivial\n")
        job = asyncio.ensure_future(
            verify(service, "theorem slow : True := trivial\n--@standin: burn=2\n", timeout_s=60)
        )
        os.kill(await _busy_worker_pid(pool), signal.SIGKILL)
        result = await asyncio.wait_for(job, 60)
        if shared:
            assert result.status.name == "VALID", result.error
            assert result.reuse.attempts == 2 and pool.stats.fresh_retries == 1
        else:
            assert result.status.name == "CRASH"
            assert "SIGKILL" in result.error
            assert pool.stats.fresh_retries == 0
        after = await verify(service, "theorem after : True := trivial\n")
        assert after.status.name == "VALID"
    finally:
        await pool.close(2.0)


async def test_a_hang_ends_at_its_own_deadline():
    """Two hangs side by side, deadlines 1 s and 2 s: each ends at its deadline
    (never before it), and the longer one lasts longer by about the difference:
    a ratio, so the kill's own cost (in both, larger on loaded cores) cancels out
    instead of being held to a wall-clock bound."""
    service = await start_service(workers=1)
    pool = service.pool
    try:
        await verify(service, "theorem warm : True := trivial\n")
        totals = {}
        for n, deadline in enumerate((1.0, 2.0), 1):
            result = await verify(
                service, "theorem h : True := trivial\n--@standin: hang\n", timeout_s=deadline
            )
            assert result.status.name == "TIMEOUT"
            totals[deadline] = result.timings.total_s  # from arrival: the timeout plus the kill
            await wait_until(
                lambda n=n: pool.stats.restarts["timeout"] == n, 10.0, "the hung worker reaped"
            )
            await verify(service, "theorem warm : True := trivial\n")  # warm again
        assert all(total >= deadline for deadline, total in totals.items()), totals
        ratio = (totals[2.0] - totals[1.0]) / (2.0 - 1.0)
        assert 0.5 <= ratio <= 1.5, totals
        after = await verify(service, "theorem after : True := trivial\n")
        assert after.status.name == "VALID"
    finally:
        await pool.close(2.0)


async def test_a_tree_over_its_memory_limit_when_time_runs_out_is_out_of_memory():
    # The memory watch polls once at the start and then not for an hour: only the
    # check made when the time runs out can see the balloon. The verdict follows
    # the process (over its limit), not whether a poll happened to see it first.
    service = await start_service(
        workers=1, limits__max_worker_rss_mb=200, limits__memory_poll_s=3600
    )
    try:
        result = await verify(
            service,
            "theorem big : True := trivial\n--@standin: grow=400\n--@standin: hang\n",
            snippet_id="big",
            timeout_s=5,
        )
        assert result.status.name == "OUT_OF_MEMORY", result.error
        assert "200 MB limit" in result.error
        hang = await verify(
            service, "theorem h : True := trivial\n--@standin: hang\n", snippet_id="h", timeout_s=1
        )
        assert hang.status.name == "TIMEOUT", hang.error  # a plain hang stays a timeout
    finally:
        await service.pool.close(2.0)
