"""Dispatch: the pool's side of routing. Snapshot the live state, ask for a plan, carry it out.

Owns: the dispatcher task (woken by `poke`, never polls) and its timer; the
snapshot routing reads (worker views with their import bounds, the queued
jobs' views, `IndexFacts`: the prefix index and the chains answering
routing's questions, the cost figures, the rent book); and applying a plan:
its counters and rent first, then each decision (take the job from the
queue; reserve, import into, start, or switch a worker; launch). The rent
book (`RentBook`) is the only routing state kept between plans, and only
this room writes it. May import: errors, worker (states), pool.plan,
pool.routing, pool.ports and pool.ticket (types). A view's `job` is the
pool's `Ticket` (pool/ticket.py); its `job` the frozen request.

    poke() -> dispatcher task -> Snapshot(now, jobs, workers, facts, cost, rent)
           -> Router.plan -> Plan(decisions, wake_at, stats, rent) -> apply
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from typing import TYPE_CHECKING, Callable

from ..errors import WorkerTimeout
from ..worker.states import WorkerState
from .plan import (
    LOOKAHEAD,
    Assign,
    CostView,
    Expire,
    Import,
    JobKind,
    JobView,
    Plan,
    RentChange,
    Snapshot,
    Switch,
    View,
    WorkerView,
)
from .routing import RENT_ENTRIES, Router

if TYPE_CHECKING:
    from ..worker.worker import Worker
    from .ports import DispatchPort
    from .prefix_index import PrefixIndex

__all__ = ["Dispatcher", "IndexFacts", "RentBook"]

log = logging.getLogger("leanrpc.pool")

# Worker states as routing sees them; DEAD and FAILED are GONE.
_VIEW_OF_STATE = {
    WorkerState.SPAWNING: View.SPAWNING,
    WorkerState.PROBING: View.SPAWNING,
    WorkerState.READY: View.SPAWNING,  # booted for a job or a preload, not yet handed out
    WorkerState.LOADING: View.WARMING,
    WorkerState.IDLE: View.IDLE,
    WorkerState.RESERVED: View.BUSY,
    WorkerState.RUNNING: View.BUSY,
    WorkerState.DRAINING: View.BUSY,
    WorkerState.STOPPING: View.STOPPING,
}


class IndexFacts:
    """`PrefixFacts` read from the prefix index and the jobs' chains (sessions,
    proofs), at the moment routing asks (nothing changes during a plan)."""

    def __init__(self, index: PrefixIndex, incremental: Callable[[str], bool]) -> None:
        self._index = index
        self._incremental = incremental

    def held(self, job: JobView, worker: str) -> int:
        if job.kind is JobKind.BODY:
            return self._index.reusable_prefix(worker, job.scope, job.text)
        request = job.job.job  # the view's ticket's frozen job
        if job.kind is JobKind.CALL:
            return request.call.held_chars(worker)
        call = request.session
        built = call.session.realized.get(worker) or {}
        if not built and call.parent is not None:
            return 0
        chain = call.session.chain(call.parent)
        done = sum(len(call.session.commands[k].text or "") + 1 for k in chain if k in built)
        if self._incremental(job.profile) and (call.parent is None or call.parent in built):
            done += self._index.reusable_prefix(worker, job.scope, job.text)
        return done

    def holder(self, job: JobView) -> tuple[str, int] | None:
        return self._index.holder(job.scope, job.text)


class RentBook:
    """Seconds paid waiting per prefix (the newest RENT_ENTRIES kept), and the
    queued jobs' wait marks (forgotten when the job is answered)."""

    def __init__(self) -> None:
        self.table: collections.OrderedDict[int, float] = collections.OrderedDict()
        self.marks: dict = {}

    def apply(self, change: RentChange) -> None:
        table = self.table
        for key, seconds in change.paid:
            table[key] = table.pop(key, 0.0) + seconds
        while len(table) > RENT_ENTRIES:
            table.popitem(last=False)
        for key in change.spent:
            table.pop(key, None)
        if change.marks:
            self.marks.update(change.marks)

    def forget(self, job: JobView | None) -> None:
        if self.marks and job is not None:
            self.marks.pop(job, None)

    @property
    def charging(self) -> bool:
        """A queued job has idle time to charge at the next plan."""
        return any(mark.since is not None for mark in self.marks.values())


