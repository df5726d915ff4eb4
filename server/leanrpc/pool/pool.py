"""The pool: routes jobs to warm workers, supervises and replaces them.

    submit(job) --> [admission: bounded queue] --> _dispatch() --> _run(job, worker)
                                                      ^                  |
          worker idle / dead / started / timer -------+        release or replace
                                                                         |
                               supervisor: reap dead, refill, system memory

Routing, in order, for each idle worker and the queued jobs (bounded look-ahead):
  1. an idle worker already holding the job's import header (the cache key is
     the normalized imports plus the verifier identity), preferring the one
     that elaborated the longest prefix of the body before (prefix trie);
  2. a fresh worker that holds no header yet, or a free slot to start one;
  3. only for the job at the head of the queue, when no worker holds its
     header or it has waited `max_wait_for_warm_s`: the least recently used
     idle worker of another header is replaced (a header switch).

A body always runs on the env of its own header and preamble, never on the
env left by another request. A worker that timed out, crashed, printed
garbage, passed its memory limit or was cancelled mid-request is killed and
replaced (re-warmed with its header); the job is retried up to `max_retries`
times on crashes only. Every submitted job gets exactly one outcome.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import itertools
import logging
import time

import psutil

from ..config import Config
from ..core.headers import HeaderSplit
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

log = logging.getLogger("leanrpc.pool")

_LOOKAHEAD = 256
_FORK_MARKS = ("augustepoiroux", "incremental", "--fork")


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
    enqueued_at: float = dataclasses.field(default_factory=time.monotonic)
    attempts: int = 0
    future: asyncio.Future | None = None
    task: asyncio.Task | None = None

    @property
    def import_key(self) -> str:
        return self.split.import_key


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


@dataclasses.dataclass
class PoolStats:
    header_loads: int = 0
    header_hits: int = 0
    header_switches: int = 0
    prefix_routed: int = 0
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
        self._header_use: collections.Counter = collections.Counter()
        # Exact import text per import key, to re-warm replacements.
        self._imports_text: dict[str, str] = {}
        self._started = asyncio.Event()
        self.incrementality = config.repl.incrementality == "on" or (
            config.repl.incrementality == "auto" and any(m in " ".join(config.repl.command) for m in _FORK_MARKS)
        )
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
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*(w.stop(grace) for w in list(self.workers)), return_exceptions=True)
        await asyncio.gather(*list(self._background), return_exceptions=True)
        self.workers.clear()

    async def drain(self, timeout: float) -> None:
        """Waits until no job is queued or running, or timeout passes."""
        end = time.monotonic() + timeout
        while (self._queue or any(w.state in (WorkerState.BUSY, WorkerState.WARMING) for w in self.workers)) and time.monotonic() < end:
            await asyncio.sleep(0.05)

    # -- admission and cancellation ---------------------------------------------

    def _retry_hint(self) -> float:
        busy = max(1, sum(1 for w in self.workers if w.state is WorkerState.BUSY))
        return min(30.0, 0.1 + len(self._queue) / busy * 0.05)

    def _abandon(self, job: Job) -> None:
        if job in self._queue:
            self._queue.remove(job)
        elif job.task is not None and not job.task.done():
            # Running: cancelling the task kills its worker (the REPL cannot
            # abandon a command).
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
        while self._queue:
            idle = [w for w in self.workers if w.state is WorkerState.IDLE]
            starting = sum(1 for w in self.workers if w.state is WorkerState.SPAWNING)
            free_slots = self._free_slots()
            if not idle and free_slots <= 0:
                return
            if self._assign_warm(idle):
                continue
            head = self._queue[0]
            fresh = [w for w in idle if w.import_key is None]
            if fresh:
                self._queue.popleft()
                self._launch_job(head, fresh[0])
                continue
            if free_slots > 0:
                if starting and self._someone_will_hold(head.import_key):
                    return
                self._queue.popleft()
                self._launch_job(head, None)
                continue
            if idle and self._may_switch(head, now):
                victim = min(idle, key=lambda w: w.last_used)
                self.stats.header_switches += 1
                self._retire(victim, ExitCause.HEADER_SWITCH)
                self._queue.popleft()
                self._launch_job(head, None)
                continue
            self._arm_timer(head)
            return

    def _assign_warm(self, idle: list[Worker]) -> bool:
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
            worker = self._best_for_prefix(candidates, job)
            candidates.remove(worker)
            self._queue.remove(job)
            self._launch_job(job, worker)
            assigned = True
            if not any(by_key.values()):
                break
        return assigned

    def _best_for_prefix(self, candidates: list[Worker], job: Job) -> Worker:
        if len(candidates) == 1 or not self.incrementality:
            return max(candidates, key=lambda w: w.last_used)
        body = job.split.padded_body
        return max(
            candidates,
            key=lambda w: (w.reusable_prefix(w.cached_base_env(job.split.preamble_key), body), w.last_used),
        )

    def _someone_will_hold(self, import_key: str) -> bool:
        return any(
            w.import_key == import_key and w.state in (WorkerState.BUSY, WorkerState.WARMING)
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
        delay = max(0.01, head.enqueued_at + self.config.pool.max_wait_for_warm_s - time.monotonic())
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
        job.task = asyncio.create_task(self._run(job, worker), name=f"job-{worker.name}")

    # -- running a job -----------------------------------------------------------

    async def _run(self, job: Job, worker: Worker) -> None:
        assert job.future is not None
        queue_s = time.monotonic() - job.enqueued_at
        job.attempts += 1
        try:
            if worker.state is WorkerState.SPAWNING:
                await self._boot(worker)
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
                job.split.preamble, job.split.preamble_key, self._header_timeout(job)
            )
            header_s += preamble_s
            body = job.split.padded_body
            reused = worker.reusable_prefix(base_env, body) if self.incrementality and job.reuse else 0
            if reused:
                self.stats.prefix_routed += 1
            payload: dict = {"cmd": body, "env": base_env}
            if job.infotree:
                payload["infotree"] = job.infotree
            if self.incrementality and job.reuse:
                payload["incrementality"] = True
            if self.config.repl.elab_async:
                payload["setOptions"] = [[["Elab", "async"], True]]
            started = time.monotonic()
            response = await worker.request(payload, self._body_timeout(job))
            body_s = time.monotonic() - started
            worker.requests_served += 1
            worker.remember_body(base_env, body)
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
                        body_s=body_s,
                        attempts=job.attempts,
                    )
                )
        except asyncio.CancelledError:
            if worker.alive:
                worker.kill(ExitCause.CANCELLED)
            if not job.future.done():
                job.future.cancel()
            raise
        except HeaderLoadError as exc:
            # The process now holds a broken env; replace it.
            worker.kill(ExitCause.HEADER_FAILED)
            self._fail(job, exc)
        except WorkerBootError as exc:
            self._on_boot_failure(exc)
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
        except WorkerError as exc:  # timeout, out of memory
            self._fail(job, exc)
        except Exception as exc:  # pragma: no cover - a bug; still answer
            log.exception("job failed unexpectedly on %s", worker.name)
            worker.kill(ExitCause.CRASH)
            self._fail(job, exc)
        finally:
            self._release(worker)
            self._dispatch()

    def _requeue(self, job: Job) -> None:
        job.task = None
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
        return await worker.load_header(job.split.imports, job.import_key, self._header_timeout(job))

    def _release(self, worker: Worker) -> None:
        """Decides at release time: back to idle, or recycle."""
        if worker.state not in (WorkerState.BUSY, WorkerState.WARMING):
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
        )
        self.workers.append(worker)
        return worker

    async def _boot(self, worker: Worker) -> None:
        try:
            await worker.start(timeout=self.config.pool.header_timeout_s)
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
        from ..core.headers import split_header

        if self._free_slots() <= 0 or self._closing:
            return
        split = split_header(imports)
        worker = self._spawn_worker()

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
                if worker.state is WorkerState.BUSY and worker.recycle_reason is None:
                    worker.recycle_reason = ExitCause.SYSTEM_MEMORY
                    break

    def _keep_warm_spares(self) -> None:
        wanted = self.config.pool.warm_spares
        if not wanted or self._queue:
            return
        idle_loaded = collections.Counter(w.import_key for w in self.workers if w.state in (WorkerState.IDLE, WorkerState.WARMING) and w.import_key)
        for import_key, _count in self._header_use.most_common(wanted):
            if idle_loaded.get(import_key, 0) == 0 and import_key in self._imports_text:
                self._preload_header(self._imports_text[import_key])
