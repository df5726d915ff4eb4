"""Loading a worker for a job: boot, header, preamble, as a task that outlives the job.

Owns: `Loader.start` (the load of one attempt, as its own task), `wait`
(for the load, without cancelling it), the preamble envs (kept in the worker's slot,
pool/slot.py, with Lean's messages for them) and `Prepared`, what a loaded
worker gives the job's run (pool/runner.py). May import: errors, repl,
worker, pool.job, pool.ports, pool.slot, pool.supervisor (the boots).

A job cancelled (or past its deadline) during its load is answered at once,
but the load goes on: on success the worker turns IDLE holding the header,
like any warm worker; on failure the usual handling applies (a boot failure
counts for the breaker once, a failed header kills the worker): the job's
Attempt (pool/attempt.py) holds the worker meanwhile and ends it. This room
only loads; it never kills nor releases.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, NamedTuple

from .. import repl
from ..errors import HeaderLoadError, WorkerCrashed, WorkerTimeout
from ..worker.worker import Worker, WorkerState
from .job import Job
from .ports import RunnerPort

if TYPE_CHECKING:
    from .supervisor import Supervisor

__all__ = ["Loader", "Prepared"]


class Prepared(NamedTuple):
    """What `_prepare` gives a job's run: the worker booted, its header and preamble loaded."""

    boot_s: float
    warm: bool
    header_s: float
    base_env: int
    preamble_messages: list


class Loader:
    def __init__(self, pool: RunnerPort, supervisor: Supervisor) -> None:
        self._pool = pool
        self._supervisor = supervisor
        # Boot/header loads of running jobs; close() ends them by stopping
        # their workers, so their exit cause stays SHUTDOWN.
        self.loads: set[asyncio.Task] = set()

    def start(self, job: Job, worker: Worker) -> asyncio.Future:
        """The load of one attempt, as a task of its own (the Attempt keeps it);
        a future already done when there is nothing to boot or load (no task,
        no loop round trip: the common warm case)."""
        ready = self._ready(job, worker)
        if ready is not None:
            load = asyncio.get_running_loop().create_future()
            load.set_result(ready)
            return load
        load = asyncio.create_task(self._prepare(job, worker), name=f"load-{worker.name}")
        self.loads.add(load)
        load.add_done_callback(self.loads.discard)
        return load

    async def _prepare(self, job: Job, worker: Worker) -> Prepared:
        """Boots the worker if needed, loads the job's header and preamble.

        Runs as its own task that the job never cancels: a cancelled request
        would kill the worker and throw the load away.
        """
        pool = self._pool
        boot_s = 0.0
        if worker.state is WorkerState.SPAWNING:
            started = time.monotonic()
            await self._supervisor.boot(worker)
            boot_s = time.monotonic() - started
            worker.reserve()
        warm = worker.holds(job.import_key)
        header_s = 0.0
        if not warm:
            # A worker drained meanwhile (system memory) loads as it is and
            # stops at release.
            if worker.state is WorkerState.RESERVED:
                worker.begin_loading()
            pool.stats.header_loads += 1
            if worker.header_keys:
                pool.stats.header_imports += 1  # in-process, next to the headers it holds
            # Not bounded by the job's deadline: the load outlives the job (_run).
            header_s = await worker.load_header(
                job.split.imports, job.import_key, pool.config.pool.header_timeout_s
            )
            pool.header_cost.observe(job.import_key, header_s)
            if worker.state is WorkerState.LOADING:
                worker.reserve()
        else:
            worker.use_header(job.import_key)
            pool.stats.header_hits += 1
        base_env, messages, preamble_s = await self._ensure_preamble(job, worker)
        return Prepared(boot_s, warm, header_s + preamble_s, base_env, messages)

    def _ready(self, job: Job, worker: Worker) -> Prepared | None:
        """`_prepare`'s answer when it has no REPL work to do (the worker is up
        and holds the job's header and preamble), else None."""
        if worker.state is WorkerState.SPAWNING or not worker.holds(job.import_key):
            return None
        held = self._held_preamble(job, worker)
        if held is None:
            return None
        worker.use_header(job.import_key)
        self._pool.stats.header_hits += 1
        return Prepared(0.0, True, 0.0, held[0], held[1])

    def _held_preamble(self, job: Job, worker: Worker) -> tuple[int, list] | None:
        """The env (and Lean's messages) of the job's preamble on this worker, if held."""
        header_env = worker.header_env(job.import_key)
        if header_env is None:
            return None
        if not job.split.preamble_key:
            return header_env, []
        return self._pool.slots.of(worker.name).preamble(_preamble_key(job))

    async def _ensure_preamble(self, job: Job, worker: Worker) -> tuple[int, list, float]:
        """The env of the job's open/set_option preamble on this worker.

        Lean's messages for the preamble (errors included) are data for the
        result, like the body's: an `open` of an unknown namespace makes the
        snippet INVALID, it does not make the header fail (issue 15 item 5).
        """
        held = self._held_preamble(job, worker)
        if held is not None:
            return held[0], held[1], 0.0
        header_env = worker.header_env(job.import_key)
        if header_env is None:
            raise WorkerCrashed(f"worker {worker.name} has no env for the job's header")
        key = _preamble_key(job)
        started = time.monotonic()
        response = await worker.request(
            repl.command(job.split.preamble, header_env), self._pool.config.pool.header_timeout_s
        )
        if response.env is None:
            # A REPL-level refusal (no env at all), not a Lean message.
            raise HeaderLoadError(
                f"the REPL refused the open/set_option lines: {response.message!r}"
            )
        messages = list(response.messages)
        self._pool.slots.of(worker.name).put_preamble(key, response.env, messages)
        return response.env, messages, time.monotonic() - started

    async def wait(self, job: Job, worker: Worker, load: asyncio.Future) -> None:
        """Waits for the load without cancelling it on a cancel or deadline.

        Raises WorkerTimeout when the job's deadline passes first.
        """
        if load.done():
            return
        timeout = None if job.deadline is None else max(0.0, job.deadline - time.monotonic())
        done, _pending = await asyncio.wait({load}, timeout=timeout)
        if not done:
            raise WorkerTimeout(
                f"deadline passed while worker {worker.name} was loading the header"
            )

    async def close(self) -> None:
        if self.loads:
            # Their workers are stopped, so they fail at once; cancel any straggler.
            _done, stragglers = await asyncio.wait(list(self.loads), timeout=10.0)
            for task in stragglers:
                task.cancel()
            await asyncio.gather(*stragglers, return_exceptions=True)


def _preamble_key(job: Job) -> str:
    # A worker holds several headers: a preamble env belongs to one of them.
    return f"{job.import_key}\x00{job.split.preamble_key}"
