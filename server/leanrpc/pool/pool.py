"""The pool: takes jobs, routes them to warm workers, answers each once.

    submit(job) --> Admission (fair queue) --poke()--> dispatcher task
                                                          |  plan = Router.plan(queue order, worker views, now)
                                                          v
                               Runner.launch(job, worker): boot? header? preamble, body
                                                          |
                       release (idle or recycle) <--------+--> job.future: BodyOutcome or error
                                  |
    Supervisor loop: reap dead, re-warm, recycle on system memory, keep spares;
                     CircuitBreaker on boot failures

One event drives dispatch: `poke()` (a job arrived, a worker came free, died
or finished loading, a plan asked to be woken at a time). Nothing polls.

Rooms: admission.py (the one queue check, fair order, deadlines), routing.py
(pure decisions), prefix_index.py (who elaborated what), runner.py (one
attempt on one worker), supervisor.py (processes over time), sessions.py
(session env trees), features.py (each profile's fork and Elab.async). The
pool owns the worker list and wires the rooms; it imports them, config, errors, results, worker.

The verifier identity learnt at the first boot of each REPL profile is
reported with every result; a result cache must include
`VerifierIdentity.cache_key` in its key (envs and verdicts of different
toolchains never mix). Profiles (`[repl.<name>]`) share the pool's slots by
demand; a worker runs one profile for life and a job's header key names its
profile, so the pool's header reuse never mixes toolchains either.

A worker keeps the env of every header it imported (up to
`pool.max_headers_per_worker`, and while its memory allows another): a job
of a new header runs on an idle worker that imports it in-process. A header
switch (a new process) happens only when no idle worker may import.

A body always runs on the env of its own header and preamble, never on the
env left by another request. A worker that timed out, crashed, printed
garbage, passed its memory limit or was cancelled mid-request is killed and
replaced (re-warmed with its header); the job is retried up to `max_retries`
times on crashes only. Every submitted job gets exactly one outcome.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import time

from ..config import Config
from ..errors import NotServingError, WorkerTimeout
from ..results import VerifierIdentity
from ..worker.launcher import LaunchSpec, Launcher, rlimits_from_config
from ..worker.worker import ExitCause, Worker, WorkerState
from .admission import Admission
from .cost import BodyCostModel
from .features import Features
from .job import BodyOutcome, Job
from .prefix_index import PrefixIndex
from .slot import Slots, WorkerHandle
from .routing import LOOKAHEAD, Assign, Expire, Import, Router, Switch, View, WorkerView
from .runner import Runner
from .sessions import SessionRegistry
from .stats import PoolSnapshot, PoolStats
from .supervisor import Supervisor

__all__ = ["BodyOutcome", "Job", "Pool", "PoolSnapshot", "PoolStats"]

log = logging.getLogger("leanrpc.pool")

# Worker states as routing sees them; DEAD and FAILED are GONE.
_VIEW_OF_STATE = {
    WorkerState.SPAWNING: View.SPAWNING,
    WorkerState.PROBING: View.SPAWNING,
    WorkerState.READY: View.SPAWNING,   # booted for a job or a preload, not yet handed out
    WorkerState.LOADING: View.WARMING,
    WorkerState.IDLE: View.IDLE,
    WorkerState.RESERVED: View.BUSY,
    WorkerState.RUNNING: View.BUSY,
    WorkerState.DRAINING: View.BUSY,
    WorkerState.STOPPING: View.STOPPING,
}


class Pool:
    def __init__(self, config: Config, launcher: Launcher | None = None) -> None:
        self.config = config
        self.launcher = launcher or Launcher()
        self.stats = PoolStats()
        self.workers: list[Worker] = []
        self.closing = False
        self._names = itertools.count(1)
        # Each profile's incrementality / Elab.async, resolved from its own REPL.
        self.features = Features(config.repl)
        self.admission = Admission(config.pool.queue_limit)
        self.prefix_index = self.index = PrefixIndex(config.pool.prefix_history)
        # Every REPL handle of each worker, dropped at its DEAD transition (pool/slot.py).
        self.slots = Slots(self.index)
        self.cost = BodyCostModel()
        self.router = Router(
            size=config.pool.workers,
            index=self.index,
            cost=self.cost,
            max_wait_for_warm_s=config.pool.max_wait_for_warm_s,
            prefix_routing=config.pool.prefix_routing,
            incremental=self.features.incremental,
            stats=self.stats,
        )
        self.runner = Runner(self)
        self.supervisor = Supervisor(self)
        self.sessions = SessionRegistry.from_config(config)
        self._state_listeners: list = []
        self._recycle_hooks: list = []
        self._wake = asyncio.Event()
        self._dispatcher: asyncio.Task | None = None
        self._supervisor_task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")
        # When each worker entered its current state (health: stuck workers).
        self._state_since: dict[str, float] = {}

    # -- what the pool says about itself -----------------------------------------

    @property
    def size(self) -> int:
        return self.config.pool.workers

    @property
    def identity(self) -> VerifierIdentity | None:
        return self.supervisor.identity

    @property
    def incrementality(self) -> bool:
        """The default profile's (each profile has its own: `features`)."""
        return self.features.of("").incrementality

    @property
    def elab_async(self) -> bool:
        return self.features.of("").elab_async

    @property
    def queue_depth(self) -> int:
        return len(self.admission)

    def worker_states(self) -> dict[str, int]:
        counts = collections.Counter(w.state.value for w in self.workers)
        return {state.value: counts.get(state.value, 0) for state in WorkerState}

    @property
    def serving(self) -> bool:
        return not self.not_serving_reason

    @property
    def not_serving_reason(self) -> str:
        if self.closing:
            return "shutting down"
        if not self.supervisor.breaker.allow():
            return self.supervisor.breaker.reason
        return self.supervisor.boot_reason() or self._no_worker_reason()

    def _no_worker_reason(self) -> str:
        """Why no worker can take a job ("" when one can): every slot is
        held by a worker stuck stopping, and no new one may start."""
        if self.free_slots() > 0:
            return ""
        now = time.monotonic()
        stuck = []
        for worker in self.workers:
            since = now - self._state_since.get(worker.name, now)
            if worker.state is WorkerState.STOPPING and since >= self.config.pool.stuck_after_s:
                stuck.append(f"{worker.name} stuck stopping for {since:.0f} s")
            elif worker.state is WorkerState.STOPPING or worker.alive:
                return ""
        if not stuck:
            return ""
        return f"no worker can take a job: {'; '.join(stuck)}"

    def identity_of(self, profile: str) -> VerifierIdentity | None:
        """The identity of a profile's REPL ("" = default; None before its first boot)."""
        return self.supervisor.identities.get(profile)

    def profile_identities(self) -> dict:
        """Each configured profile ("" = default) and its identity, if known."""
        return {name: self.supervisor.identities.get(name) for name in self.config.repl.profile_names}

    def check_profile(self, name: str) -> None:
        """ConfigError for an unknown profile (the caller maps it to bad input)."""
        self.config.repl.profile(name)

    def snapshot(self) -> PoolSnapshot:
        return PoolSnapshot(
            size=self.size,
            worker_states=self.worker_states(),
            queue_depth=self.queue_depth,
            queue_limit=self.admission.queue_limit,
            serving=self.serving,
            not_serving_reason=self.not_serving_reason,
            identity=self.identity,
            profiles=self.profile_identities(),
        )

    def free_slots(self) -> int:
        # A stopping worker still holds its process, so it still takes a slot.
        return self.size - sum(1 for w in self.workers if w.alive or w.state is WorkerState.STOPPING)

    @property
    def loads_in_flight(self) -> int:
        """Boots and header loads still running for jobs that left or run."""
        return len(self.runner.loads)

    def add_state_listener(self, listener) -> None:
        """listener(worker, old_state, new_state), called on every transition."""
        self._state_listeners.append(listener)

    def add_recycle_hook(self, hook) -> None:
        """`await hook(handle, cause)` (a pool.slot.WorkerHandle) runs before a live worker is recycled, while the pool holds it
        (the Prover moves proof states off it); it bounds its own time. Errors are logged."""
        self._recycle_hooks.append(hook)

    def recycle(self, worker: Worker, cause: ExitCause) -> None:
        if not self._recycle_hooks or self.closing or not worker.alive:
            return self.supervisor.retire(worker, cause)
        if worker.state in (WorkerState.IDLE, WorkerState.READY):
            worker.reserve()  # held while the hooks run: routing skips it
        self.supervisor.schedule(self._recycle_after_hooks(worker, cause), name=f"recycle-{worker.name}")

    async def _recycle_after_hooks(self, worker: Worker, cause: ExitCause) -> None:
        try:
            for hook in self._recycle_hooks:
                try:
                    await hook(WorkerHandle(worker, self.slots.of(worker.name)), cause)
                except Exception:  # noqa: BLE001 - a hook never keeps a worker alive
                    log.exception("recycle hook failed on %s", worker.name)
        finally:
            self.supervisor.retire(worker, cause)
            self.poke()

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Starts min_warm workers and learns the verifier identity."""
        warm = max(1, min(self.config.pool.min_warm, self.size))
        boots = [self.spawn_worker() for _ in range(warm)]
        results = await asyncio.gather(*(self.supervisor.boot(w) for w in boots), return_exceptions=True)
        for worker in boots:
            if worker.state is WorkerState.READY:
                worker.release()  # booted, no job: the idle set
        errors = [r for r in results if isinstance(r, BaseException)]
        if len(errors) == len(results):
            log.error("no REPL worker could start: %s", errors[0])
        self._supervisor_task = asyncio.create_task(self.supervisor.run(), name="leanrpc-supervisor")
        for header in self.config.pool.warm_headers:
            self.supervisor.preload_header(header)

    def check_admission(self, count: int = 1) -> None:
        """THE admission check: raises NotServingError or OverloadedError
        unless `count` more jobs may enter now."""
        if self.closing:
            raise NotServingError("server is shutting down")
        if not self.supervisor.breaker.allow():
            raise NotServingError(f"no REPL worker can start: {self.supervisor.breaker.reason}")
        busy = sum(1 for w in self.workers if w.busy)
        self.admission.check(count, busy_workers=busy)

    async def submit(self, job: Job) -> BodyOutcome:
        """Runs one job; raises the job's error. Exactly one outcome per job."""
        self.check_admission(1)
        job.future = asyncio.get_running_loop().create_future()
        job.enqueued_at = time.monotonic()
        self.stats.jobs_submitted += 1
        self.supervisor.note_header(job.import_key, job.split.imports, job.profile)
        self.admission.push(job)
        self.poke()
        try:
            return await asyncio.shield(job.future)
        except asyncio.CancelledError:
            self._abandon(job)
            raise
        finally:
            self.stats.jobs_finished += 1

    async def close(self, grace: float | None = None) -> None:
        """Stops dispatching, fails queued jobs, shuts every worker down."""
        grace = self.config.pool.shutdown_grace_s if grace is None else grace
        self.closing = True
        for job in self.admission.clear():
            self.fail(job, NotServingError("server is shutting down"))
        for task in (self._supervisor_task, self._dispatcher):
            if task is not None:
                task.cancel()
        if self._timer is not None:
            self._timer.cancel()
        stopping = asyncio.gather(*(w.stop(grace) for w in list(self.workers)), return_exceptions=True)
        await self.supervisor.close()
        await stopping
        await self.runner.close()
        self.workers.clear()

    # -- dispatch ----------------------------------------------------------------

    def poke(self) -> None:
        """Something changed: plan again (soon, once, in the dispatcher task)."""
        if self.closing:
            return
        if self._dispatcher is None or self._dispatcher.done():
            self._dispatcher = asyncio.get_running_loop().create_task(self._dispatch_loop(), name="leanrpc-dispatch")
        self._wake.set()

    async def _dispatch_loop(self) -> None:
        while not self.closing:
            await self._wake.wait()
            self._wake.clear()
            try:
                self._dispatch_once()
            except Exception:  # pragma: no cover - a bug; keep dispatching
                log.exception("dispatch failed")

    def _dispatch_once(self) -> None:
        if self.closing or not len(self.admission):
            return
        now = time.monotonic()
        for job in self.admission.expired(now):
            self.admission.remove(job)
            self.fail(job, WorkerTimeout("deadline passed while queued"))
        if self.supervisor.retrying:
            return  # one trial boot at a time after a failure; it pokes when done
        plan = self.router.plan(self.admission.ordered(LOOKAHEAD), self._views(), now)
        by_name = {w.name: w for w in self.workers}
        for decision in plan.decisions:
            job = decision.job
            if isinstance(decision, Expire):
                self.admission.remove(job)
                self.fail(job, WorkerTimeout("deadline passed while queued"))
                continue
            self.admission.take(job)
            if isinstance(decision, (Assign, Import)):
                worker = by_name[decision.worker]
                worker.reserve()  # so the next plan does not hand it out
                if isinstance(decision, Assign) and self.cost.known:
                    worker.expected_busy_s = decision.expected_s
            else:
                if isinstance(decision, Switch):
                    self.stats.header_switches += 1
                    by_name[decision.victim].kill(ExitCause.HEADER_SWITCH)
                worker = self.spawn_worker(job.profile)
            self.runner.launch(job, worker)
        if plan.wake_at is not None:
            self._wake_at(plan.wake_at)

    def _views(self) -> list[WorkerView]:
        return [
            WorkerView(
                name=w.name,
                state=_VIEW_OF_STATE.get(w.state, View.GONE),
                import_key=w.import_key,
                loading_key=w.loading_key,
                last_used=w.last_used,
                busy_since=w.busy_since,
                expected_busy_s=w.expected_busy_s,
                header_keys=frozenset(w.header_keys),
                profile=w.profile,
                can_import=self._may_import(w),
                served=w.requests_served > 0,
            )
            for w in self.workers
        ]

    def _may_import(self, worker: Worker) -> bool:
        """Under the header count, and (with a memory limit) room for one more
        header of the size its headers took on average (memory at its last release)."""
        held = len(worker.header_keys)
        if held >= self.config.pool.max_headers_per_worker:
            return False
        limit = self.config.limits.max_worker_rss_mb * 2**20
        if limit <= 0 or not held or not worker.rss_at_release:
            return True
        return worker.rss_at_release * (held + 1) / held <= limit

    def _wake_at(self, when: float) -> None:
        if self._timer is not None and self._timer_at <= when:
            return
        if self._timer is not None:
            self._timer.cancel()

        def fire() -> None:
            self._timer, self._timer_at = None, float("inf")
            self.poke()

        self._timer_at = when
        self._timer = asyncio.get_running_loop().call_later(max(0.01, when - time.monotonic()), fire)

    # -- what the runner and supervisor call back ----------------------------------

    def fail(self, job: Job, exc: BaseException) -> None:
        if job.future is not None and not job.future.done():
            job.future.set_exception(exc)

    def requeue(self, job: Job) -> None:
        job.task = None
        job.load = None
        self.admission.push_front(job)

    def fail_queued_not_serving(self, message: str) -> None:
        for job in self.admission.clear():
            self.fail(job, NotServingError(message))

    def release(self, worker: Worker) -> None:
        """Decides at release time: back to idle, or recycle."""
        if not worker.reserved:
            return
        limits = self.config.limits
        reason = worker.recycle_reason
        if reason is None and limits.max_requests_per_worker and worker.requests_served >= limits.max_requests_per_worker:
            reason = ExitCause.MAX_REQUESTS
        if reason is None and limits.max_worker_rss_mb > 0:
            worker.rss_at_release = worker.memory_at_release()
            if worker.rss_at_release > limits.max_worker_rss_mb * 2**20:
                reason = ExitCause.OUT_OF_MEMORY
        if reason is not None or self.closing:
            self.recycle(worker, reason or ExitCause.SHUTDOWN)  # shutdown: no hooks
        else:
            worker.release()

    def discard_worker(self, worker: Worker) -> None:
        """Drop a dead worker from the list (the one place that removes from it)."""
        if worker in self.workers:
            self.workers.remove(worker)

    def spawn_worker(self, profile: str = "") -> Worker:
        name = f"w{next(self._names)}"
        repl_config = self.config.repl.profile(profile)
        spec = LaunchSpec(
            argv=list(repl_config.command),
            cwd=repl_config.cwd,
            env=dict(repl_config.env),
            rlimits=rlimits_from_config(self.config.limits),
        )
        worker = Worker(
            name,
            spec,
            self.launcher,
            self.config.limits,
            on_state_change=self._on_state_change,
            fence=self.config.repl,
            profile=profile,
            headers=self.slots.open(name).headers,
        )
        self.workers.append(worker)
        return worker

    def _abandon(self, job: Job) -> None:
        if self.admission.remove(job):
            pass
        elif job.task is not None and not job.task.done():
            # Running: cancelling the task kills its worker if the body was
            # sent (the REPL cannot abandon a command); a boot or header load
            # goes on in the background (see runner).
            job.task.cancel()
        if job.future is not None and not job.future.done():
            job.future.cancel()

    def _on_state_change(self, worker: Worker, old: WorkerState, new: WorkerState) -> None:
        self._state_since[worker.name] = time.monotonic()
        for listener in self._state_listeners:
            listener(worker, old, new)
        if new is WorkerState.DEAD:
            self.slots.drop(worker.name)  # the one place a worker's REPL handles go
            self.stats.restarts[(worker.exit_cause or ExitCause.CRASH).value] += 1
            self._state_since.pop(worker.name, None)
            self.discard_worker(worker)
            if not self.closing:
                self.supervisor.on_worker_dead(worker)
                self.poke()
