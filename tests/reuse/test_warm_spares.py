"""Warm spares: after a timeout kill the next caller still finds its header imported."""

from __future__ import annotations

import asyncio

from leanrpc.worker.worker import WorkerState
from reuse_support import standin_command, start, stop

HEADER = "import Mathlib\n\n"


def _warm_idle(app, key="import Mathlib") -> int:
    return sum(1 for w in app.pool.workers if w.state is WorkerState.IDLE and w.import_key == key)


async def _until(predicate, timeout=60.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition not reached")


async def test_timeout_kill_does_not_cost_the_next_caller_an_import():
    app, client = await start(
        workers=2,
        command=standin_command("--fork", "--import-cost", "1.5"),
        pool__warm_spares=1,
    )
    try:
        [cold] = await client.verify_batch([HEADER + "theorem a : 1 = 1 := rfl"])
        assert cold.status == "VALID" and not cold.warm_header and cold.time_header_s > 0
        # the supervisor loads a spare next to the worker that served the call
        await _until(lambda: _warm_idle(app) == 2)
        assert app.pool.stats.spares_started >= 1

        [hung] = await client.verify_batch(
            [HEADER + "theorem h : 1 = 1 := rfl\n--@standin: hang\n"], timeout_s=1.0
        )
        assert hung.status == "TIMEOUT"
        [after] = await client.verify_batch([HEADER + "theorem b : 2 = 2 := rfl"])
        assert after.status == "VALID"
        assert after.warm_header and after.time_header_s == 0.0
        # the killed worker is reaped asynchronously; the fast next call can finish first
        await _until(lambda: app.pool.stats.restarts["timeout"] == 1)
        # and the pool tops the spares up again
        await _until(lambda: _warm_idle(app) == 2)
    finally:
        await stop(app, client)


async def test_spares_follow_the_most_used_headers():
    app, client = await start(workers=3, command=standin_command("--fork"), pool__warm_spares=2)
    try:
        codes = ["import Aesop\n\ntheorem x : True := trivial"] + [
            HEADER + f"theorem t{i} : {i} = {i} := rfl" for i in range(4)
        ]
        results = await client.verify_batch(codes)
        assert all(r.status == "VALID" for r in results)
        # two spares: one per top header (Mathlib, then Aesop)
        await _until(lambda: _warm_idle(app) >= 1 and _warm_idle(app, "import Aesop") >= 1)
        assert len(app.pool.workers) <= 3
    finally:
        await stop(app, client)
