"""The pool: routes jobs to warm workers, supervises and replaces them.

    submit(job) --> [admission: bounded queue] --> _dispatch() --> _run(job, worker)
                                                      ^                  |
          worker idle / dead / started / timer -------+        release or replace
                                                                         |
                               supervisor: reap dead, refill, system memory

Routing, in order, for each idle worker and the queued jobs (bounded look-ahead):
  1. an idle worker already holding the job's import header (the cache key is
     the normalized imports plus the verifier identity), preferring the one
     that elaborated the longest prefix of the body before (prefix trie) or
     already built the job's session env. When a *busy* worker holds a longer
     prefix (pool-level trie `prefix_index`) and the measured cost of the
     extra text is more than the expected wait for it, the job waits for that
     worker instead (bounded by `max_wait_for_warm_s`);
  2. a fresh worker that holds no header yet, or a free slot to start one;
  3. only for the job at the head of the queue, when no worker holds its
     header or it has waited `max_wait_for_warm_s`: the least recently used
     idle worker of another header is replaced (a header switch).

A body always runs on the env of its own header and preamble, never on the
env left by another request. A worker that timed out, crashed, printed
garbage, passed its memory limit or was cancelled mid-request is killed and
replaced (re-warmed with its header); the job is retried up to `max_retries`
times on crashes only. Every submitted job gets exactly one outcome.

Boot, header load and preamble run as a task of their own (`_prepare`). A job
cancelled (or past its deadline) during them is answered at once, but the
load goes on: on success the worker turns IDLE holding the header, like any
warm worker; on failure the usual handling applies (a boot failure counts for
the breaker once, a failed header kills the worker). Only a cancel during the
body, when the REPL is mid-command, kills the worker. close() stops loads by
stopping their workers.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging
import re
import time

import psutil

from ..config import Config
from ..core.headers import HeaderSplit, split_header
from ..core.trie import PrefixTrie
from ..errors import (
    HeaderLoadError,
    NotServingError,
    OverloadedError,
    WorkerBootError,
    WorkerCrashed,
    WorkerError,
    WorkerTimeout,
)
from ..results import VerifierIdentity
from ..worker.identity import identity_from_probe
from ..worker.launcher import LaunchSpec, Launcher, rlimits_from_config
from ..worker.worker import ExitCause, Worker, WorkerState
from .cost import BodyCostModel
from .sessions import SessionCall, SessionCommand, SessionRegistry, realize

log = logging.getLogger("leanrpc.pool")

_LOOKAHEAD = 256
_FORK_MARKS = ("augustepoiroux", "incremental", "--fork")
_LEAN_VERSION = re.compile(r"(\d+)\.(\d+)")
# Prefixes whose accumulated waiting ("rent") is tracked, most recent kept.
_RENT_ENTRIES = 1024


@dataclasses.dataclass
class Job:
    """One body to elaborate on the env of its header."""

    split: HeaderSplit
    timeout_s: float
    infotree: str | None = None
    reuse: bool = True
    # Command run on the body's env right after it (e.g. `#print axioms`).
    after_body: str | None = None
    deadline: float | None = None  # time.monotonic() based
    # Set for a session job: the command runs on a session env, not the body.
    session: SessionCall | None = None
    enqueued_at: float = dataclasses.field(default_factory=time.monotonic)
    # Set while the job waits for a busy prefix holder although an idle
    # worker of its header was free: since when, and for which prefix.
    wait_mark: float | None = None
    rent_key: int | None = None
    # Pool-trie entry added at launch: the worker will hold the text once it
    # is elaborated, so routing can wait for it instead of elaborating the
    # same file twice at once. Dropped if the request fails.
    inflight_key: str | None = None
    attempts: int = 0
    future: asyncio.Future | None = None
    task: asyncio.Task | None = None
    # Boot + header + preamble of the current attempt, run as its own task so
    # a cancel or deadline during it does not throw the load away.
    load: asyncio.Task | None = None

    @property
    def import_key(self) -> str:
        return self.split.import_key

    @property
    def text(self) -> str:
        """The command this job elaborates."""
        return self.session.text if self.session is not None else self.split.padded_body

    @property
    def scope(self) -> str:
        """What the text is elaborated on, in worker-independent terms."""
        base = f"{self.split.import_key}\x01{self.split.preamble_key}"
        if self.session is not None:
            return f"{base}\x01session:{self.session.session.name}:{self.session.parent}"
        return base


@dataclasses.dataclass
class BodyOutcome:
    response: dict
    after_response: dict | None
    worker: str
    warm_header: bool
    reused_prefix_chars: int
    queue_s: float
    header_s: float
    body_s: float
    attempts: int
    # Starting a fresh REPL for this job (a cold slot or a header switch).
    boot_s: float = 0.0
    # Session jobs: the new session env id (None if not recorded), and how
    # many session commands had to be replayed on this worker first.
    session_env: int | None = None
    replayed_commands: int = 0


@dataclasses.dataclass
class PoolStats:
    header_loads: int = 0
    header_hits: int = 0
    header_switches: int = 0
    prefix_routed: int = 0       # jobs that ran with a reused prefix
    prefix_reused_chars: int = 0
    prefix_waits: int = 0        # jobs that waited for a busy prefix holder while a worker was idle
    prefix_wait_s: float = 0.0   # seconds those jobs spent waiting so
    prefix_spreads: int = 0      # jobs run on an idle worker although a busy one held more
    session_replays: int = 0     # session commands replayed after a worker was lost
    spares_started: int = 0
    jobs_submitted: int = 0
    jobs_finished: int = 0
    retries: int = 0
    boot_failures: int = 0
    restarts: collections.Counter = dataclasses.field(default_factory=collections.Counter)


class Pool:
    def __init__(self, config: Config, launcher: Launcher | None = None) -> None:
        self.config = config
        self.launcher = launcher or Launcher()
        self.stats = PoolStats()
        self.identity: VerifierIdentity | None = None
        self.workers: list[Worker] = []
        self._queue: collections.deque[Job] = collections.deque()
        self._names = itertools.count(1)
        self._closing = False
        self._consecutive_boot_failures = 0
        self._breaker_open_since: float | None = None
        self._breaker_reason = ""
        self._supervisor: asyncio.Task | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._background: set[asyncio.Task] = set()
        # Boot/header loads of running jobs (see _run); close() ends them by
        # stopping their workers, so their exit cause stays SHUTDOWN.
        self._loads: set[asyncio.Task] = set()
        self._header_use: collections.Counter = collections.Counter()
        # Exact import text per import key, to re-warm replacements.
        self._imports_text: dict[str, str] = {}
        self._started = asyncio.Event()
        mode = config.repl.incrementality
        self.incrementality = mode == "on" or (
            mode == "auto" and any(m in " ".join(config.repl.command) for m in _FORK_MARKS)
        )
        # "auto" without a telltale command line: ask the first REPL that boots.
        self._probe_fork = mode == "auto" and not self.incrementality
        self.elab_async = False  # decided once the Lean version is known
        # Pool-level trie: "<scope>\0<text>\0<worker>" for every text a live
        # worker still remembers; the payload is the worker name.
        self.prefix_index = PrefixTrie()
        self._cost = BodyCostModel()
        # Seconds jobs waited for a busy holder of a prefix, per prefix; once
        # it passes the cost of elaborating the prefix elsewhere, an idle
        # worker takes the next job and becomes a second holder.
        self._prefix_rent: collections.OrderedDict[int, float] = collections.OrderedDict()
        self._recheck: asyncio.TimerHandle | None = None
        self._preloading: set[str] = set()
        self.sessions = SessionRegistry(config.pool.max_sessions, config.pool.max_session_commands)
        self._state_listeners: list = []

    # -- public ----------------------------------------------------------------

    @property
    def size(self) -> int:
        return self.config.pool.workers

    @property
    def queue_depth(self) -> int:
        return len(self._queue)

    def worker_states(self) -> dict[str, int]:
        counts = collections.Counter(w.state.value for w in self.workers)
        return {state.value: counts.get(state.value, 0) for state in WorkerState}

    @property
    def serving(self) -> bool:
        return not self._closing and not self._breaker_is_open()

    @property
    def not_serving_reason(self) -> str:
        if self._closing:
            return "shutting down"
        if self._breaker_is_open():
            return self._breaker_reason
        return ""

    def add_state_listener(self, listener) -> None:
        """listener(worker, old_state, new_state), called on every transition."""
        self._state_listeners.append(listener)

    async def start(self) -> None:
        """Starts min_warm workers and learns the verifier identity."""
        warm = max(1, min(self.config.pool.min_warm, self.size))
        boots = [self._spawn_worker() for _ in range(warm)]
        results = await asyncio.gather(*(self._boot(w) for w in boots), return_exceptions=True)
        for worker in boots:
            if worker.state is WorkerState.READY:
                worker.release()  # booted, no job: the idle set
        errors = [r for r in results if isinstance(r, BaseException)]
        if len(errors) == len(results):
            log.error("no REPL worker could start: %s", errors[0])
        self._supervisor = asyncio.create_task(self._supervise(), name="leanrpc-supervisor")
        for header in self.config.pool.warm_headers:
            self._preload_header(header)
        self._started.set()

    async def submit(self, job: Job) -> BodyOutcome:
        """Runs one job; raises the job's error. Exactly one outcome per job."""
        if self._closing:
            raise NotServingError("server is shutting down")
        if self._breaker_is_open():
            raise NotServingError(f"no REPL worker can start: {self._breaker_reason}")
        if len(self._queue) >= self.config.pool.queue_limit:
            raise OverloadedError(
                f"queue full ({len(self._queue)} requests waiting)",
                retry_after_s=self._retry_hint(),
            )
        loop = asyncio.get_running_loop()
        job.future = loop.create_future()
        job.enqueued_at = time.monotonic()
        self.stats.jobs_submitted += 1
        self._header_use[job.import_key] += 1
        self._imports_text.setdefault(job.import_key, job.split.imports)
        self._queue.append(job)
        self._dispatch()
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
        self._closing = True
        while self._queue:
            job = self._queue.popleft()
            self._fail(job, NotServingError("server is shutting down"))
        if self._supervisor is not None:
            self._supervisor.cancel()
        if self._recheck is not None:
            self._recheck.cancel()
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*(w.stop(grace) for w in list(self.workers)), return_exceptions=True)
        if self._loads:
            # Their workers are stopped, so they fail at once; cancel any straggler.
            _done, stragglers = await asyncio.wait(list(self._loads), timeout=10.0)
            for task in stragglers:
                task.cancel()
            await asyncio.gather(*stragglers, return_exceptions=True)
        await asyncio.gather(*list(self._background), return_exceptions=True)
        self.workers.clear()

    async def drain(self, timeout: float) -> None:
        """Waits until no job is queued or running, or timeout passes."""
        end = time.monotonic() + timeout
        while (self._queue or any(w.reserved for w in self.workers)) and time.monotonic() < end:
            await asyncio.sleep(0.05)

    # -- admission and cancellation ---------------------------------------------

    def _retry_hint(self) -> float:
        busy = max(1, sum(1 for w in self.workers if w.busy))
        return min(30.0, 0.1 + len(self._queue) / busy * 0.05)

    def _abandon(self, job: Job) -> None:
        if job in self._queue:
            self._queue.remove(job)
        elif job.task is not None and not job.task.done():
            # Running: cancelling the task kills its worker if the body was
            # sent (the REPL cannot abandon a command); a boot or header load
            # goes on in the background (see _run).
            job.task.cancel()
        if job.future is not None and not job.future.done():
            job.future.cancel()

    def _fail(self, job: Job, exc: BaseException) -> None:
        if job.future is not None and not job.future.done():
            job.future.set_exception(exc)

    # -- dispatch ----------------------------------------------------------------

    def _dispatch(self) -> None:
        if self._closing:
            return
        now = time.monotonic()
        self._drop_expired(now)
        self._accrue_rent(now)
        while self._queue:
            idle = [w for w in self.workers if w.state is WorkerState.IDLE]
            starting = sum(1 for w in self.workers if w.state is WorkerState.SPAWNING)
            free_slots = self._free_slots()
            if not idle and free_slots <= 0:
                return
            waiting_on: collections.Counter = collections.Counter()
            if self._assign_warm(idle, waiting_on, now):
                continue
            head = self._first_not_waiting(waiting_on, now)
            if head is None:
                self._arm_timer(self._queue[0])
                return
            fresh = [w for w in idle if w.import_key is None]
            if fresh:
                self._queue.remove(head)
                self._launch_job(head, fresh[0])
                continue
            if free_slots > 0:
                if starting and self._someone_will_hold(head.import_key):
                    return
                self._queue.remove(head)
                self._launch_job(head, None)
                continue
            if idle and self._may_switch(head, now):
                victim = min(idle, key=lambda w: w.last_used)
                self.stats.header_switches += 1
                # Kill now: a retire task would leave the victim IDLE until it
                # runs, and this loop would pick it (and spawn) again.
                victim.kill(ExitCause.HEADER_SWITCH)
                self._queue.remove(head)
                self._launch_job(head, None)
                continue
            self._arm_timer(head)
            return

    def _first_not_waiting(self, waiting_on: collections.Counter, now: float) -> Job | None:
        """The oldest queued job that would not rather wait for a busy worker."""
        for job in itertools.islice(self._queue, _LOOKAHEAD):
            if not self._waits_for_holder(job, 0, waiting_on, now, count=False):
                return job
        return None

    def _assign_warm(self, idle: list[Worker], waiting_on: collections.Counter, now: float) -> bool:
        """Gives idle workers queued jobs of their own header; True if any."""
        if not idle:
            return False
        by_key: dict[str, list[Worker]] = collections.defaultdict(list)
        for worker in idle:
            if worker.import_key is not None:
                by_key[worker.import_key].append(worker)
        if not by_key:
            return False
        assigned = False
        for job in list(itertools.islice(self._queue, _LOOKAHEAD)):
            candidates = by_key.get(job.import_key)
            if not candidates or not job.reuse:
                continue
            worker = self._best_for_prefix(candidates, job, waiting_on, now)
            if worker is None:
                continue
            candidates.remove(worker)
            self._queue.remove(job)
            self._launch_job(job, worker)
            assigned = True
            if not any(by_key.values()):
                break
        for job in itertools.islice(self._queue, _LOOKAHEAD):
            if job.wait_mark is not None and not by_key.get(job.import_key):
                job.wait_mark = None  # a later job took the idle worker: no idle time to charge
        return assigned

    def _best_for_prefix(
        self, candidates: list[Worker], job: Job, waiting_on: collections.Counter | None = None, now: float = 0.0
    ) -> Worker | None:
        """The idle candidate holding the most of the job's work, or None when
        the job should rather wait for a busy worker that holds more."""
        if not self._routes_by_prefix(job):
            return max(candidates, key=lambda w: w.last_used)
        scored = max(((self._affinity(w, job), w.last_used, w) for w in candidates), key=lambda t: t[:2])
        if waiting_on is not None and self._waits_for_holder(job, scored[0], waiting_on, now):
            return None
        return scored[2]

    def _routes_by_prefix(self, job: Job) -> bool:
        if not self.config.pool.prefix_routing or not job.reuse:
            return False
        return job.session is not None or self.incrementality

    def _affinity(self, worker: Worker, job: Job) -> int:
        """Characters of the job's work this worker already did: the reusable
        prefix of its text plus, for a session job, the session chain built there."""
        if job.session is None:
            return worker.reusable_prefix(worker.cached_base_env(job.split.preamble_key), job.text)
        call = job.session
        built = call.session.realized.get(worker.name) or {}
        if not built and call.parent is not None:
            return 0
        chain = call.session.chain(call.parent)
        done = sum(len(call.session.commands[k].text or "") + 1 for k in chain if k in built)
        run_env = built.get(call.parent) if call.parent is not None else worker.cached_base_env(job.split.preamble_key)
        if self.incrementality:
            done += worker.reusable_prefix(run_env, call.text)
        return done

    def _holder(self, job: Job) -> tuple[Worker | None, int]:
        """The busy worker holding the most of the job's work, and how much."""
        if job.session is not None:
            busy = [w for w in self.workers if w.busy and w.import_key == job.import_key]
            if not busy:
                return None, 0
            best = max(busy, key=lambda w: self._affinity(w, job))
            return best, self._affinity(best, job)
        scope = job.scope + "\x00"
        text = job.text
        found = self.prefix_index.common_prefix(scope + text)
        if found is None:
            return None, 0
        length, name = found
        length = min(length - len(scope), len(text))
        if length <= 0:
            return None, 0
        if length < len(text):
            length = text.rfind("\n", 0, length) + 1
        worker = next((w for w in self.workers if w.name == name), None)
        if worker is None or not worker.busy:
            return None, 0
        return worker, length

    def _waits_for_holder(self, job: Job, best_idle: int, waiting_on: collections.Counter, now: float,
                          *, count: bool = True) -> bool:
        """Whether the job should wait for a busy worker that holds more of its
        work than the best idle choice.

        It waits when the saved elaboration (extra characters at the fitted
        per-character cost, without the per-request overhead) beats the
        expected wait: the holder's remaining time, the jobs already waiting
        for it, plus the "rent" earlier jobs paid waiting for this prefix while
        a worker idled. Once that rent reaches the cost of elaborating the
        prefix once elsewhere, the idle worker takes the job and becomes a
        second holder (ski rental), so a hot prefix cannot keep one worker
        busy and the other idle. `count=False` only asks; it changes nothing.
        """
        if not self._routes_by_prefix(job) or not self._cost.known:
            return False
        if now - job.enqueued_at >= self.config.pool.max_wait_for_warm_s:
            return False
        holder, held = self._holder(job)
        if holder is None or held <= best_idle:
            return False
        saved = self._cost.per_char * (held - best_idle)
        wait = self._remaining_s(holder, now) + waiting_on[holder.name]
        key = hash((job.scope, job.text[:held]))
        rent = self._prefix_rent.get(key, 0.0)
        if wait + rent >= saved:
            if count:
                self._prefix_rent.pop(key, None)
                self.stats.prefix_spreads += 1
            return False
        if count:
            waiting_on[holder.name] += self._cost.seconds(len(job.text) - held)
            if job.rent_key is None:
                self.stats.prefix_waits += 1
            job.wait_mark, job.rent_key = now, key
            # Rent grows while it waits: look again before it could tip over.
            self._arm_recheck((saved - wait - rent) / 2)
        return True

    @staticmethod
    def _remaining_s(worker: Worker, now: float) -> float:
        """Expected time until a busy worker is free. Past its estimate, it is
        expected to overrun by as much again (a long proof is far from done)."""
        return abs(worker.busy_since + worker.expected_busy_s - now)

    def _accrue_rent(self, now: float) -> None:
        """Charges each job that waited with an idle worker passed over since
        the last dispatch pass to its prefix's rent."""
        for job in itertools.islice(self._queue, _LOOKAHEAD):
            if job.wait_mark is None:
                continue
            waited = max(0.0, now - job.wait_mark)
            job.wait_mark = None
            self.stats.prefix_wait_s += waited
            self._prefix_rent[job.rent_key] = self._prefix_rent.pop(job.rent_key, 0.0) + waited
        while len(self._prefix_rent) > _RENT_ENTRIES:
            self._prefix_rent.popitem(last=False)

    def _arm_recheck(self, delay: float) -> None:
        loop = asyncio.get_running_loop()
        when = loop.time() + max(0.02, delay)
        if self._recheck is not None:
            if self._recheck.when() <= when:
                return
            self._recheck.cancel()

        def fire() -> None:
            self._recheck = None
            self._dispatch()

        self._recheck = loop.call_at(when, fire)

    def _someone_will_hold(self, import_key: str) -> bool:
        return any(
            w.header_key == import_key and w.reserved
            for w in self.workers
        )

    def _may_switch(self, head: Job, now: float) -> bool:
        if not head.reuse:
            return True
        if not self._someone_will_hold(head.import_key):
            return True
        return now - head.enqueued_at >= self.config.pool.max_wait_for_warm_s

    def _arm_timer(self, head: Job) -> None:
        if self._timer is not None:
            return
        # The oldest job decides: no queued job waits past max_wait_for_warm_s.
        oldest = min(j.enqueued_at for j in itertools.islice(self._queue, _LOOKAHEAD)) if self._queue else head.enqueued_at
        delay = max(0.01, oldest + self.config.pool.max_wait_for_warm_s - time.monotonic())
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timer = None
            self._dispatch()

        self._timer = loop.call_later(delay, fire)

    def _drop_expired(self, now: float) -> None:
        for job in [j for j in self._queue if j.deadline is not None and j.deadline <= now]:
            self._queue.remove(job)
            self._fail(job, WorkerTimeout("deadline passed while queued"))

    def _launch_job(self, job: Job, worker: Worker | None) -> None:
        if worker is None:
            worker = self._spawn_worker()
        else:
            # Reserve it now so the next dispatch pass does not hand it out.
            worker.mark_busy()
            if self._cost.known:
                worker.expected_busy_s = self._cost.seconds(len(job.text) - self._affinity(worker, job))
        if self._routes_by_prefix(job):
            key = self._index_key(job, worker)
            if key not in self.prefix_index:
                self.prefix_index.insert(key, worker.name)
                job.inflight_key = key
        job.task = asyncio.create_task(self._run(job, worker), name=f"job-{worker.name}")
        job.task.add_done_callback(lambda task, worker=worker, job=job: self._on_job_task_done(task, worker, job))

    def _on_job_task_done(self, task: asyncio.Task, worker: Worker, job: Job) -> None:
        if job.inflight_key is not None:  # never ran: _run's cleanup did not drop it
            self.prefix_index.remove(job.inflight_key)
            job.inflight_key = None
        # A task cancelled before its first step never runs _run's cleanup
        # (cancellation storms do this): give the reserved slot back. Once
        # _run started (job.load set), its cleanup or the load owns the worker.
        if not task.cancelled() or job.load is not None:
            return
        if worker.state is WorkerState.SPAWNING:
            worker.kill(ExitCause.CANCELLED)
        elif worker.state is WorkerState.RESERVED:
            worker.release()  # reserved, but the request was never sent
        else:
            return
        self._dispatch()

    # -- running a job -----------------------------------------------------------

    async def _run(self, job: Job, worker: Worker) -> None:
        assert job.future is not None
        queue_s = time.monotonic() - job.enqueued_at
        job.attempts += 1
        load = job.load = asyncio.create_task(self._prepare(job, worker), name=f"load-{worker.name}")
        self._loads.add(load)
        load.add_done_callback(self._loads.discard)
        # True until the load's outcome is read here; a cancel or deadline
        # before then leaves the worker to the load (_adopt_load).
        loading = True
        try:
            await self._await_load(job, worker, load)
            loading = False
            if load.cancelled():
                raise NotServingError("server is shutting down")
            boot_s, warm, header_s, base_env = load.result()
            replayed = 0
            run_env = base_env
            if job.session is not None:
                started = time.monotonic()
                run_env, replayed = await realize(
                    job.session.session, worker, base_env, job.session.parent, self._header_timeout(job)
                )
                self.stats.session_replays += replayed
                header_s += time.monotonic() - started
            body = job.text
            reused = worker.reusable_prefix(run_env, body) if self.incrementality and job.reuse else 0
            if reused:
                self.stats.prefix_routed += 1
                self.stats.prefix_reused_chars += reused
            payload: dict = {"cmd": body, "env": run_env}
            if job.infotree:
                payload["infotree"] = job.infotree
            if self.incrementality and job.reuse:
                payload["incrementality"] = True
            if self.elab_async:
                payload["setOptions"] = [[["Elab", "async"], True]]
            started = time.monotonic()
            response = await worker.request(payload, self._body_timeout(job))
            body_s = time.monotonic() - started
            worker.requests_served += 1
            self._observe_cost(body_s, len(body) - reused)
            self._remember(worker, job, run_env)
            session_env = self._record_session(job, worker, response)
            after = None
            if job.after_body and "env" in response:
                after = await worker.request({"cmd": job.after_body, "env": response["env"]}, self._body_timeout(job))
            if not job.future.done():
                job.future.set_result(
                    BodyOutcome(
                        response=response,
                        after_response=after,
                        worker=worker.name,
                        warm_header=warm,
                        reused_prefix_chars=reused,
                        queue_s=queue_s,
                        header_s=header_s,
                        boot_s=boot_s,
                        body_s=body_s,
                        attempts=job.attempts,
                        session_env=session_env,
                        replayed_commands=replayed,
                    )
                )
        except asyncio.CancelledError:
            if not loading and worker.alive:
                worker.kill(ExitCause.CANCELLED)
            if not job.future.done():
                job.future.cancel()
            raise
        except HeaderLoadError as exc:
            # The process now holds a broken env; replace it.
            worker.kill(ExitCause.HEADER_FAILED)
            self._fail(job, exc)
        except WorkerBootError as exc:
            # _boot already counted this failure for the breaker.
            if self._breaker_is_open() or job.attempts > self.config.pool.max_retries + 1:
                self._fail(job, NotServingError(str(exc)) if self._breaker_is_open() else exc)
            else:
                self._requeue(job)
        except WorkerCrashed as exc:
            if job.attempts <= self.config.pool.max_retries and not self._closing:
                self.stats.retries += 1
                self._requeue(job)
            else:
                self._fail(job, exc)
        except (WorkerError, NotServingError) as exc:  # timeout, out of memory, shutdown
            self._fail(job, exc)
        except Exception as exc:  # pragma: no cover - a bug; still answer
            log.exception("job failed unexpectedly on %s", worker.name)
            worker.kill(ExitCause.CRASH)
            self._fail(job, exc)
        finally:
            if job.inflight_key is not None:
                self.prefix_index.remove(job.inflight_key)
                job.inflight_key = None
            if loading:
                self._adopt_load(worker, load)
            else:
                self._release(worker)
            self._dispatch()

    async def _prepare(self, job: Job, worker: Worker) -> tuple[float, bool, float, int]:
        """Boots the worker if needed, loads the job's header and preamble.

        Returns (boot_s, warm, header_s, base_env). Runs as its own task that
        the job never cancels: a cancelled request would kill the worker and
        throw the load away.
        """
        boot_s = 0.0
        if worker.state is WorkerState.SPAWNING:
            started = time.monotonic()
            await self._boot(worker)
            boot_s = time.monotonic() - started
            worker.mark_busy()
        warm = worker.import_key is not None
        header_s = 0.0
        if not warm:
            worker.mark_warming()
            header_s = await self._load_header(worker, job)
            worker.mark_busy()
        else:
            self.stats.header_hits += 1
        base_env, preamble_s = await worker.ensure_preamble(
            job.split.preamble, job.split.preamble_key, self.config.pool.header_timeout_s
        )
        return boot_s, warm, header_s + preamble_s, base_env

    async def _await_load(self, job: Job, worker: Worker, load: asyncio.Task) -> None:
        """Waits for the load without cancelling it on a cancel or deadline.

        Raises WorkerTimeout when the job's deadline passes first.
        """
        timeout = None if job.deadline is None else max(0.0, job.deadline - time.monotonic())
        done, _pending = await asyncio.wait({load}, timeout=timeout)
        if not done:
            raise WorkerTimeout(f"deadline passed while worker {worker.name} was loading the header")

    def _adopt_load(self, worker: Worker, load: asyncio.Task) -> None:
        """The job left during its load: the worker finishes loading and then
        serves others (IDLE, holding the header), or fails as it would have."""
        load.add_done_callback(lambda task: self._on_adopted_load_done(worker, task))

    def _on_adopted_load_done(self, worker: Worker, load: asyncio.Task) -> None:
        if load.cancelled():  # close(): the worker is being stopped with the pool
            if worker.alive:
                worker.kill(ExitCause.SHUTDOWN)
        elif isinstance(load.exception(), HeaderLoadError):
            worker.kill(ExitCause.HEADER_FAILED)
        elif load.exception() is not None:
            # Boot failures were counted by _boot; crashes and timeouts
            # already killed the worker.
            if worker.alive:
                worker.kill(ExitCause.CRASH)
        else:
            self._release(worker)
        self._dispatch()

    def _observe_cost(self, body_s: float, chars: int) -> None:
        self._cost.observe(body_s, chars)

    def _remember(self, worker: Worker, job: Job, run_env: int) -> None:
        """Adds the job's text to the worker's history and the pool trie."""
        key = self._index_key(job, worker)
        if key == job.inflight_key:
            job.inflight_key = None  # the history owns the entry now
        if key not in self.prefix_index:
            self.prefix_index.insert(key, worker.name)
        for forgotten in worker.remember_body(run_env, job.text, key):
            if forgotten is not None and forgotten != key:
                self.prefix_index.remove(forgotten)

    @staticmethod
    def _index_key(job: Job, worker: Worker) -> str:
        return f"{job.scope}\x00{job.text}\x00{worker.name}"

    def _record_session(self, job: Job, worker: Worker, response: dict) -> int | None:
        call = job.session
        if call is None or not call.record or "env" not in response:
            return None
        session = call.session
        session_env = len(session.commands)
        session.commands.append(SessionCommand(call.parent, call.text))
        session.realized.setdefault(worker.name, {})[session_env] = response["env"]
        return session_env

    def _forget_worker(self, worker: Worker) -> None:
        for key in worker.history_tags():
            if key is not None:
                self.prefix_index.remove(key)
        self.sessions.forget_worker(worker.name)

    def _requeue(self, job: Job) -> None:
        job.task = None
        job.load = None
        self._queue.appendleft(job)

    def _header_timeout(self, job: Job) -> float:
        timeout = self.config.pool.header_timeout_s
        if job.deadline is not None:
            timeout = min(timeout, max(0.001, job.deadline - time.monotonic()))
        return timeout

    def _body_timeout(self, job: Job) -> float:
        timeout = job.timeout_s
        if job.deadline is not None:
            timeout = min(timeout, max(0.001, job.deadline - time.monotonic()))
        return timeout

    async def _load_header(self, worker: Worker, job: Job) -> float:
        self.stats.header_loads += 1
        # Not bounded by the job's deadline: the load outlives the job (_run).
        return await worker.load_header(job.split.imports, job.import_key, self.config.pool.header_timeout_s)

    def _release(self, worker: Worker) -> None:
        """Decides at release time: back to idle, or recycle."""
        if not worker.reserved:
            return
        limits = self.config.limits
        reason = worker.recycle_reason
        if reason is None and limits.max_requests_per_worker and worker.requests_served >= limits.max_requests_per_worker:
            reason = ExitCause.MAX_REQUESTS
        if reason is None and limits.max_worker_rss_mb and worker.tree_rss() > limits.max_worker_rss_mb * 2**20:
            reason = ExitCause.OUT_OF_MEMORY
        if reason is not None or self._closing:
            self._retire(worker, reason or ExitCause.SHUTDOWN)
        else:
            worker.mark_idle()

    # -- workers -----------------------------------------------------------------

    def _free_slots(self) -> int:
        # A stopping worker still holds its process, so it still takes a slot.
        return self.size - sum(1 for w in self.workers if w.alive or w.state is WorkerState.STOPPING)

    def _spawn_worker(self) -> Worker:
        name = f"w{next(self._names)}"
        spec = LaunchSpec(
            argv=list(self.config.repl.command),
            cwd=self.config.repl.cwd,
            env=dict(self.config.repl.env),
            rlimits=rlimits_from_config(self.config.limits),
        )
        worker = Worker(
            name,
            spec,
            self.launcher,
            self.config.limits,
            history_limit=self.config.pool.prefix_history,
            on_state_change=self._on_state_change,
            fence=self.config.repl,
        )
        self.workers.append(worker)
        return worker

    async def _boot(self, worker: Worker) -> None:
        try:
            await worker.start(timeout=self.config.pool.header_timeout_s, probe_fork=self._probe_fork)
        except WorkerBootError as exc:
            self._on_boot_failure(exc)
            raise
        self._consecutive_boot_failures = 0
        if self._breaker_open_since is not None:
            log.info("REPL booted again; closing the circuit breaker")
        self._breaker_open_since = None
        if self.identity is None:
            self.identity = identity_from_probe(worker.version_string, self.config.repl)
            log.info("verifier identity: %s", self.identity.description)
        if self._probe_fork:
            self._probe_fork = False
            self.incrementality = bool(worker.is_fork)
            log.info("REPL incrementality (fork) %s", "detected" if self.incrementality else "not detected")
        self.elab_async = self._wants_elab_async()

    def _wants_elab_async(self) -> bool:
        setting = self.config.repl.elab_async
        if setting in (True, "on"):
            return True
        if setting in (False, "off"):
            return False
        # auto: the fork accepts setOptions; Elab.async exists from Lean 4.19.
        match = _LEAN_VERSION.search(self.identity.lean_version if self.identity else "")
        return self.incrementality and match is not None and (int(match[1]), int(match[2])) >= (4, 19)

    def _on_boot_failure(self, exc: WorkerBootError) -> None:
        self.stats.boot_failures += 1
        self._consecutive_boot_failures += 1
        if self._consecutive_boot_failures >= self.config.pool.boot_failure_limit:
            if self._breaker_open_since is None:
                log.error("circuit breaker open after %d boot failures: %s", self._consecutive_boot_failures, exc)
            self._breaker_open_since = time.monotonic()
            self._breaker_reason = f"{self._consecutive_boot_failures} consecutive REPL boot failures; last: {exc}"
            while self._queue:
                self._fail(self._queue.popleft(), NotServingError(f"no REPL worker can start: {self._breaker_reason}"))

    def _breaker_is_open(self) -> bool:
        if self._breaker_open_since is None:
            return False
        # Half-open after the cooldown: let the next request try a boot.
        return time.monotonic() - self._breaker_open_since < self.config.pool.breaker_cooldown_s

    def _retire(self, worker: Worker, cause: ExitCause) -> None:
        if worker.state in (WorkerState.DEAD, WorkerState.FAILED, WorkerState.STOPPING):
            return
        task = asyncio.create_task(worker.stop(2.0, cause), name=f"retire-{worker.name}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _on_state_change(self, worker: Worker, old: WorkerState, new: WorkerState) -> None:
        for listener in self._state_listeners:
            listener(worker, old, new)
        if new is WorkerState.DEAD:
            self.stats.restarts[(worker.exit_cause or ExitCause.CRASH).value] += 1
            if worker in self.workers:
                self.workers.remove(worker)
            self._preloading.discard(worker.name)
            self._forget_worker(worker)
            if not self._closing:
                rewarm = worker.import_key
                if rewarm is not None and worker.exit_cause not in (ExitCause.HEADER_SWITCH, ExitCause.HEADER_FAILED):
                    self._rewarm(rewarm)
                loop = asyncio.get_running_loop()
                loop.call_soon(self._dispatch)

    def _schedule(self, coro) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _rewarm(self, import_key: str) -> None:
        """Replaces a lost worker with one that already loaded its header.

        So a timeout kill never makes the next caller pay a cold import.
        """
        imports = self._imports_text.get(import_key)
        # When jobs are waiting, dispatch starts workers on demand instead.
        if imports is None or self._queue:
            return
        self._preload_header(imports)

    def _preload_header(self, imports: str) -> None:
        if self._free_slots() <= 0 or self._closing:
            return
        split = split_header(imports)
        worker = self._spawn_worker()
        worker.loading_key = split.import_key
        self._preloading.add(worker.name)

        async def warm() -> None:
            try:
                await self._boot(worker)
                worker.mark_warming()
                self.stats.header_loads += 1
                await worker.load_header(split.imports, split.import_key, self.config.pool.header_timeout_s)
                worker.mark_idle()
            except (WorkerError, HeaderLoadError) as exc:
                log.warning("pre-loading header on %s failed: %s", worker.name, exc)
                if worker.alive:
                    worker.kill(ExitCause.HEADER_FAILED)
            finally:
                self._preloading.discard(worker.name)
                worker.loading_key = None
                self._dispatch()

        self._schedule(warm())

    async def _supervise(self) -> None:
        """Periodic steps: system memory, warm spares, refill to min_warm."""
        while not self._closing:
            await asyncio.sleep(0.5)
            try:
                self._check_system_memory()
                self._keep_warm_spares()
                self._dispatch()
            except Exception:  # pragma: no cover - keep supervising
                log.exception("supervisor step failed")

    def _check_system_memory(self) -> None:
        threshold = self.config.limits.max_system_memory_percent
        if not threshold:
            return
        if psutil.virtual_memory().percent < threshold:
            return
        idle = [w for w in self.workers if w.state is WorkerState.IDLE]
        if idle:
            victim = max(idle, key=lambda w: w.tree_rss())
            log.warning("system memory above %.0f%%; recycling %s", threshold, victim.name)
            self._retire(victim, ExitCause.SYSTEM_MEMORY)
        else:
            for worker in self.workers:
                if worker.busy and worker.recycle_reason is None:
                    worker.drain(ExitCause.SYSTEM_MEMORY)
                    break

    def _keep_warm_spares(self) -> None:
        """Keeps `warm_spares` idle workers loaded with the most used headers
        (spread round-robin over the top ones), so a killed worker's next
        caller finds its header already imported."""
        wanted = self.config.pool.warm_spares
        if not wanted or self._queue or self._closing:
            return
        ranked = [key for key, _n in self._header_use.most_common(wanted) if key in self._imports_text]
        if not ranked:
            return
        target: collections.Counter = collections.Counter()
        for i in range(wanted):
            target[ranked[i % len(ranked)]] += 1
        have = collections.Counter(
            w.header_key
            for w in self.workers
            if (w.state is WorkerState.IDLE and w.import_key) or w.name in self._preloading
        )
        for key, count in target.items():
            for _ in range(count - have[key]):
                if self._free_slots() <= 0:
                    self._free_slot_for_spare(have, target)
                    return
                self.stats.spares_started += 1
                self._preload_header(self._imports_text[key])

    def _free_slot_for_spare(self, have: collections.Counter, target: collections.Counter) -> None:
        """Retires the least recently used idle worker of a header that has
        more idle workers than its spare target; the next pass loads the spare."""
        surplus = [
            w for w in self.workers
            if w.state is WorkerState.IDLE and w.import_key and have[w.import_key] > target.get(w.import_key, 0)
        ]
        if surplus:
            victim = min(surplus, key=lambda w: w.last_used)
            self.stats.header_switches += 1
            victim.kill(ExitCause.HEADER_SWITCH)
