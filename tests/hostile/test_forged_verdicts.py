"""Issue 15 item 1 through the real Pool and VerifyService: a hostile REPL
(tests/hostile/hostile_repl.py) whose snippets leave threads that forge
frames before, during and after later requests, take over stdout with dup2(),
or steal requests (fences included) from stdin. No verdict may come back
wrong, and no forging snippet may come back VALID."""

from __future__ import annotations

import asyncio

import pytest

from hostile_support import DIRECTIVES, forging, honest, interleaved_run, start_service, verify
from leanrpc.results import Status


@pytest.mark.parametrize("directive", DIRECTIVES)
async def test_each_forgery_is_caught_and_later_answers_stay_true(directive):
    service = await start_service(workers=1)
    pool = service.pool
    try:
        good_a, _ = honest(1, True)
        bad_b, _ = honest(2, False)
        good_c, _ = honest(3, True)
        assert (await verify(service, "a", good_a)).status is Status.VALID
        forger = await verify(service, "f", forging(0, directive))
        # Give delayed threads (idle forgers, the evasive thief) time to act.
        await asyncio.sleep(0.15)
        b = await verify(service, "b", bad_b)
        c = await verify(service, "c", good_c)
        assert forger.status is not Status.VALID, forger
        assert b.status is Status.INVALID, (b.status, b.error)
        assert c.status is Status.VALID, (c.status, c.error)
        caught = pool.stats.restarts["poisoned"] + pool.stats.restarts["garbage"]
        assert caught >= 1, dict(pool.stats.restarts)
    finally:
        await pool.close(2.0)


async def test_the_next_job_does_not_pay_for_a_forger():
    """Crash retries off: the honest job after a forger fails on the forger's
    process (its leftover thread forges a frame into the next exchange). That
    failure is not charged to it: it goes again on a process nothing ran on
    and gets its own verdict. A forger that spoils its own exchange is charged
    even so: once more on a fresh process, then answered."""
    service = await start_service(workers=1, pool__max_retries=0)
    pool = service.pool
    try:
        good, _ = honest(1, True)
        assert (await verify(service, "a", good)).status is Status.VALID
        forger = await verify(service, "f", forging(0, "forge-next"))
        assert forger.status is Status.INVALID  # caught only in the next exchange
        after, _ = honest(2, True)
        result = await verify(service, "b", after)
        assert result.status is Status.VALID, (result.status, result.error)
        assert result.reuse.attempts == 2 and pool.stats.fresh_retries == 1
        self_forger = await verify(service, "s", forging(1, "forge-self"))
        assert self_forger.status is Status.CRASH, self_forger
        assert self_forger.reuse.attempts == 2 and pool.stats.fresh_retries == 2
    finally:
        await pool.close(2.0)


async def test_fence_off_is_what_lets_a_forger_through():
    """The control: with fence = "off" the same shifted forgery gives another
    snippet a wrong verdict, so the fenced tests above can fail."""
    service = await start_service(workers=1, repl__fence="off")
    pool = service.pool
    try:
        await verify(service, "f", forging(0, "forge-next"))
        wrong = 0
        for i in range(5):
            body, truth = honest(10 + i, False)
            result = await verify(service, f"b{i}", body)
            wrong += result.status is not truth
        assert wrong >= 1
    finally:
        await pool.close(2.0)


async def test_interleaved_run_has_no_wrong_verdicts():
    """CI-sized: 600 honest snippets and 18 forging ones (each directive
    twice) on 2 workers, 4 concurrent callers. The full 10,000/100 run is
    tests/hostile/run_hostile.py (figures in docs/RELIABILITY.md)."""
    service = await start_service(workers=2)
    try:
        tally = await interleaved_run(service, snippets=600, forgers=18, concurrency=4)
    finally:
        await service.pool.close(2.0)
    assert not tally.wrong, tally.wrong[:5]
    assert not tally.forger_valid, tally.forger_valid
    assert sum(tally.statuses.values()) == 600 and sum(tally.forger_statuses.values()) == 18
