"""Routing: which queued job runs where, as a pure function of a snapshot.

Owns: `Router.plan(queue, workers, now) -> Plan`, the cost model's use, and
the "rent" jobs paid waiting for a busy prefix holder. May import: pool.cost,
pool.prefix_index, pool.job (data only). No processes, no clock reads, no
asyncio: the pool takes a snapshot (`WorkerView`s, the fair queue order,
now), asks for a plan, and carries it out. Tests read like a table of
situations and decisions (tests/reuse/test_routing_plan.py).

Rules, in order, for the idle workers and the queued jobs (bounded look-ahead):
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
     header, or it has waited max_wait_for_warm_s, an idle worker of the
     job's profile that may hold one more header imports it in-process (the
     cheapest import: fewest headers held, then least recently used). A REPL
     process keeps the envs of every header it imported, so nothing is lost;
  4. only when no idle worker may import (count or memory bound reached, or
     another profile's), the least recently used idle worker is replaced
     (a header switch: a new process).

Profiles (several toolchains in one server): a job's `import_key` names its
profile, a worker runs one profile for life, and the slots are shared: a
Start or Switch starts a worker of the job's profile.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import itertools
from typing import Callable, Sequence

from .cost import BodyCostModel
from .job import Job
from .prefix_index import PrefixIndex

__all__ = ["Assign", "Expire", "Import", "Plan", "Router", "Start", "Switch", "View", "WorkerView"]

LOOKAHEAD = 256
# Prefixes whose accumulated waiting ("rent") is tracked, most recent kept.
_RENT_ENTRIES = 1024


class View(enum.Enum):
    """What routing needs to know of a worker's state."""

    SPAWNING = "spawning"
    IDLE = "idle"
    BUSY = "busy"        # reserved or running
    WARMING = "warming"  # loading a header or preamble
    STOPPING = "stopping"  # still holds its process, so its slot
    GONE = "gone"        # dead or failed: holds nothing


@dataclasses.dataclass
class WorkerView:
    name: str
    state: View
    import_key: str | None = None
    loading_key: str | None = None  # the header it is loading, if any
    last_used: float = 0.0
    busy_since: float = 0.0
    expected_busy_s: float = 0.0
    # Every header whose env the worker holds (import_key among them).
    header_keys: frozenset = frozenset()
    profile: str = ""
    # May import one more header in-process (under its count and memory bounds).
    can_import: bool = True
    # Has run a job (a reuse=false job never goes to it).
    served: bool = False

    def holds(self, key: str) -> bool:
        return key == self.import_key or key in self.header_keys

    @property
    def fresh(self) -> bool:
        """Holds no header and loads none."""
        return self.import_key is None and not self.header_keys and self.loading_key is None

    @property
    def header_key(self) -> str | None:
        """The header this worker holds or is loading."""
        return self.import_key if self.import_key is not None else self.loading_key

    @property
    def holds_slot(self) -> bool:
        return self.state is not View.GONE


@dataclasses.dataclass(frozen=True)
class Assign:
    """Run `job` on idle worker `worker`; expect it busy for `expected_s`."""

    job: Job
    worker: str
    expected_s: float = 0.0


@dataclasses.dataclass(frozen=True)
class Import:
    """Run `job` on idle `worker`, which imports the job's header in-process
    first (it keeps the headers it holds)."""

    job: Job
    worker: str


@dataclasses.dataclass(frozen=True)
class Start:
    """Start a new worker in a free slot for `job`."""

    job: Job


@dataclasses.dataclass(frozen=True)
class Switch:
    """Kill idle `victim` (another header) and start a worker for `job`."""

    job: Job
    victim: str


@dataclasses.dataclass(frozen=True)
class Expire:
    """`job`'s deadline passed while it was queued."""

    job: Job


@dataclasses.dataclass
class Plan:
    decisions: list = dataclasses.field(default_factory=list)
    # Plan again at this time (a waiting job's bound, or rent tipping over).
    wake_at: float | None = None

    def wake(self, when: float) -> None:
        if self.wake_at is None or when < self.wake_at:
            self.wake_at = when


@dataclasses.dataclass
class RoutingStats:
    prefix_waits: int = 0     # jobs that waited for a busy prefix holder while a worker was idle
    prefix_wait_s: float = 0.0
    prefix_spreads: int = 0   # jobs run on an idle worker although a busy one held more


