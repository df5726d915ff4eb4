"""The pool: takes jobs, routes them to warm workers, answers each once.

    submit(job) -> Ticket --> Admission (fair queue) --poke()--> Dispatcher (its own task)
          Router.plan(Snapshot: job views, worker views, prefix facts, rent, now)
          -> Plan: decisions, counters, rent changes (the dispatcher applies them)
                                   |
                                   v
          Runner.launch(ticket, worker): Loader (boot? header? preamble), then the job's kind
                                   |
       release (idle or recycle) <-+--> ticket.future: Body/Session/CallOutcome, or error

    Supervisor loop: reap dead, re-warm, recycle on system memory, keep spares;
                     CircuitBreaker on boot failures

One event drives dispatch: `poke()` (a job arrived, a worker came free, died
or finished loading, a plan asked to be woken at a time). Nothing polls.

Rooms: job.py (jobs by kind, frozen; their outcomes), ticket.py (a submitted
job's pool-private run record), admission.py (the one queue
check, fair order, deadlines), plan.py + routing.py (the snapshot, and the
pure decisions on it), dispatch.py (snapshot, plan, apply), prefix_index.py
(who elaborated what), runner.py (one attempt on one worker; the failure
table), pipeline.py (body jobs of one stream pipelined on one worker),
loader.py (boot, header, preamble), supervisor.py (processes over time),
health.py (why no worker can take a job), sessions.py (session env trees),
slot.py (each worker's REPL handles), recycle.py (a released worker: idle or
recycled), report.py (what the pool says about itself), attempt.py (one attempt's hold on its worker), retry.py (the retry table), features.py (each profile's fork and Elab.async), stats.py (what
the pool publishes), ports.py (what each partner may use: the rooms below,
`PoolPort`/`PoolOwner` above). The pool owns the worker list and wires the
rooms; it imports them, config, errors, results, worker. Above the pool,
only the ports' names are used (tests/arch/test_pool_port.py).

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
times on crashes only, and once more, uncharged, when the crash came on a
process that had run another job first (pool/runner.py). Every submitted job
gets exactly one outcome.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from typing import Any, overload

from ..config import Config
from ..errors import LeanServiceError, NotServingError
from ..worker.launcher import Launcher, LaunchSpec, rlimits_from_config
from ..worker.worker import ExitCause, Worker, WorkerState
from . import pipeline
from .admission import Admission
from .canary import CanarySource
from .cost import BodyCostModel, HeaderCostModel
from .dispatch import Dispatcher
from .features import Features
from .job import BodyJob, BodyOutcome, CallJob, CallOutcome, Job, SessionJob, SessionOutcome
from .plan import routes_by_prefix
from .prefix_index import PrefixIndex
from .recycle import Recycler
from .report import PoolReport
from .runner import Runner
from .sessions import SessionRegistry
from .slot import Slots
from .stats import PoolStats, WorkerInfo
from .supervisor import Supervisor
from .ticket import Ticket

__all__ = ["Pool"]

log = logging.getLogger("leanrpc.pool")


class Pool(PoolReport):
    """The pool; above it, used only as a `PoolPort` / `PoolOwner` (ports.py)."""

    def __init__(
        self,
        config: Config,
        launcher: Launcher | None = None,
        canary_source: CanarySource | None = None,
    ) -> None:
        self.config = config
        self.launcher = launcher or Launcher()
        self.stats = PoolStats()
        self.workers: list[Worker] = []
        self.closing = False
        self._names = itertools.count(1)
        # Each profile's incrementality / Elab.async, resolved from its own REPL.
        self.features = Features(config.repl)
        self.admission = Admission(config.pool.queue_limit)
        self.prefix_index = self.index = PrefixIndex(
            config.pool.prefix_history, config.pool.prefix_history_mb
        )
        # Every REPL handle of each worker, dropped at its DEAD transition (pool/slot.py).
        self.slots = Slots(self.index)
        self.cost = BodyCostModel()
        self.header_cost = HeaderCostModel()
        self.supervisor = Supervisor(self)
        self.runner = Runner(self, self.supervisor, canary_source)  # pool/canary.py
        self.dispatcher = Dispatcher(self)
        self.sessions = SessionRegistry.from_config(config)
        self._state_listeners: list = []
        self.recycler = Recycler(self, self.supervisor, self.slots)  # release: idle or recycle
        self._supervisor_task: asyncio.Task | None = None
        # When each worker entered its current state (health: stuck workers).
        self._state_since: dict[str, float] = {}

    # -- what the pool says about itself: pool/report.py (PoolReport) ----------------

    @property
    def retrying(self) -> bool:
        """A retry boot is in flight (the dispatcher waits for it)."""
        return self.supervisor.retrying

    def routes_by_prefix(self, ticket: Ticket) -> bool:
        """Whether the ticket's worker is chosen by the work it holds (runner: reserve its text)."""
        view = ticket.view if ticket.view is not None else ticket.make_view()
        return routes_by_prefix(
            view, self.config.pool.prefix_routing, self.features.incremental(ticket.job.profile)
        )

    @property
    def loads_in_flight(self) -> int:
        """Boots and header loads still running for jobs that left or run."""
        return len(self.runner.loads)

    def add_state_listener(self, listener) -> None:
        """listener(info, old_state, new_state) on every transition; `info` is a
        WorkerInfo (name, pid, profile, exit cause), never the Worker."""
        self._state_listeners.append(listener)

    def add_recycle_hook(self, hook) -> None:
        """`await hook(handle, cause)` (a pool.slot.WorkerHandle) runs before a live worker is
        recycled, while the pool holds it (the Prover moves proof states off it); pool/recycle.py."""
        self.recycler.add_hook(hook)

    def recycle(self, worker: Worker, cause: ExitCause) -> None:
        self.recycler.recycle(worker, cause)

    # -- lifecycle ---------------------------------------------------------------

    async def start(self) -> None:
        """Starts min_warm workers and learns the verifier identity."""
        warm = max(1, min(self.config.pool.min_warm, self.size))
        boots = [self.spawn_worker() for _ in range(warm)]
        results = await asyncio.gather(
            *(self.supervisor.boot(w) for w in boots), return_exceptions=True
        )
        for worker in boots:
            if worker.state is WorkerState.READY:
                worker.release()  # booted, no job: the idle set
        errors = [r for r in results if isinstance(r, BaseException)]
        if len(errors) == len(results):
            log.error("no REPL worker could start: %s", errors[0])
        self._supervisor_task = asyncio.create_task(
            self.supervisor.run(), name="leanrpc-supervisor"
        )
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

    @overload
    async def submit(self, job: SessionJob, *, finish_if_running: bool = ...) -> SessionOutcome: ...
    @overload
    async def submit(self, job: BodyJob, *, finish_if_running: bool = ...) -> BodyOutcome: ...
    @overload
    async def submit(self, job: CallJob, *, finish_if_running: bool = ...) -> CallOutcome: ...

    async def submit(self, job: Job, *, finish_if_running: bool = False) -> Any:
        """Runs one job; its kind's outcome, or the job's error. Exactly one outcome per job.

        A caller cancelled takes a queued job out of the queue; a running one
        is cancelled too (its worker killed if the command was sent), unless
        `finish_if_running`: then it runs to its end unread (the Prover:
        killing a REPL mid-command loses every proof state it holds)."""
        self.check_admission(1)
        # The job is frozen (what the service asked for); the pool's record of it
        # is the ticket, accepted now (its queue time starts here).
        ticket = Ticket(job, asyncio.get_running_loop().create_future(), time.monotonic())
        future = ticket.future
        self.stats.jobs_submitted += 1
        self.supervisor.note_header(job.import_key, job.split.imports, job.profile)
        self.admission.push(ticket)
        self.poke()
        settled = True
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            if finish_if_running and ticket.attempt is not None and not future.done():
                settled = False  # settled when it ends
                future.add_done_callback(lambda _f, ticket=ticket: self._settle(ticket))
            else:
                self._abandon(ticket)
            raise
        finally:
            if settled:
                self._settle(ticket)

    def _settle(self, ticket: Ticket) -> None:
        """A submitted job's end, read or not."""
        future = ticket.future
        if future.done() and not future.cancelled():
            future.exception()  # retrieved: nobody else must log it
        self.stats.jobs_finished += 1
        self.dispatcher.rent.forget(ticket.view)
        # The view and the attempt point back at the ticket: dropped here, a finished
        # ticket is freed at once, not at the cycle collector's next pass (a deep
        # chain of long tactics held 231 MB that way; docs/RELIABILITY.md).
        ticket.view = ticket.attempt = None

    async def close(self, grace: float | None = None) -> None:
        """Stops dispatching, fails queued jobs, shuts every worker down."""
        grace = self.config.pool.shutdown_grace_s if grace is None else grace
        self.closing = True
        for ticket in self.admission.clear():
            self.fail(ticket, NotServingError("server is shutting down"))
        if self._supervisor_task is not None:
            self._supervisor_task.cancel()
        self.dispatcher.close()
        stopping = asyncio.gather(
            *(w.stop(grace) for w in list(self.workers)), return_exceptions=True
        )
        await self.supervisor.close()
        await stopping
        await self.runner.close()
        self.workers.clear()

    # -- dispatch (pool/dispatch.py) ------------------------------------------------

    def poke(self) -> None:
        """Something changed: plan again (soon, once, in the dispatcher task)."""
        self.dispatcher.poke()

    # -- what the runner and supervisor call back ----------------------------------

    def fail(self, ticket: Ticket, exc: BaseException) -> None:
        if isinstance(exc, LeanServiceError):
            exc.attempts = ticket.attempts  # the services read the count here, never the job
        if not ticket.future.done():
            ticket.future.set_exception(exc)

    def requeue(self, ticket: Ticket, *, fresh_process: bool = False) -> None:
        """Back to the front of the queue for another attempt (with
        `fresh_process`, on a process nothing ran on: routing sees the job as
        reuse=false); during shutdown the queue was already answered (close),
        so the job is answered here instead."""
        ticket.attempt = None
        if self.closing:
            self.fail(ticket, NotServingError("server is shutting down"))
            return
        if fresh_process and not ticket.fresh_process:
            self.dispatcher.rent.forget(ticket.view)
            ticket.ask_fresh_process()  # a new view: routing must see the current one
        self.admission.push_front(ticket)

    def take_riders(self, lead: Ticket, worker: Worker) -> list[Ticket]:
        """Queued jobs that run pipelined with `lead` on `worker`, out of the queue."""
        return pipeline.take_riders(
            self.admission, self.workers, self.config, self.cost, lead, worker
        )

    def fail_queued_not_serving(self, message: str) -> None:
        for ticket in self.admission.clear():
            self.fail(ticket, NotServingError(message))

    def release(self, worker: Worker) -> None:
        """Back to idle, or recycled (pool/recycle.py)."""
        self.recycler.release(worker)

    def switch_out(self, victim: Worker) -> None:
        """An idle worker killed so its slot serves another header (the supervisor's)."""
        self.supervisor.switch_out(victim)

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

    def _abandon(self, ticket: Ticket) -> None:
        attempt = ticket.attempt
        if self.admission.remove(ticket):
            pass
        elif attempt is not None and attempt.task and not attempt.task.done():
            # Running: cancelling the task kills its worker if the body was
            # sent (the REPL cannot abandon a command); a boot or header load
            # goes on in the background (pool/attempt.py).
            attempt.task.cancel()
        if not ticket.future.done():
            ticket.future.cancel()

    def _on_state_change(self, worker: Worker, old: WorkerState, new: WorkerState) -> None:
        self._state_since[worker.name] = time.monotonic()
        if self._state_listeners:
            info = WorkerInfo(worker.name, worker.pid, worker.profile, worker.exit_cause)
            for listener in self._state_listeners:
                listener(info, old, new)
        if new is WorkerState.DEAD:
            self.slots.drop(worker.name)  # the one place a worker's REPL handles go
            self.stats.restarts[(worker.exit_cause or ExitCause.CRASH).value] += 1
            self._state_since.pop(worker.name, None)
            self.discard_worker(worker)
            if not self.closing:
                self.supervisor.on_worker_dead(worker)
                self.poke()
