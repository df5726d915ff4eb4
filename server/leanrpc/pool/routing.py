"""Routing: which queued job runs where, as a pure function of a snapshot.

Owns: `Router.plan(snapshot) -> Plan`, the rules below, and when a job
waiting for a busy worker that holds a longer prefix or its header has paid
enough "rent" (ski rental; the book's accounting is pool/rent.py). May
import: pool.plan and pool.rent only. No processes, no clock reads, no
asyncio, no state between plans: the pool takes a snapshot (pool/plan.py:
job and worker views, the prefix facts, the cost figures, the rent book,
now), asks for a plan, and carries it out, counters and rent included
(pool/dispatch.py). A plan never changes its inputs. Tests read like a table
of situations and decisions (tests/pool/test_routing_plan.py).
Why one room: the rules are one ordered pass over one snapshot, each reading
what the rules before it took (idle workers, the holders, the rent); split,
that pass state would be threaded through every piece.

Rules, in order, for the idle workers and the queued jobs (the snapshot's
jobs are the look-ahead window: at most LOOKAHEAD of the fair order):
  0. WorkerCall jobs (proof states) go first to an idle worker that already
     holds their state (no busy worker holding more), out of fair order
     while the oldest job has waited less than max_wait_for_warm_s: a
     rebuild elsewhere would be extra REPL work while every worker has work
     of its own;
  1. an idle worker already holding the job's import header, preferring the
     one that elaborated the longest prefix of its text before (or built its
     session env). When a *busy* worker holds a longer prefix and the
     measured cost of the extra text is more than the expected wait for it,
     the job waits for that worker instead (bounded by max_wait_for_warm_s,
     and by the rent earlier jobs paid for that prefix: ski rental). Without
     prefix routing: the most recently used, other than the job's
     `avoid_worker` while another is idle (the Prover's whole-proof check);
  2. a fresh worker that holds no header yet, or a free slot to start one;
  3. only for the first job that does not wait: when no worker holds its
     header, an idle worker of the job's profile that may hold one more
     header imports it in-process (the cheapest import: fewest headers held,
     then least recently used). A REPL process keeps the envs of every header
     it imported, so nothing is lost. When a busy worker holds it, the idle
     time spent waiting for that holder is the header's rent: once it adds
     up to one import of that header as measured (Snapshot.import_s), the
     idle worker imports it (ski rental: a rarely used header never pays
     more than twice its import; a busy one stops leaving a worker idle
     after one import's worth), and at the latest once the job has waited
     max_wait_for_warm_s;
  4. only when no idle worker may import (count or memory bound reached, or
     another profile's), the least recently used idle worker is replaced
     (a header switch: a new process).

Profiles (several toolchains in one server): a job's `import_key` names its
profile, a worker runs one profile for life, and the slots are shared: a
Start or Switch starts a worker of the job's profile.
"""

from __future__ import annotations

import collections

from .plan import (
    LOOKAHEAD,
    Assign,
    Expire,
    Import,
    JobKind,
    JobView,
    Mark,
    Plan,
    Snapshot,
    Start,
    Switch,
    View,
    WorkerView,
    routes_by_prefix,
)
from .rent import RENT_ENTRIES, PlanRent, header_key

__all__ = ["LOOKAHEAD", "RENT_ENTRIES", "Router"]

# Looked up once: a plan tests every job in the window against them.
_CALL, _BODY = JobKind.CALL, JobKind.BODY


class Router:
    """Decides; never acts, keeps nothing between plans."""

    def __init__(
        self, *, size: int, max_wait_for_warm_s: float = 2.0, prefix_routing: bool = True
    ) -> None:
        self.size = size
        self.max_wait_for_warm_s = max_wait_for_warm_s
        self.prefix_routing = prefix_routing

    def plan(self, snapshot: Snapshot) -> Plan:
        """Decisions for the snapshot's jobs (in fair order) on its workers."""
        return _Pass(self, snapshot).run()

    def has_room(self, workers) -> bool:
        """Whether a plan could place a job: an idle worker or a free slot.
        Without either a plan decides nothing (queued deadlines aside) and
        changes no rent unless a job has a wait mark to charge."""
        held = 0
        for worker in workers:
            if worker.state is View.IDLE:
                return True
            held += worker.state is not View.GONE
        return self.size - held > 0


