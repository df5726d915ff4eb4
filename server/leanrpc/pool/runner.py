"""Running one job on a reserved worker: boot, header, preamble, body.

Owns: the steps of one attempt (`Runner.launch` → `_run`), building the
preamble envs (kept in the worker's slot, pool/slot.py), and the rule for
what a failed attempt means (retry, fail, give the worker back). May import:
config, errors, repl, worker, pool.job, pool.replay, pool.slot. The pool (passed in) gives
back, requeues and fails jobs; this room never routes.

Boot, header load and preamble run as a task of their own (`_prepare`). A job
cancelled (or past its deadline) during them is answered at once, but the
load goes on: on success the worker turns IDLE holding the header, like any
warm worker; on failure the usual handling applies (a boot failure counts for
the breaker once, a failed header kills the worker). Only a cancel during the
body, when the REPL is mid-command, kills the worker.
"""

from __future__ import annotations

import asyncio
import logging
import time

from .. import repl
from ..errors import HeaderLoadError, NotServingError, WorkerBootError, WorkerCrashed, WorkerError, WorkerTimeout
from ..worker.worker import ExitCause, Worker, WorkerState
from .job import BodyOutcome, Job
from .ports import RunnerPort
from .replay import realize_session
from .slot import Slot, WorkerHandle

log = logging.getLogger("leanrpc.pool")