class Router:
    """Decides; never acts. State kept between plans: the rent table."""

    def __init__(
        self,
        *,
        size: int,
        index: PrefixIndex,
        cost: BodyCostModel,
        max_wait_for_warm_s: float = 2.0,
        prefix_routing: bool = True,
        incrementality: bool = False,
        incremental: Callable[[str], bool] | None = None,
        stats=None,
    ) -> None:
        self.size = size
        self.index = index
        self.cost = cost
        self.max_wait_for_warm_s = max_wait_for_warm_s
        self.prefix_routing = prefix_routing
        # Whether a profile's REPL is the incrementality fork: `incremental`
        # (profile name -> bool, the pool's features) when given, else
        # `incrementality` for every profile (tables of situations in tests).
        self.incrementality = incrementality
        self._incremental = incremental
        # Any object with RoutingStats' fields (the pool passes its stats).
        self.stats = stats if stats is not None else RoutingStats()
        # Seconds jobs waited for a busy holder, per prefix; once it passes
        # the cost of elaborating the prefix elsewhere, an idle worker takes
        # the next job and becomes a second holder.
        self._rent: collections.OrderedDict[int, float] = collections.OrderedDict()

    # -- the plan --------------------------------------------------------------

    def plan(self, queue: Sequence[Job], workers: Sequence[WorkerView], now: float) -> Plan:
        """Decisions for `queue` (in fair order) given `workers` at `now`."""
        plan = Plan()
        views = {w.name: dataclasses.replace(w) for w in workers}
        pending: list[Job] = []
        for job in queue:
            if job.deadline is not None and job.deadline <= now:
                plan.decisions.append(Expire(job))
            else:
                pending.append(job)
        self._accrue_rent(pending, now)
        started = 0
        while pending:
            idle = [w for w in views.values() if w.state is View.IDLE]
            starting = started + sum(1 for w in views.values() if w.state is View.SPAWNING)
            free_slots = self.size - started - sum(1 for w in views.values() if w.holds_slot)
            if not idle and free_slots <= 0:
                break
            waiting_on: collections.Counter = collections.Counter()
            if self._assign_warm(pending, idle, views, waiting_on, now, plan):
                continue
            head = self._first_not_waiting(pending, views, waiting_on, now)
            if head is None:
                self._wake_for_oldest(pending, plan)
                break
            # reuse=false (the proto's promise): a process nothing ran on
            # yet, else a new one; never an import into a used process.
            fresh = [w for w in idle if w.fresh and w.profile == head.profile and (head.reuse or not w.served)]
            if fresh:
                pending.remove(head)
                self._assign(head, fresh[0], views, now, plan)
                continue
            if free_slots > 0:
                if head.reuse and starting and self._someone_will_hold(views, head.import_key):
                    break
                pending.remove(head)
                plan.decisions.append(Start(head))
                started += 1
                continue
            importers = [w for w in idle if w.can_import and w.profile == head.profile] if head.reuse else []
            if importers and self._may_switch(views, head, now):
                worker = min(importers, key=lambda w: (len(w.header_keys), w.last_used))
                pending.remove(head)
                worker.state = View.BUSY
                worker.loading_key = head.import_key
                worker.busy_since = now
                plan.decisions.append(Import(head, worker.name))
                continue
            if idle and self._may_switch(views, head, now):
                victim = min(idle, key=lambda w: w.last_used)
                victim.state = View.STOPPING
                pending.remove(head)
                plan.decisions.append(Switch(head, victim.name))
                started += 1
                continue
            self._wake_for_oldest(pending, plan)
            break
        return plan

    def _assign(self, job: Job, worker: WorkerView, views: dict, now: float, plan: Plan) -> None:
        expected = 0.0
        if self.cost.known:
            expected = self.cost.seconds(len(job.text) - self.affinity(worker, job))
        worker.state = View.BUSY
        worker.busy_since = now
        worker.expected_busy_s = expected
        plan.decisions.append(Assign(job, worker.name, expected))

    def _assign_warm(self, pending: list[Job], idle: list[WorkerView], views: dict,
                     waiting_on: collections.Counter, now: float, plan: Plan) -> bool:
        """Gives idle workers queued jobs of their own header; True if any."""
        by_key: dict[str, list[WorkerView]] = collections.defaultdict(list)
        for worker in idle:
            for key in worker.header_keys | ({worker.import_key} if worker.import_key is not None else set()):
                by_key[key].append(worker)
        if not by_key:
            return False
        assigned = self._assign_held_calls(pending, by_key, views, now, plan)
        if not any(by_key.values()):
            return assigned
        for job in list(itertools.islice(pending, LOOKAHEAD)):
            candidates = by_key.get(job.import_key)
            if not candidates or not job.reuse:
                continue
            worker = self._best_for_prefix(candidates, job, views, waiting_on, now, plan)
            if worker is None:
                continue
            self._assign_idle(job, worker, pending, by_key, views, now, plan)
            assigned = True
            if not any(by_key.values()):
                break
        for job in itertools.islice(pending, LOOKAHEAD):
            if job.wait_mark is not None and not by_key.get(job.import_key):
                job.wait_mark = None  # a later job took the idle worker: no idle time to charge
        return assigned

    def _assign_idle(self, job: Job, worker: WorkerView, pending: list[Job], by_key: dict, views: dict,
                     now: float, plan: Plan) -> None:
        """Assigns a queued job to an idle worker, which no other job may then take."""
        for others in by_key.values():
            if worker in others:
                others.remove(worker)
        pending.remove(job)
        self._assign(job, worker, views, now, plan)

    def _assign_held_calls(self, pending: list[Job], by_key: dict, views: dict, now: float, plan: Plan) -> bool:
        """Gives idle workers the WorkerCall jobs (proof states) they already
        hold, before any job that would make a worker rebuild a state another
        worker holds: under load every worker has work of its own, and a
        rebuild there is pure extra REPL work. A job no idle worker holds waits
        for the normal pass; once the oldest job has waited max_wait_for_warm_s,
        fair order alone decides again (nothing starves)."""
        if not any(job.call is not None for job in itertools.islice(pending, LOOKAHEAD)):
            return False  # Verify-only queues (the common case) pay one scan, no copy
        window = list(itertools.islice(pending, LOOKAHEAD))
        if now - min(job.enqueued_at for job in window) >= self.max_wait_for_warm_s:
            return False
        assigned = False
        for job in window:
            candidates = by_key.get(job.import_key)
            if job.call is None or not candidates or not self.routes_by_prefix(job):
                continue
            held, _, worker = max(((self.affinity(w, job), w.last_used, w) for w in candidates), key=lambda t: t[:2])
            if held <= 0 or self._holder(job, views)[1] > held:
                continue
            self._assign_idle(job, worker, pending, by_key, views, now, plan)
            assigned = True
            if not any(by_key.values()):
                break
        return assigned

    def _first_not_waiting(self, pending: list[Job], views: dict, waiting_on: collections.Counter,
                           now: float) -> Job | None:
        """The first queued job that would not rather wait for a busy worker."""
        for job in itertools.islice(pending, LOOKAHEAD):
            if not self._waits_for_holder(job, 0, views, waiting_on, now, None):
                return job
        return None

    def _best_for_prefix(self, candidates: list[WorkerView], job: Job, views: dict,
                         waiting_on: collections.Counter, now: float, plan: Plan) -> WorkerView | None:
        """The idle candidate holding the most of the job's work, or None when
        the job should rather wait for a busy worker that holds more."""
        if not self.routes_by_prefix(job):
            return max(candidates, key=lambda w: (w.name != job.avoid_worker, w.last_used))
        scored = max(((self.affinity(w, job), w.last_used, w) for w in candidates), key=lambda t: t[:2])
        if self._waits_for_holder(job, scored[0], views, waiting_on, now, plan):
            return None
        return scored[2]

    # -- prefix affinity -------------------------------------------------------

    def incremental(self, profile: str) -> bool:
        """Whether jobs of `profile` reuse prefixes inside one REPL command."""
        return self._incremental(profile) if self._incremental is not None else self.incrementality

    def routes_by_prefix(self, job: Job) -> bool:
        if not self.prefix_routing or not job.reuse:
            return False
        return job.session is not None or job.call is not None or self.incremental(job.profile)

    def affinity(self, worker: WorkerView, job: Job) -> int:
        """Characters of the job's work this worker already did: the reusable
        prefix of its text plus, for a session job, the session chain built there;
        for a WorkerCall job, what the call says the worker holds."""
        if job.call is not None:
            return job.call.held_chars(worker.name)
        if job.session is None:
            return self.index.reusable_prefix(worker.name, job.scope, job.text)
        call = job.session
        built = call.session.realized.get(worker.name) or {}
        if not built and call.parent is not None:
            return 0
        chain = call.session.chain(call.parent)
        done = sum(len(call.session.commands[k].text or "") + 1 for k in chain if k in built)
        if self.incremental(job.profile) and (call.parent is None or call.parent in built):
            done += self.index.reusable_prefix(worker.name, job.scope, job.text)
        return done

    def _holder(self, job: Job, views: dict) -> tuple[WorkerView | None, int]:
        """The busy worker holding the most of the job's work, and how much."""
        if job.session is not None or job.call is not None:
            busy = [w for w in views.values() if w.state is View.BUSY and w.holds(job.import_key)]
            if not busy:
                return None, 0
            best = max(busy, key=lambda w: self.affinity(w, job))
            return best, self.affinity(best, job)
        found = self.index.holder(job.scope, job.text)
        if found is None:
            return None, 0
        name, length = found
        worker = views.get(name)
        if worker is None or worker.state is not View.BUSY:
            return None, 0
        return worker, length

    def _waits_for_holder(self, job: Job, best_idle: int, views: dict, waiting_on: collections.Counter,
                          now: float, plan: Plan | None) -> bool:
        """Whether the job should wait for a busy worker that holds more of its
        work than the best idle choice.

        It waits when the saved elaboration (extra characters at the fitted
        per-character cost, without the per-request overhead) beats the
        expected wait: the holder's remaining time, the jobs already waiting
        for it, plus the "rent" earlier jobs paid waiting for this prefix while
        a worker idled. Once that rent reaches the cost of elaborating the
        prefix once elsewhere, the idle worker takes the job and becomes a
        second holder (ski rental), so a hot prefix cannot keep one worker
        busy and the other idle. Without a `plan` it only asks; it changes nothing.
        """
        if not self.routes_by_prefix(job) or not self.cost.known:
            return False
        if now - job.enqueued_at >= self.max_wait_for_warm_s:
            return False
        holder, held = self._holder(job, views)
        if holder is None or held <= best_idle:
            return False
        saved = self.cost.per_char * (held - best_idle)
        wait = self.remaining_s(holder, now) + waiting_on[holder.name]
        key = hash((job.scope, job.text[:held]))
        rent = self._rent.get(key, 0.0)
        if wait + rent >= saved:
            if plan is not None:
                self._rent.pop(key, None)
                self.stats.prefix_spreads += 1
            return False
        if plan is not None:
            waiting_on[holder.name] += self.cost.seconds(len(job.text) - held)
            if job.rent_key is None:
                self.stats.prefix_waits += 1
            job.wait_mark, job.rent_key = now, key
            # Rent grows while it waits: look again before it could tip over.
            plan.wake(now + max(0.02, (saved - wait - rent) / 2))
        return True

    @staticmethod
    def remaining_s(worker: WorkerView, now: float) -> float:
        """Expected time until a busy worker is free. Past its estimate, it is
        expected to overrun by as much again (a long proof is far from done)."""
        return abs(worker.busy_since + worker.expected_busy_s - now)

    def _accrue_rent(self, pending: list[Job], now: float) -> None:
        """Charges each job that waited with an idle worker passed over since
        the last plan to its prefix's rent."""
        for job in itertools.islice(pending, LOOKAHEAD):
            if job.wait_mark is None:
                continue
            waited = max(0.0, now - job.wait_mark)
            job.wait_mark = None
            self.stats.prefix_wait_s += waited
            self._rent[job.rent_key] = self._rent.pop(job.rent_key, 0.0) + waited
        while len(self._rent) > _RENT_ENTRIES:
            self._rent.popitem(last=False)

    # -- header switches -------------------------------------------------------

    @staticmethod
    def _someone_will_hold(views: dict, import_key: str) -> bool:
        return any(
            (w.holds(import_key) or w.loading_key == import_key) and w.state in (View.BUSY, View.WARMING)
            for w in views.values()
        )

    def _may_switch(self, views: dict, head: Job, now: float) -> bool:
        if not head.reuse:
            return True
        if not self._someone_will_hold(views, head.import_key):
            return True
        return now - head.enqueued_at >= self.max_wait_for_warm_s

    def _wake_for_oldest(self, pending: list[Job], plan: Plan) -> None:
        # The oldest job decides: no queued job waits past max_wait_for_warm_s.
        if pending:
            oldest = min(j.enqueued_at for j in itertools.islice(pending, LOOKAHEAD))
            plan.wake(oldest + self.max_wait_for_warm_s)
