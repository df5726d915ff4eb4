"""The address-space rlimit ends in OUT_OF_MEMORY; a lost worker is re-warmed."""

from __future__ import annotations

import sys

from leanrpc.services.verify import VerifyOptions
from leanrpc.worker.worker import WorkerState
from workers_support import HEADER, start_service, verify, wait_until


async def test_address_space_limit_is_out_of_memory_not_a_retried_crash():
    service = await start_service(workers=1, limits__address_space_mb=1500, pool__max_retries=1)
    pool = service.pool
    try:
        assert (await verify(service, "theorem a : True := trivial\n")).status.name == "VALID"
        # 3 GB cannot fit under a 1.5 GB RLIMIT_AS: the allocation fails.
        result = await verify(
            service, "theorem big : True := trivial\n--@standin: grow=3000\n", timeout_s=30
        )
        assert result.status.name == "OUT_OF_MEMORY"
        assert "ran out of memory" in result.error and "MemoryError" in result.error
        assert (
            result.reuse.attempts == 1 and pool.stats.retries == 0
        )  # a deterministic OOM is not retried
        await wait_until(
            lambda: pool.stats.restarts["out_of_memory"] == 1, 10.0, "the worker to be reaped"
        )
        assert pool.stats.restarts["crash"] == 0
        assert (await verify(service, "theorem b : True := trivial\n")).status.name == "VALID"
    finally:
        await pool.close(2.0)


async def test_worker_killed_on_timeout_is_replaced_by_one_holding_its_header():
    standin = [sys.executable, "-m", "leanrpc.standin", "--import-cost", "0.5"]
    service = await start_service(workers=1, repl__command=standin)
    pool = service.pool
    try:
        first = await verify(service, "theorem a : True := trivial\n")
        assert first.status.name == "VALID" and first.timings.header_s >= 0.4
        [worker] = [w for w in pool.workers if w.import_key is not None]
        key, old_pid = worker.import_key, worker.pid
        hung = await verify(
            service, "theorem h : True := trivial\n--@standin: hang\n", timeout_s=1.0
        )
        assert hung.status.name == "TIMEOUT"
        # Without any request, the pool boots a replacement and loads the header.
        await wait_until(
            lambda: any(
                w.state is WorkerState.IDLE and w.import_key == key and w.pid != old_pid
                for w in pool.workers
            ),
            30.0,
            "a re-warmed replacement",
        )
        after = await service.verify(
            "after", HEADER + "theorem c : True := trivial\n", VerifyOptions()
        )
        assert after.status.name == "VALID"
        assert after.reuse.warm_header and after.timings.header_s == 0.0
    finally:
        await pool.close(2.0)