class Dispatcher:
    def __init__(self, pool: DispatchPort) -> None:
        self._pool = pool
        settings = pool.config.pool
        self.router = Router(
            size=settings.workers,
            max_wait_for_warm_s=settings.max_wait_for_warm_s,
            prefix_routing=settings.prefix_routing,
        )
        self.facts = IndexFacts(pool.index, pool.features.incremental)
        self.rent = RentBook()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = float("inf")

    def poke(self) -> None:
        """Something changed: plan again (soon, once, in the dispatcher task)."""
        if self._pool.closing:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(
                self._loop(), name="leanrpc-dispatch"
            )
        self._wake.set()

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        if self._timer is not None:
            self._timer.cancel()

    async def _loop(self) -> None:
        while not self._pool.closing:
            await self._wake.wait()
            self._wake.clear()
            try:
                self.dispatch_once()
            except Exception:  # pragma: no cover - a bug; keep dispatching
                log.exception("dispatch failed")

    def dispatch_once(self) -> None:
        pool = self._pool
        admission = pool.admission
        if pool.closing or not len(admission):
            return
        now = time.monotonic()
        for ticket in admission.expired(now):
            admission.remove(ticket)
            pool.fail(ticket, WorkerTimeout("deadline passed while queued"))
        if pool.retrying:
            return  # one trial boot at a time after a failure; it pokes when done
        workers = self.views()
        if not self.router.has_room(workers) and not self.rent.charging:
            return  # the plan would be empty
        cost = pool.cost
        snapshot = Snapshot(
            now,
            [ticket.view for ticket in admission.ordered(LOOKAHEAD)],
            workers,
            self.facts,
            CostView(cost.known, cost.per_char, cost.overhead_s) if cost.known else CostView(),
            pool.features.incremental_profiles,
            self.rent.table,
            self.rent.marks,
            pool.header_cost.view,
        )
        self.apply(self.router.plan(snapshot))

    def apply(self, plan: Plan) -> None:
        """Carries out a plan: counters, rent, then each decision in order."""
        pool = self._pool
        stats, counted = pool.stats, plan.stats
        stats.prefix_waits += counted.prefix_waits
        stats.prefix_wait_s += counted.prefix_wait_s
        stats.prefix_spreads += counted.prefix_spreads
        stats.header_wait_s += counted.header_wait_s
        stats.header_spreads += counted.header_spreads
        self.rent.apply(plan.rent)
        by_name = {w.name: w for w in pool.workers}
        for decision in plan.decisions:
            ticket = decision.job.job
            if isinstance(decision, Expire):
                pool.admission.remove(ticket)
                pool.fail(ticket, WorkerTimeout("deadline passed while queued"))
                continue
            pool.admission.take(ticket)
            if isinstance(decision, (Assign, Import)):
                worker = by_name[decision.worker]
                worker.reserve()  # so the next plan does not hand it out
                if isinstance(decision, Assign):
                    worker.expected_busy_s = decision.expected_s  # 0: nothing priced it
            else:
                if isinstance(decision, Switch):  # the supervisor kills (and counts)
                    pool.switch_out(by_name[decision.victim])
                worker = pool.spawn_worker(ticket.job.profile)
            pool.runner.launch(ticket, worker)
        if plan.wake_at is not None:
            self._wake_at(plan.wake_at)

    def views(self) -> list[WorkerView]:
        slots = self._pool.slots
        return [
            WorkerView(
                w.name,
                _VIEW_OF_STATE.get(w.state, View.GONE),
                w.import_key,
                w.loading_key,
                w.last_used,
                w.busy_since,
                w.expected_busy_s,
                frozenset(w.headers),
                w.profile,
                self._may_import(w),
                slots.of(w.name).attempts > 0,
            )
            for w in self._pool.workers
        ]

    def _may_import(self, worker: Worker) -> bool:
        """Under the header count, and (with a memory limit) room for one more
        header of the size its headers took on average (memory at its last release)."""
        config = self._pool.config
        held = len(worker.headers)
        if held >= config.pool.max_headers_per_worker:
            return False
        limit = config.limits.max_worker_rss_mb * 2**20
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
        self._timer = asyncio.get_running_loop().call_later(
            max(0.01, when - time.monotonic()), fire
        )
