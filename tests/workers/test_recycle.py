"""Recycling: system memory pressure (injected measurement) and max requests per worker."""

from __future__ import annotations

import asyncio
import types

from leanrpc.pool import supervisor as pool_module  # samples system memory
from leanrpc.worker.worker import WorkerState
from workers_support import start_service, verify, wait_until


class FakeMemory:
    """Stands in for psutil.virtual_memory(); only `.percent` is read."""

    def __init__(self, percent: float) -> None:
        self.percent = percent

    def __call__(self):
        return types.SimpleNamespace(percent=self.percent)


async def test_system_memory_pressure_recycles_an_idle_worker(monkeypatch):
    memory = FakeMemory(40.0)
    monkeypatch.setattr(pool_module.psutil, "virtual_memory", memory)
    service = await start_service(workers=2, limits__max_system_memory_percent=90.0)
    pool = service.pool
    try:
        first = await verify(service, "theorem a : True := trivial\n")
        assert first.status.name == "VALID"
        victim = next(w for w in pool.workers if w.name == first.reuse.worker)
        assert pool.stats.restarts["system_memory"] == 0

        memory.percent = 95.0
        await wait_until(
            lambda: pool.stats.restarts["system_memory"] >= 1, 10.0, "a system-memory recycle"
        )
        memory.percent = 40.0
        assert victim.state is WorkerState.DEAD
        assert victim.pid not in {w.pid for w in pool.workers}

        # Serving goes on with a fresh process.
        again = await verify(service, "theorem b : True := trivial\n")
        assert again.status.name == "VALID"
        assert again.reuse.worker != first.reuse.worker
    finally:
        await service.pool.close(2.0)


async def test_system_memory_pressure_marks_a_busy_worker_and_recycles_it_after_its_answer(
    monkeypatch,
):
    memory = FakeMemory(40.0)
    monkeypatch.setattr(pool_module.psutil, "virtual_memory", memory)
    service = await start_service(workers=1, limits__max_system_memory_percent=90.0)
    pool = service.pool
    try:
        await verify(service, "theorem a : True := trivial\n")
        # A slow body keeps the only worker busy while pressure appears.
        slow = asyncio.ensure_future(
            verify(service, "theorem b : True := trivial\n--@standin: burn=1.5\n")
        )
        await wait_until(lambda: any(w.busy for w in pool.workers), 10.0, "the worker to be busy")
        busy = next(w for w in pool.workers if w.busy)
        memory.percent = 95.0
        await wait_until(
            lambda: busy.recycle_reason is not None, 10.0, "the busy worker to be marked"
        )
        memory.percent = 40.0
        result = await slow
        # The answer stands; the process is retired right after it.
        assert result.status.name == "VALID"
        await wait_until(
            lambda: pool.stats.restarts["system_memory"] == 1, 10.0, "the marked worker to retire"
        )
        assert busy.state is WorkerState.DEAD
    finally:
        await service.pool.close(2.0)


async def test_max_requests_per_worker_recycles_and_loses_nothing():
    service = await start_service(workers=1, limits__max_requests_per_worker=3)
    pool = service.pool
    try:
        results = [
            await verify(service, f"theorem t{i} : {i} = {i} := rfl\n", snippet_id=f"s{i}")
            for i in range(10)
        ]
        assert [r.status.name for r in results] == ["VALID"] * 10
        served_by = [r.reuse.worker for r in results]
        # Three bodies per process, then a new one: w1 w1 w1 wX wX wX ...
        runs = [served_by[i : i + 3] for i in range(0, 10, 3)]
        assert all(len(set(run)) == 1 for run in runs), served_by
        assert len(set(served_by)) == 4, served_by
        await wait_until(
            lambda: pool.stats.restarts["max_requests"] == 3, 10.0, "three max-request recycles"
        )
        assert all(w.requests_served <= 3 for w in pool.workers)
    finally:
        await service.pool.close(2.0)
