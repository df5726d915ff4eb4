"""Single-flight: identical snippets in flight at once are elaborated once."""

from __future__ import annotations

import asyncio
import collections

import pytest

from cache_support import cached_server, theorem
from leanrpc.cache import SingleFlight
from leanrpc.client import AsyncClient


async def test_32_concurrent_identical_requests_one_elaboration_across_streams_and_clients():
    code = theorem(1) + "--@standin: burn=1.0\n"
    async with cached_server(workers=2) as (app, stream_client):
        batch_client = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
        try:
            streamed, batched, *singles = await asyncio.gather(
                stream_client.verify([(f"s{i}", code) for i in range(12)]),
                batch_client.verify_batch([(f"b{i}", code) for i in range(12)]),
                *(batch_client.verify_batch([(f"u{i}", code)]) for i in range(8)),
            )
        finally:
            await batch_client.close()
        results = streamed + batched + [r for one in singles for r in one]
        assert len(results) == 32
        assert sorted(r.id for r in results) == sorted(
            [f"s{i}" for i in range(12)]
            + [f"b{i}" for i in range(12)]
            + [f"u{i}" for i in range(8)]
        )
        assert {r.status for r in results} == {"VALID"}
        assert app.pool.stats.jobs_finished == 1
        sources = collections.Counter(r.cache_source for r in results)
        assert sources[""] == 1 and sources["in-flight"] + sources["memory"] == 31
        assert len({r.original_run for r in results}) == 1


async def test_a_cancelled_leader_does_not_cancel_the_flight_for_the_others():
    flights = SingleFlight()
    started, release = asyncio.Event(), asyncio.Event()
    runs = []

    async def work():
        runs.append(1)
        started.set()
        await release.wait()
        return "verdict"

    leader = asyncio.ensure_future(flights.run("k", work))
    await started.wait()
    follower = asyncio.ensure_future(flights.run("k", work))
    await asyncio.sleep(0)
    leader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await leader
    release.set()
    assert await follower == ("verdict", True)
    assert runs == [1] and len(flights) == 0


async def test_work_nobody_waits_for_is_cancelled_and_a_newcomer_starts_afresh():
    flights = SingleFlight()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def stuck():
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    async def quick():
        return "fresh"

    callers = [asyncio.ensure_future(flights.run("k", stuck)) for _ in range(3)]
    await started.wait()
    for caller in callers:
        caller.cancel()
    await asyncio.gather(*callers, return_exceptions=True)
    assert not flights.running("k")
    assert await flights.run("k", quick) == ("fresh", False)
    await asyncio.wait_for(cancelled.wait(), 5)


async def test_an_error_reaches_every_caller_of_the_flight():
    flights = SingleFlight()
    gate = asyncio.Event()

    async def failing():
        await gate.wait()
        raise RuntimeError("boom")

    callers = [asyncio.ensure_future(flights.run("k", failing)) for _ in range(4)]
    await asyncio.sleep(0)
    gate.set()
    outcomes = await asyncio.gather(*callers, return_exceptions=True)
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    assert len(flights) == 0


async def test_a_stream_cancel_of_one_joiner_leaves_the_others_answered():
    code = theorem(2) + "--@standin: burn=1.0\n"
    async with cached_server() as (app, client):
        other = AsyncClient(f"127.0.0.1:{app.port}", max_retries=0)
        try:
            waiting = asyncio.ensure_future(other.verify_batch([("keep", code)]))
            await asyncio.sleep(0.2)
            impatient = asyncio.ensure_future(client.verify_batch([("drop", code)]))
            await asyncio.sleep(0.2)
            impatient.cancel()
            [kept] = await waiting
        finally:
            await other.close()
        assert kept.status == "VALID" and kept.id == "keep"
        assert app.pool.stats.jobs_finished == 1
