"""What the layers above the pool get of it (issue 27 item 3): jobs by kind with
typed outcomes, a WorkerHandle for calls (never the Worker), a WorkerInfo for
state listeners, and a published snapshot for metrics. Real stand-in workers."""

from __future__ import annotations

import pytest

from leanrpc import repl
from leanrpc.core.headers import split_header
from leanrpc.errors import WorkerDiverged
from leanrpc.pool import (
    BodyJob,
    BodyOutcome,
    CallJob,
    CallOutcome,
    PoolMetrics,
    WorkerHandle,
    WorkerInfo,
)
from leanrpc.services.verify import VerifyOptions
from workers_support import HEADER, start_service


class _Probe:
    """A WorkerCall that records what it was handed and answers one command."""

    scope = "probe"
    text = "theorem probe : True := trivial\n"

    def __init__(self, diverge: bool = False) -> None:
        self.diverge = diverge
        self.handles: list = []

    def held_chars(self, worker_name: str) -> int:
        return 0

    async def run(self, worker, base_env: int, timeout: float):
        self.handles.append(worker)
        if self.diverge:
            raise WorkerDiverged("the replay answered otherwise than the first time")
        response = await worker.request(repl.command(self.text, base_env), timeout)
        return response.env


def _split():
    return split_header(HEADER + "theorem x : True := trivial\n")


async def test_each_kind_gets_its_own_outcome_and_a_call_only_a_handle():
    service = await start_service(1)
    pool = service.pool
    try:
        body = await pool.submit(BodyJob(split=_split(), timeout_s=30))
        assert type(body) is BodyOutcome and body.response.env is not None and body.attempts == 1
        probe = _Probe()
        called = await pool.submit(CallJob(split=_split(), timeout_s=30, call=probe))
        assert type(called) is CallOutcome and isinstance(called.value, int)
        [handle] = probe.handles
        assert isinstance(handle, WorkerHandle) and handle.name == called.worker
        assert (
            not hasattr(handle, "kill")
            and not hasattr(handle, "slot")
            and not hasattr(handle, "release")
            and not hasattr(handle, "state")
        )
    finally:
        await pool.close(2.0)


async def test_a_diverged_call_kills_its_worker_and_is_retried_then_failed():
    # ON_FAILURE: WorkerCrashed (WorkerDiverged is one) -> the pool kills the
    # worker and retries while max_retries allows; then the job fails with it.
    service = await start_service(1, pool__max_retries=1)
    pool = service.pool
    try:
        probe = _Probe(diverge=True)
        with pytest.raises(WorkerDiverged):
            await pool.submit(CallJob(split=_split(), timeout_s=30, call=probe))
        names = [h.name for h in probe.handles]
        assert len(names) == 2 and names[0] != names[1]  # the first worker did not serve again
        assert pool.stats.retries == 1 and pool.stats.restarts["crash"] >= 1
    finally:
        await pool.close(2.0)


async def test_listeners_get_a_worker_info_and_metrics_a_published_copy():
    service = await start_service(1)
    pool = service.pool
    seen = []
    service.add_worker_listener(lambda info, old, new: seen.append(info))
    try:
        result = await service.verify(
            "s", HEADER + "theorem y : True := trivial\n", VerifyOptions()
        )
        assert result.status.name == "VALID"
        published = pool.metrics()
        assert isinstance(published, PoolMetrics) and published.stats.jobs_finished >= 1
        [worker] = published.workers
        assert worker.name == result.reuse.worker and worker.pid == service.worker_pid(worker.name)
        assert worker.memory_bytes > 0
        published.stats.jobs_finished += 100  # a copy: the pool's own counters do not move
        assert pool.metrics(memory=False).stats.jobs_finished < published.stats.jobs_finished
        assert pool.metrics(memory=False).workers[0].memory_bytes == 0
    finally:
        await pool.close(2.0)
    assert seen and all(type(info) is WorkerInfo for info in seen)
    assert seen[-1].exit_cause is not None  # the last transition: its end, with its cause
    assert not any(hasattr(info, "kill") for info in seen)
