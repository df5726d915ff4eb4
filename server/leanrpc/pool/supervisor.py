"""Supervision: boot, replace, recycle and keep spares.

Owns `Supervisor` (with the circuit breaker of pool/breaker.py: when boot
failures stop the pool), one loop of idempotent steps run on every wake-up (a worker died) and at
least every `_PERIOD_S` (memory is sampled, not signalled):

    reap_dead()        forget dead workers, re-warm a lost header (once the
                       queue is empty: while jobs wait, dispatch starts workers)
    recycle_marked()   system memory: retire the largest idle worker
    keep_spares()      keep `warm_spares` idle workers of the most used headers,
                       per REPL profile by recent demand (the default first)
    retry_boot()       while no worker is up after a failed boot, one boot per
                       pass (the breaker bounds them); `boot_reason()` is
                       health's NOT_SERVING reason meanwhile (the first cause)

May import: config, errors, results, worker (the Worker and its launcher),
pool.prefix_index, pool.job (profile_key), pool.exitlog (the line a worker's
exit gets), pool.breaker. With pool/attempt.py, the one room that kills workers. It never routes jobs: the pool asks it to boot, preload and
retire, and it pokes the pool's dispatch when a slot frees up.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time

import psutil

from ..config import Config
from ..core.headers import split_header
from ..errors import HeaderLoadError, WorkerBootError, WorkerError
from ..worker.identity import identity_from_probe
from ..worker.worker import ExitCause, Worker, WorkerState
from .breaker import CircuitBreaker
from .exitlog import log_worker_exit
from .job import profile_key
from .ports import SupervisorPort

log = logging.getLogger("leanrpc.pool")

# Memory has no event to wait on: sample it this often.
_PERIOD_S = 0.5


class Supervisor:
    def __init__(self, pool: SupervisorPort) -> None:
        # The pool as a SupervisorPort (pool/ports.py): the members it may use.
        self._pool = pool
        self.config: Config = pool.config
        self.breaker = CircuitBreaker(
            self.config.pool.boot_failure_limit, self.config.pool.breaker_cooldown_s
        )
        # The verifier identity of each REPL profile, learnt at its first boot.
        self.identities: dict = {}
        self.header_use: collections.Counter = collections.Counter()
        # (exact import text, profile) per import key, to re-warm replacements.
        self.imports_text: dict[str, tuple[str, str]] = {}
        # Profile name -> when a job of it last arrived (spares follow demand).
        self.profile_seen: dict[str, float] = {}
        self.preloading: set[str] = set()
        self._wake = asyncio.Event()
        self._dead: list[Worker] = []
        # Headers of lost workers not re-warmed yet because jobs were waiting.
        self._rewarm_later: collections.deque = collections.deque(maxlen=self.config.pool.workers)
        self._background: set[asyncio.Task] = set()
        self.booted_once = False
        self._retrying = False

    # -- the loop ----------------------------------------------------------------

    async def run(self) -> None:
        pool = self._pool
        loop = asyncio.get_running_loop()
        while not pool.closing:
            # Woken by `_wake` or by the period's timer, whichever comes first: one
            # timer handle per pass, where wait_for made a task, a waiter and a
            # cancellation (issue 38 item 6: the pass runs twice a second, idle too).
            timer = loop.call_later(_PERIOD_S, self._wake.set)
            try:
                await self._wake.wait()
            finally:
                timer.cancel()
            self._wake.clear()
            if pool.closing:
                return
            try:
                self.reap_dead()
                self.rewarm_deferred()
                self.recycle_marked()
                self.keep_spares()
                self.retry_boot()
            except Exception:  # pragma: no cover - keep supervising
                log.exception("supervisor step failed")

    @property
    def identity(self):
        """The default profile's identity (None before its first boot)."""
        return self.identities.get("")

    def on_worker_dead(self, worker: Worker) -> None:
        """Called at the DEAD transition: reap on the next pass, right away."""
        log_worker_exit(worker)
        self._dead.append(worker)
        self._wake.set()

    def boot_reason(self) -> str:
        """Why nothing can serve for want of a booted REPL ("" when a worker is
        up or may be started on demand): before the first boot, and while no
        worker is up and every boot since the last success failed."""
        if any(
            w.alive and w.state not in (WorkerState.SPAWNING, WorkerState.PROBING)
            for w in self._pool.workers
        ):
            return ""
        failures = self.breaker.consecutive_failures
        if failures:
            return (
                f"no REPL worker is up: {failures} boot failure{'s' if failures > 1 else ''} in a row; "
                f"first: {self.breaker.first_cause}"
            )
        return "" if self.booted_once else "no REPL worker has booted yet"

    @property
    def retrying(self) -> bool:
        """A retry boot is in flight: after a failure, one trial boot at a time
        (the half-open rule), so a job waits for it rather than boot beside it."""
        return self._retrying

    def retry_boot(self) -> None:
        """While no worker is up after a failed boot, tries one boot per pass
        (the breaker still bounds them), so health recovers with no traffic
        and a broken command opens the breaker without waiting for requests."""
        pool = self._pool
        if (
            self._retrying
            or pool.closing
            or not self.breaker.consecutive_failures
            or not self.breaker.allow()
            or any(w.alive for w in pool.workers)
            or pool.free_slots() <= 0
            or len(pool.admission)
            or pool.loads_in_flight
        ):
            return
        worker = pool.spawn_worker()
        self._retrying = True

        async def attempt() -> None:
            try:
                await self.boot(worker)
                if worker.state is WorkerState.READY:
                    worker.release()
            except WorkerError:
                pass  # counted and logged by boot()
            finally:
                self._retrying = False
                pool.poke()  # jobs held back by `retrying` may now dispatch

        self.schedule(attempt(), name=f"retry-boot-{worker.name}")

    def reap_dead(self) -> None:
        pool = self._pool
        dead, self._dead = self._dead, []
        for worker in dead:
            pool.discard_worker(worker)
            self.preloading.discard(worker.name)
            rewarm = worker.import_key
            if rewarm is not None and worker.exit_cause not in (
                ExitCause.HEADER_SWITCH,
                ExitCause.HEADER_FAILED,
            ):
                self.rewarm(rewarm)
        if dead:
            pool.poke()

    def recycle_marked(self) -> None:
        threshold = self.config.limits.max_system_memory_percent
        if not threshold or psutil.virtual_memory().percent < threshold:
            return
        idle = [w for w in self._pool.workers if w.state is WorkerState.IDLE]
        if idle:
            victim = max(idle, key=lambda w: w.tree_rss())
            log.warning("system memory above %.0f%%; recycling %s", threshold, victim.name)
            self._pool.recycle(victim, ExitCause.SYSTEM_MEMORY)
        else:
            for worker in self._pool.workers:
                if worker.busy and worker.recycle_reason is None:
                    worker.drain(ExitCause.SYSTEM_MEMORY)
                    break

    def keep_spares(self) -> None:
        """Keeps `warm_spares` idle workers loaded with the most used headers,
        so a killed worker's next caller finds its header already imported.

        Per profile, by demand: the default profile's top header first, then
        the top header of each profile with traffic in the last
        `spare_profile_window_s` (most recent first), the rest round-robin
        over the most used headers of those profiles. A profile without
        recent traffic keeps none: its idle workers may make room."""
        pool = self._pool
        wanted = self.config.pool.warm_spares
        if not wanted or len(pool.admission) or pool.closing:
            return
        target = self.spare_targets(wanted, time.monotonic())
        if not target:
            return
        have = collections.Counter(
            w.header_key
            for w in pool.workers
            if (w.state is WorkerState.IDLE and w.import_key) or w.name in self.preloading
        )
        for key, count in target.items():
            for _ in range(count - have[key]):
                if pool.free_slots() <= 0:
                    self._free_slot_for_spare(have, target)
                    return
                pool.stats.spares_started += 1
                self.preload_header(*self.imports_text[key])

    def spare_targets(self, wanted: int, now: float) -> collections.Counter:
        """How many idle spares each header key should have (`wanted` in all)."""
        window = self.config.pool.spare_profile_window_s
        active = {
            profile
            for profile, seen in self.profile_seen.items()
            if not profile or now - seen <= window
        }
        ranked = [
            key
            for key, _n in self.header_use.most_common()
            if key in self.imports_text and self.imports_text[key][1] in active
        ]
        if not ranked:
            return collections.Counter()
        top_of: dict[str, str] = {}
        for key in ranked:
            top_of.setdefault(self.imports_text[key][1], key)
        by_recency = sorted(active, key=lambda p: (p != "", -self.profile_seen[p]))
        picks = [top_of[p] for p in by_recency if p in top_of][:wanted]
        ranked = ranked[:wanted]
        picks += [ranked[i % len(ranked)] for i in range(len(picks), wanted)]
        return collections.Counter(picks)

    def _free_slot_for_spare(self, have: collections.Counter, target: collections.Counter) -> None:
        """Retires the least recently used idle worker of a header that has
        more idle workers than its spare target; the next pass loads the spare."""
        surplus = [
            w
            for w in self._pool.workers
            if w.state is WorkerState.IDLE
            and w.import_key
            and len(w.header_keys) == 1
            and have[w.import_key] > target.get(w.import_key, 0)
        ]
        if surplus:
            self.switch_out(min(surplus, key=lambda w: w.last_used))

    def switch_out(self, victim: Worker) -> None:
        """Kills an idle worker so its slot serves another header (counted)."""
        self._pool.stats.header_switches += 1
        victim.kill(ExitCause.HEADER_SWITCH)

    # -- boot, preload, retire ---------------------------------------------------

    def note_header(self, import_key: str, imports: str, profile: str = "") -> None:
        self.header_use[import_key] += 1
        self.profile_seen[profile] = time.monotonic()
        self.imports_text.setdefault(import_key, (imports, profile))

    async def boot(self, worker: Worker) -> None:
        """Starts the worker's process; learns the verifier identity once."""
        pool = self._pool
        started = time.monotonic()
        try:
            probe_fork = pool.features.probe_pending(worker.profile)
            await worker.start(timeout=self.config.pool.header_timeout_s, probe_fork=probe_fork)
        except WorkerBootError as exc:
            if pool.closing:
                # Stopped for the shutdown while it booted: no failure of the REPL's,
                # so no warning and nothing for the breaker.
                log.debug("worker %s: boot stopped by the shutdown: %s", worker.name, exc)
                raise
            log.warning(
                "worker %s boot failed: %s",
                worker.name,
                exc,
                extra={"worker": worker.name, "event": "boot_failure"},
            )
            pool.stats.boot_failures += 1
            if self.breaker.record_failure(exc):
                pool.fail_queued_not_serving(f"no REPL worker can start: {self.breaker.reason}")
            raise
        self.breaker.record_success()
        self.booted_once = True
        log.info(
            "worker %s booted in %.2f s",
            worker.name,
            time.monotonic() - started,
            extra={"worker": worker.name, "event": "boot"},
        )
        if worker.profile not in self.identities:
            identity = identity_from_probe(
                worker.version_string, self.config.repl.profile(worker.profile)
            )
            self.identities[worker.profile] = identity
            log.info(
                "verifier identity%s: %s",
                f" of profile {worker.profile!r}" if worker.profile else "",
                identity.description,
            )
        # The fork question and Elab.async of this worker's own profile.
        identity = self.identities[worker.profile]
        if pool.features.learn(
            worker.profile, bool(worker.is_fork) if probe_fork else None, identity.lean_version
        ):
            log.info(
                "REPL incrementality (fork)%s %s",
                f" of profile {worker.profile!r}" if worker.profile else "",
                "detected" if worker.is_fork else "not detected",
            )

    def retire(self, worker: Worker, cause: ExitCause) -> None:
        if worker.state in (WorkerState.DEAD, WorkerState.FAILED, WorkerState.STOPPING):
            return
        self.schedule(worker.stop(2.0, cause), name=f"retire-{worker.name}")

    def schedule(self, coro, name: str | None = None) -> None:
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def rewarm(self, import_key: str) -> None:
        """Replaces a lost worker with one that already loaded its header.

        So a timeout kill never makes the next caller pay a cold import.
        While jobs wait, dispatch starts workers on demand; the re-warm waits
        for an empty queue (`rewarm_deferred`), else a job that found another
        warm worker left the pool a worker short for good.
        """
        known = self.imports_text.get(import_key)
        if known is None:
            return
        if len(self._pool.admission):
            self._rewarm_later.append(import_key)
            return
        self.preload_header(*known)

    def rewarm_deferred(self) -> None:
        """The re-warms put off while jobs waited, into the slots still free."""
        pool = self._pool
        while self._rewarm_later and not len(pool.admission) and not pool.closing:
            if pool.free_slots() <= 0:
                self._rewarm_later.clear()  # dispatch filled the slots meanwhile
                return
            self.rewarm(self._rewarm_later.popleft())  # the queue is empty: it preloads

    def preload_header(self, imports: str, profile: str = "") -> None:
        pool = self._pool
        if pool.free_slots() <= 0 or pool.closing:
            return
        split = split_header(imports)
        import_key = profile_key(profile, split.import_key)
        worker = pool.spawn_worker(profile)
        worker.loading_key = import_key
        self.preloading.add(worker.name)

        async def warm() -> None:
            try:
                await self.boot(worker)
                if worker.state is not WorkerState.READY:
                    return  # stopped meanwhile (close, memory): nothing to load
                worker.begin_loading()
                pool.stats.header_loads += 1
                header_s = await worker.load_header(
                    split.imports, import_key, self.config.pool.header_timeout_s
                )
                pool.header_cost.observe(import_key, header_s)
                worker.release()
            except (WorkerError, HeaderLoadError) as exc:
                log.warning("pre-loading header on %s failed: %s", worker.name, exc)
                if worker.alive:
                    worker.kill(ExitCause.HEADER_FAILED)
            finally:
                self.preloading.discard(worker.name)
                worker.loading_key = None
                pool.poke()

        self.schedule(warm(), name=f"preload-{worker.name}")

    async def close(self) -> None:
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*list(self._background), return_exceptions=True)