class Runner:
    def __init__(self, pool: RunnerPort) -> None:
        self._pool = pool
        # Boot/header loads of running jobs; close() ends them by stopping
        # their workers, so their exit cause stays SHUTDOWN.
        self.loads: set[asyncio.Task] = set()

    def launch(self, job: Job, worker: Worker) -> None:
        pool = self._pool
        if pool.router.routes_by_prefix(job) and job.call is None:
            job.inflight_key = pool.index.reserve(worker.name, job.scope, job.text)
        job.task = asyncio.create_task(self._run(job, worker), name=f"job-{worker.name}")
        job.task.add_done_callback(lambda task, worker=worker, job=job: self._on_task_done(task, worker, job))

    def _on_task_done(self, task: asyncio.Task, worker: Worker, job: Job) -> None:
        pool = self._pool
        if job.inflight_key is not None:  # never ran: _run's cleanup did not drop it
            pool.index.unreserve(job.inflight_key)
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
        pool.poke()

    # -- one attempt -------------------------------------------------------------

    async def _run(self, job: Job, worker: Worker) -> None:
        pool = self._pool
        config = pool.config
        assert job.future is not None
        queue_s = time.monotonic() - job.enqueued_at
        job.attempts += 1
        ready = self._ready(job, worker)
        if ready is not None:  # nothing to boot or load: no task, no loop round trip
            load = job.load = asyncio.get_running_loop().create_future()
            load.set_result(ready)
        else:
            load = job.load = asyncio.create_task(self._prepare(job, worker), name=f"load-{worker.name}")
            self.loads.add(load)
            load.add_done_callback(self.loads.discard)
        # True until the load's outcome is read here; a cancel or deadline
        # before then leaves the worker to the load (_adopt_load).
        loading = True
        try:
            if not load.done():
                await self._await_load(job, worker, load)
            loading = False
            if load.cancelled():
                raise NotServingError("server is shutting down")
            boot_s, warm, header_s, base_env, preamble_messages = load.result()
            if job.call is not None:
                await self._run_call(job, worker, base_env, queue_s, boot_s, warm, header_s)
                return
            replayed = 0
            run_env = base_env
            if job.session is not None:
                started = time.monotonic()
                session = job.session.session
                run_env, replayed = await realize_session(
                    session, worker, pool.slots.of(worker.name).built(session), base_env, job.session.parent,
                    _bounded(config.pool.header_timeout_s, job))
                pool.stats.session_replays += replayed
                header_s += time.monotonic() - started
            body = job.text
            features = pool.features.of(job.profile)  # the job's own profile's REPL
            incremental = features.incrementality and job.reuse
            reused = pool.index.reusable_prefix(worker.name, job.scope, body) if incremental else 0
            if reused:
                pool.stats.prefix_routed += 1
                pool.stats.prefix_reused_chars += reused
            payload = repl.command(body, run_env, infotree=job.infotree, incrementality=incremental,
                                   elab_async=features.elab_async)
            started = time.monotonic()
            # Body and its after-body checks pipelined (one fence, one audit): the
            # checks name the env the body will get, the channel's next one.
            follow = [text for text in (job.after_body, job.reference_query) if text]
            predicted = worker.next_env
            early: list = []
            if follow and worker.fenced:
                total = None if job.deadline is None else max(0.001, job.deadline - time.monotonic())
                early = await worker.request_batch([payload] + [repl.command(t, predicted) for t in follow],
                                                   _bounded(job.timeout_s, job), total)
                response, early = early[0], early[1:]
                if response.env != predicted:
                    early = []  # no env (a refusal): the checks' answers are not about this body
            else:
                response = await worker.request(payload, _bounded(job.timeout_s, job))
            body_s = time.monotonic() - started
            worker.requests_served += 1
            pool.cost.observe(body_s, len(body) - reused)
            pool.index.remember(worker.name, job.scope, body, job.inflight_key)
            job.inflight_key = None  # the history owns the entry now
            session_env = _record_session(job, pool.slots.of(worker.name), response)
            after = None
            reference_response, reference_s = None, 0.0
            if early:
                if job.after_body:
                    after = early.pop(0)
                if job.reference_query:
                    reference_response = early.pop(0)
            elif not (follow and worker.fenced):
                if job.after_body and response.env is not None:
                    after = await worker.request(repl.command(job.after_body, response.env),
                                                 _bounded(job.timeout_s, job))
                if job.reference_query and response.env is not None:
                    started = time.monotonic()
                    reference_response = await worker.request(repl.command(job.reference_query, response.env),
                                                              _bounded(job.timeout_s, job))
                    reference_s = time.monotonic() - started
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
                        preamble_messages=preamble_messages,
                        reference_response=reference_response,
                        reference_s=reference_s,
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
            pool.fail(job, exc)
        except WorkerBootError as exc:
            # Supervisor.boot already counted this failure for the breaker.
            if not pool.supervisor.breaker.allow():
                pool.fail(job, NotServingError(str(exc)))
            elif job.attempts > config.pool.max_retries + 1:
                pool.fail(job, exc)
            else:
                pool.requeue(job)
        except WorkerCrashed as exc:
            # Any doubt poisons: a crash, a poisoned exchange or a diverged
            # replay leaves no worker to reuse (most are dead already).
            if worker.alive:
                worker.kill(ExitCause.CRASH)
            if job.attempts <= config.pool.max_retries and not pool.closing:
                pool.stats.retries += 1
                pool.requeue(job)
            else:
                pool.fail(job, exc)
        except (WorkerError, NotServingError) as exc:  # timeout, out of memory, shutdown
            pool.fail(job, exc)
        except Exception as exc:  # pragma: no cover - a bug; still answer
            log.exception("job failed unexpectedly on %s", worker.name)
            worker.kill(ExitCause.CRASH)
            pool.fail(job, exc)
        finally:
            if job.inflight_key is not None:
                pool.index.unreserve(job.inflight_key)
                job.inflight_key = None
            if loading:
                self._adopt_load(worker, load)
            else:
                pool.release(worker)
            pool.poke()

    async def _run_call(self, job: Job, worker: Worker, base_env: int, queue_s: float, boot_s: float,
                        warm: bool, header_s: float) -> None:
        """A WorkerCall job: the call runs its own requests on the worker."""
        assert job.call is not None and job.future is not None
        started = time.monotonic()
        handle = WorkerHandle(worker, self._pool.slots.of(worker.name))
        value = await job.call.run(handle, base_env, _bounded(job.timeout_s, job))
        worker.requests_served += 1
        if not job.future.done():
            job.future.set_result(BodyOutcome(
                response=value, after_response=None, worker=worker.name, warm_header=warm,
                reused_prefix_chars=0, queue_s=queue_s, header_s=header_s, boot_s=boot_s,
                body_s=time.monotonic() - started, attempts=job.attempts,
            ))

    async def _prepare(self, job: Job, worker: Worker) -> tuple[float, bool, float, int, list]:
        """Boots the worker if needed, loads the job's header and preamble.

        Returns (boot_s, warm, header_s, base_env, preamble messages). Runs as
        its own task that the job never cancels: a cancelled request would
        kill the worker and throw the load away.
        """
        pool = self._pool
        boot_s = 0.0
        if worker.state is WorkerState.SPAWNING:
            started = time.monotonic()
            await pool.supervisor.boot(worker)
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
            header_s = await worker.load_header(job.split.imports, job.import_key, pool.config.pool.header_timeout_s)
            if worker.state is WorkerState.LOADING:
                worker.reserve()
        else:
            worker.use_header(job.import_key)
            pool.stats.header_hits += 1
        base_env, messages, preamble_s = await self._ensure_preamble(job, worker)
        return boot_s, warm, header_s + preamble_s, base_env, messages

    def _ready(self, job: Job, worker: Worker) -> tuple[float, bool, float, int, list] | None:
        """`_prepare`'s answer when it has no REPL work to do (the worker is up
        and holds the job's header and preamble), else None."""
        if worker.state is WorkerState.SPAWNING or not worker.holds(job.import_key):
            return None
        held = self._held_preamble(job, worker)
        if held is None:
            return None
        worker.use_header(job.import_key)
        self._pool.stats.header_hits += 1
        return 0.0, True, 0.0, held[0], held[1]

    def _held_preamble(self, job: Job, worker: Worker) -> tuple[int, list] | None:
        """The env (and Lean's messages) of the job's preamble on this worker, if held."""
        split = job.split
        header_env = worker.header_env(job.import_key)
        if header_env is None:
            return None
        if not split.preamble_key:
            return header_env, []
        return self._pool.slots.of(worker.name).preamble(_preamble_key(job))

    async def _ensure_preamble(self, job: Job, worker: Worker) -> tuple[int, list, float]:
        """The env of the job's open/set_option preamble on this worker.

        Lean's messages for the preamble (errors included) are data for the
        result, like the body's: an `open` of an unknown namespace makes the
        snippet INVALID, it does not make the header fail (issue 15 item 5).
        """
        split = job.split
        header_env = worker.header_env(job.import_key)
        if header_env is None:
            raise WorkerCrashed(f"worker {worker.name} has no env for the job's header")
        if not split.preamble_key:
            return header_env, [], 0.0
        # A worker holds several headers: a preamble env belongs to one of them.
        key = _preamble_key(job)
        slot = self._pool.slots.of(worker.name)
        found = slot.preamble(key)
        if found is not None:
            return found[0], found[1], 0.0
        started = time.monotonic()
        response = await worker.request(repl.command(split.preamble, header_env),
                                        self._pool.config.pool.header_timeout_s)
        if response.env is None:
            # A REPL-level refusal (no env at all), not a Lean message.
            raise HeaderLoadError(f"the REPL refused the open/set_option lines: {response.message!r}")
        messages = list(response.messages)
        slot.put_preamble(key, response.env, messages)
        return response.env, messages, time.monotonic() - started

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
            # Boot failures were counted by Supervisor.boot; crashes and
            # timeouts already killed the worker.
            if worker.alive:
                worker.kill(ExitCause.CRASH)
        else:
            self._pool.release(worker)
        self._pool.poke()

    async def close(self) -> None:
        if self.loads:
            # Their workers are stopped, so they fail at once; cancel any straggler.
            _done, stragglers = await asyncio.wait(list(self.loads), timeout=10.0)
            for task in stragglers:
                task.cancel()
            await asyncio.gather(*stragglers, return_exceptions=True)


def _preamble_key(job: Job) -> str:
    return f"{job.import_key}\x00{job.split.preamble_key}"


def _bounded(timeout: float, job: Job) -> float:
    """`timeout`, cut to what is left before the job's deadline."""
    if job.deadline is not None:
        timeout = min(timeout, max(0.001, job.deadline - time.monotonic()))
    return timeout


def _record_session(job: Job, slot: Slot, response: repl.Response) -> int | None:
    call = job.session
    if call is None or not call.record or response.env is None:
        return None
    session = call.session
    session_env = session.record(call.parent, call.text)
    slot.built(session)[session_env] = response.env
    return session_env