class _Pass:
    """One plan's working state; the snapshot is read, never written."""

    def __init__(self, router: Router, snapshot: Snapshot) -> None:
        self.r = router
        self.s = snapshot
        self.now = snapshot.now
        self.facts = snapshot.facts
        self.cost = snapshot.cost
        self.plan = Plan()
        # The workers as this pass changes them (frozen views, replaced on change).
        self.views: dict[str, WorkerView] = {w.name: w for w in snapshot.workers}
        # The rent book as this plan changes it (pool/rent.py).
        self.book = PlanRent(snapshot, self.plan)

    def run(self) -> Plan:
        plan, now = self.plan, self.now
        pending: list[JobView] = []
        for job in self.s.jobs:
            if job.deadline is not None and job.deadline <= now:
                plan.decisions.append(Expire(job))
            else:
                pending.append(job)
        self.book.accrue(pending, now)
        started = 0
        views = self.views
        while pending:
            idle = [w for w in views.values() if w.state is View.IDLE]
            starting = started + sum(1 for w in views.values() if w.state is View.SPAWNING)
            free_slots = self.r.size - started - sum(1 for w in views.values() if w.holds_slot)
            if not idle and free_slots <= 0:
                break
            waiting_on: collections.Counter = collections.Counter()
            if self._assign_warm(pending, idle, waiting_on):
                continue
            head = self._first_not_waiting(pending, waiting_on)
            if head is None:
                self._wake_for_oldest(pending)
                break
            # reuse=false (the proto's promise): a process nothing ran on
            # yet, else a new one; never an import into a used process.
            fresh = [
                w
                for w in idle
                if w.fresh and w.profile == head.profile and (head.reuse or not w.served)
            ]
            if fresh:
                pending.remove(head)
                self._assign(head, fresh[0])
                continue
            if head.fresh_retry and self._clean_worker_coming(head):
                break  # the pool's replacement: no job has run on it
            if free_slots > 0:
                if head.reuse and starting and self._someone_will_hold(head.import_key):
                    break
                pending.remove(head)
                plan.decisions.append(Start(head))
                started += 1
                continue
            importers = (
                [w for w in idle if w.can_import and w.profile == head.profile]
                if head.reuse
                else []
            )
            if importers and self._may_import(head):
                worker = min(importers, key=lambda w: (len(w.header_keys), w.last_used))
                pending.remove(head)
                views[worker.name] = worker.as_left(
                    View.BUSY, now, worker.expected_busy_s, head.import_key
                )
                plan.decisions.append(Import(head, worker.name))
                continue
            if idle and self._may_switch(head):
                victim = min(idle, key=lambda w: w.last_used)
                views[victim.name] = victim.as_left(
                    View.STOPPING, victim.busy_since, victim.expected_busy_s, victim.loading_key
                )
                pending.remove(head)
                plan.decisions.append(Switch(head, victim.name))
                started += 1
                continue
            self._wake_for_oldest(pending)
            break
        return plan

    # -- assignments -----------------------------------------------------------

    def _known(self, job: JobView) -> bool:
        """Whether the job's work has a price (its own, or the body cost model's)."""
        return job.char_s is not None or self.cost.known

    def _seconds(self, job: JobView, chars: int) -> float:
        """Expected seconds of `chars` of the job's work: at the job's own measured
        rate (a WorkerCall's tactics and rebuilds), else the body cost model."""
        if job.char_s is not None:
            return job.char_s * max(0, chars)
        return self.cost.seconds(chars)

    def _assign(self, job: JobView, worker: WorkerView) -> None:
        expected = 0.0
        if self._known(job):
            expected = self._seconds(job, len(job.text) - self.facts.held(job, worker.name))
        self.views[worker.name] = worker.as_left(View.BUSY, self.now, expected, worker.loading_key)
        self.plan.decisions.append(Assign(job, worker.name, expected))

    def _assign_warm(
        self, pending: list[JobView], idle: list[WorkerView], waiting_on: collections.Counter
    ) -> bool:
        """Gives idle workers queued jobs of their own header; True if any."""
        by_key: dict[str, list[WorkerView]] = collections.defaultdict(list)
        for worker in idle:
            for key in worker.header_keys | (
                {worker.import_key} if worker.import_key is not None else set()
            ):
                by_key[key].append(worker)
        if not by_key:
            return False
        assigned = self._assign_held_calls(pending, by_key)
        if not any(by_key.values()):
            return assigned
        for job in list(pending):
            candidates = by_key.get(job.import_key)
            if candidates and not job.reuse:
                # reuse=false never takes a warm worker; a fresh retry takes one no job ran on
                candidates = [w for w in candidates if job.fresh_retry and not w.served]
            if not candidates:
                continue
            worker = self._best_for_prefix(candidates, job, waiting_on)
            if worker is None:
                continue
            self._assign_idle(job, worker, pending, by_key)
            assigned = True
            if not any(by_key.values()):
                break
        if self.s.marks or self.plan.rent.marks:  # else no job is waiting: no walk
            for job in pending:
                mark = self.book.mark(job)
                if mark is not None and mark.since is not None and not by_key.get(job.import_key):
                    # A later job took the idle worker: no idle time to charge.
                    self.plan.rent.marks[job] = Mark(None, mark.key, mark.header)
        return assigned

    def _assign_idle(
        self, job: JobView, worker: WorkerView, pending: list[JobView], by_key: dict
    ) -> None:
        """Assigns a queued job to an idle worker, which no other job may then take."""
        for others in by_key.values():
            if worker in others:
                others.remove(worker)
        pending.remove(job)
        self._assign(job, worker)

    def _assign_held_calls(self, pending: list[JobView], by_key: dict) -> bool:
        """Gives idle workers the WorkerCall jobs (proof states) they already
        hold, before any job that would make a worker rebuild a state another
        worker holds: under load every worker has work of its own, and a
        rebuild there is pure extra REPL work. A job no idle worker holds waits
        for the normal pass; once the oldest job has waited max_wait_for_warm_s,
        fair order alone decides again (nothing starves)."""
        if not any(job.kind is _CALL for job in pending):
            return False  # Verify-only queues (the common case) pay one scan, no copy
        if self.now - min(job.enqueued_at for job in pending) >= self.r.max_wait_for_warm_s:
            return False
        assigned = False
        for job in list(pending):
            candidates = by_key.get(job.import_key)
            if job.kind is not _CALL or not candidates or not self._routes_by_prefix(job):
                continue
            held, _, worker = max(
                ((self.facts.held(job, w.name), w.last_used, w) for w in candidates),
                key=lambda t: t[:2],
            )
            if held <= 0 or self._holder(job)[1] > held:
                continue
            self._assign_idle(job, worker, pending, by_key)
            assigned = True
            if not any(by_key.values()):
                break
        return assigned

    def _first_not_waiting(
        self, pending: list[JobView], waiting_on: collections.Counter
    ) -> JobView | None:
        """The first queued job that would not rather wait for a busy worker."""
        for job in pending:
            if not self._waits_for_holder(job, 0, waiting_on, ask_only=True):
                return job
        return None

    def _best_for_prefix(
        self, candidates: list[WorkerView], job: JobView, waiting_on: collections.Counter
    ) -> WorkerView | None:
        """The idle candidate holding the most of the job's work, or None when
        the job should rather wait for a busy worker that holds more."""
        if not self._routes_by_prefix(job):
            return max(candidates, key=lambda w: (w.name != job.avoid_worker, w.last_used))
        scored = max(
            ((self.facts.held(job, w.name), w.last_used, w) for w in candidates),
            key=lambda t: t[:2],
        )
        if self._waits_for_holder(job, scored[0], waiting_on):
            return None
        return scored[2]

    # -- prefix affinity -------------------------------------------------------

    def _routes_by_prefix(self, job: JobView) -> bool:
        return routes_by_prefix(job, self.r.prefix_routing, self.s.incremental_for(job.profile))

    def _holder(self, job: JobView) -> tuple[WorkerView | None, int]:
        """The busy worker holding the most of the job's work, and how much."""
        if job.kind is not _BODY:
            busy = [
                w for w in self.views.values() if w.state is View.BUSY and w.holds(job.import_key)
            ]
            if not busy:
                return None, 0
            best = max(busy, key=lambda w: self.facts.held(job, w.name))
            return best, self.facts.held(job, best.name)
        found = self.facts.holder(job)
        if found is None:
            return None, 0
        name, length = found
        worker = self.views.get(name)
        if worker is None or worker.state is not View.BUSY:
            return None, 0
        return worker, length

    def _waits_for_holder(
        self,
        job: JobView,
        best_idle: int,
        waiting_on: collections.Counter,
        *,
        ask_only: bool = False,
    ) -> bool:
        """Whether the job should wait for a busy worker that holds more of its
        work than the best idle choice.

        It waits when the saved elaboration (extra characters at the fitted
        per-character cost, without the per-request overhead; a WorkerCall's
        own measured rate when it has one) beats the
        expected wait: the holder's remaining time, the jobs already waiting
        for it, plus the "rent" earlier jobs paid waiting for this prefix while
        a worker idled. Once that rent reaches the cost of elaborating the
        prefix once elsewhere, the idle worker takes the job and becomes a
        second holder (ski rental), so a hot prefix cannot keep one worker
        busy and the other idle. With `ask_only` it only asks; it records nothing.
        """
        if not self._routes_by_prefix(job) or not self._known(job):
            return False
        now = self.now
        if now - job.enqueued_at >= self.r.max_wait_for_warm_s:
            return False
        holder, held = self._holder(job)
        if holder is None or held <= best_idle:
            return False
        per_char = job.char_s if job.char_s is not None else self.cost.per_char
        saved = per_char * (held - best_idle)
        wait = remaining_s(holder, now) + waiting_on[holder.name]
        key = hash((job.scope, job.text[:held]))
        rent = self.book.rent(key)
        if wait + rent >= saved:
            if not ask_only:
                self.book.spend(key)
                self.plan.stats.prefix_spreads += 1
            return False
        if not ask_only:
            waiting_on[holder.name] += self._seconds(job, len(job.text) - held)
            if self.book.mark(job) is None:
                self.plan.stats.prefix_waits += 1
            self.plan.rent.marks[job] = Mark(now, key)
            # Rent grows while it waits: look again before it could tip over.
            self.plan.wake(now + max(0.02, (saved - wait - rent) / 2))
        return True

    # -- header switches -------------------------------------------------------

    def _someone_will_hold(self, import_key: str) -> bool:
        return any(
            (w.holds(import_key) or w.loading_key == import_key)
            and w.state in (View.BUSY, View.WARMING)
            for w in self.views.values()
        )

    def _clean_worker_coming(self, head: JobView) -> bool:
        """A worker of the job's profile that no job has run on is booting or
        loading a header (a fresh retry waits for it rather than switch one)."""
        return any(
            not w.served and w.state in (View.SPAWNING, View.WARMING) and w.profile == head.profile
            for w in self.views.values()
        )

    def _may_switch(self, head: JobView) -> bool:
        if not head.reuse:
            return True
        if not self._someone_will_hold(head.import_key):
            return True
        return self.now - head.enqueued_at >= self.r.max_wait_for_warm_s

    def _may_import(self, head: JobView) -> bool:
        """Whether an idle worker (that may hold one more header) imports the
        head job's header now (rule 3): at once when no busy or loading worker
        holds it; else once this header's rent (idle time spent waiting for its
        holders) reaches one measured import of it, or the job has waited
        max_wait_for_warm_s. While it waits, the idle time until the next plan
        is charged to the header (a mark), and the plan wakes when the rent
        would reach the import's cost."""
        if self._may_switch(head):
            return True
        cost = self.s.import_s.get(head.import_key)
        if cost is None:
            return False  # never imported here: the fixed bound alone decides
        key = header_key(head.import_key)
        rent = self.book.rent(key)
        if rent >= cost:
            self.book.spend(key)
            self.plan.stats.header_spreads += 1
            return True
        self.plan.rent.marks[head] = Mark(self.now, key, header=True)
        self.plan.wake(self.now + max(0.001, cost - rent))
        return False

    def _wake_for_oldest(self, pending: list[JobView]) -> None:
        # The oldest job decides: no queued job waits past max_wait_for_warm_s.
        if pending:
            self.plan.wake(min(j.enqueued_at for j in pending) + self.r.max_wait_for_warm_s)


def remaining_s(worker: WorkerView, now: float) -> float:
    """Expected time until a busy worker is free. Past its estimate, it is
    expected to overrun by as much again (a long proof is far from done)."""
    return abs(worker.busy_since + worker.expected_busy_s - now)
