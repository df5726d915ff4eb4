"""Running one job on a reserved worker: boot, header, preamble, then its kind's work.

Owns: the steps of one attempt (`Runner.launch` -> `_run`), each kind's run
(`BodyJob`: body and after-body checks; `SessionJob`: the session's chain
replayed, then the command; `CallJob`: the WorkerCall on a `WorkerHandle`),
and `ON_FAILURE`, the table of what a failed attempt means for the worker;
what it means for the job is the retry table beside it (pool/retry.py).
May import: config, errors, repl, worker, pool.job, pool.ticket, pool.attempt,
pool.canary, pool.loader, pool.pipeline, pool.replay, pool.retry, pool.slot,
pool.supervisor (types). The pool (a RunnerPort) requeues and fails jobs;
the job's `Attempt` (pool/attempt.py) holds the worker and alone gives it
back or kills it; this room never routes.

One job's path:

    launch -> Attempt (RESERVED) -> _run: Loader.start (own task) -> LOADING
                    load read -> RUNNING; _RUN[kind](job, attempt, prepared) -> outcome
                    Attempt.give_back (GIVEN_BACK), THEN outcome -> ticket.future
               failure: ON_FAILURE[exception kind] -> Attempt.kill? ; ON_RETRY -> the job
               left during the load: Attempt.leave_to_load (LEFT_TO_LOAD)

A body job may lead a pipelined group (pool/pipeline.py): once its worker
holds the header, it takes queued body jobs of its own stream along and
sends every body with its checks in one exchange; each rider is answered
with its own outcome; a rider's own timeout answers that rider, sends the
bodies that ran before it again alone and the others as they were
(`RiderTimedOut` -> Then.ALONE for the lead), and any other failed group
sends its bodies again alone (`GroupBroken` -> Then.ALONE).

On success the worker is given back before the job is answered: the plan that
hands it its next job then runs ahead of this answer's conversion and sending
(both wait in the loop's queue), which is REPL time otherwise spent idle.

The load is a task of its own (pool/loader.py): a job cancelled or past its
deadline during it is answered at once and the load goes on. Only a cancel
during the job's own requests, when the REPL is mid-command, kills the worker.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, NamedTuple

from .. import repl
from ..errors import HeaderLoadError, NotServingError, WorkerBootError, WorkerCrashed, WorkerError
from ..worker.worker import ExitCause, Worker
from .attempt import Attempt, Stage
from .canary import CanaryFailed, CanaryGuard, CanarySource
from .job import BodyJob, BodyOutcome, CallJob, CallOutcome, Job, SessionJob, SessionOutcome
from .loader import Loader, Prepared
from .pipeline import GroupBroken, RiderTimedOut, again, run_group
from .ports import RunnerPort
from .replay import realize_session
from .retry import Facts, Next, Then, decide
from .slot import Slot, WorkerHandle
from .ticket import Ticket

if TYPE_CHECKING:
    from .supervisor import Supervisor

__all__ = ["ON_FAILURE", "Then", "Runner"]  # Then: pool/retry.py, re-exported

log = logging.getLogger("leanrpc.pool")


# Exception kind -> (the worker's exit cause if it is killed, what becomes of
# the job); the first kind that matches decides. A worker not killed goes
# back to the pool (release, or its load when the job left during one).
# Only the pool kills: a worker in doubt never serves again.
ON_FAILURE: tuple[tuple[type[BaseException], ExitCause | None, Then], ...] = (
    # It answered a canary wrong: it lies (pool/canary.py); the job goes again elsewhere.
    (CanaryFailed, ExitCause.POISONED, Then.RETRY),
    # Not known whose: the worker is gone or in doubt; each body runs again alone.
    (GroupBroken, ExitCause.CRASH, Then.ALONE),
    # A rider's own timeout (answered with it): the worker layer killed the worker;
    # the lead ran before it, and may have left what stalled it: it goes again alone.
    (RiderTimedOut, None, Then.ALONE),
    # The process holds a broken env: replace it; the header is the user's problem.
    (HeaderLoadError, ExitCause.HEADER_FAILED, Then.FAIL),
    # It never booted (Supervisor.boot counted it for the breaker).
    (WorkerBootError, None, Then.RETRY_BOOT),
    # Any doubt poisons: a crash, a poisoned exchange, a diverged replay.
    (WorkerCrashed, ExitCause.CRASH, Then.RETRY),
    # Timeout, out of memory: the worker layer has killed it already.
    (WorkerError, None, Then.FAIL),
    (NotServingError, None, Then.FAIL),  # shutdown
    # A bug: still answer, and trust nothing the worker holds.
    (Exception, ExitCause.CRASH, Then.FAIL),
)


class Runner:
    def __init__(
        self, pool: RunnerPort, supervisor: Supervisor, canary_source: CanarySource | None = None
    ) -> None:
        self._pool = pool
        self._supervisor = supervisor
        self.loader = Loader(pool, supervisor)
        # Canaries before jobs ([canary]); none without a writer (services/canary.py).
        self.canaries = CanaryGuard(pool.config.canary, canary_source)

    @property
    def loads(self) -> set[asyncio.Task]:
        """Boot/header loads still running (for jobs that run, or left)."""
        return self.loader.loads

    def launch(self, ticket: Ticket, worker: Worker) -> None:
        pool = self._pool
        job = ticket.job
        attempt = ticket.attempt = Attempt(pool, worker, retire_worker=job.retire_worker)
        if not isinstance(job, CallJob) and pool.routes_by_prefix(ticket):
            attempt.inflight_key = pool.index.reserve(worker.name, job.scope, job.text)
        # Counted here, not in the task: the next plan must see the worker as used.
        slot = pool.slots.of(worker.name)
        shared = slot.attempts > 0  # another job's code may have run here first
        slot.attempts += 1
        task = asyncio.create_task(self._run(ticket, attempt, shared), name=f"job-{worker.name}")
        attempt.task = task
        task.add_done_callback(attempt.task_done)

    # -- one attempt -------------------------------------------------------------

    async def _run(self, ticket: Ticket, attempt: Attempt, shared: bool) -> None:
        job, future = ticket.job, ticket.future
        worker = attempt.worker
        queue_s = time.monotonic() - ticket.enqueued_at
        ticket.attempts += 1
        attempt.loading(self.loader.start(job, worker))
        load = attempt.load
        try:
            # A cancel or deadline before the load's outcome is read leaves
            # the worker to the load (Attempt.leave_to_load).
            await self.loader.wait(job, worker, load)
            attempt.loaded()
            if load.cancelled():
                raise NotServingError("server is shutting down")
            await self.canaries.before(job, worker)  # when one is due (pool/canary.py)
            outcome = await _RUN[type(job)](self, ticket, attempt, load.result(), queue_s)
            # The worker goes back before the answer: the dispatcher's next
            # job for it is then scheduled ahead of this answer's conversion
            # and sending, so the REPL waits less between commands.
            attempt.give_back()
            if not future.done():
                future.set_result(outcome)
        except asyncio.CancelledError:
            if attempt.stage is Stage.RUNNING:  # mid-command: the REPL cannot abandon it
                attempt.kill_worker(ExitCause.CANCELLED)
            if not future.done():
                future.cancel()
            raise
        except Exception as exc:
            self._on_failure(ticket, attempt, exc, shared)
        finally:
            if attempt.stage is Stage.LOADING:
                attempt.leave_to_load()
            elif not attempt.ended:
                attempt.give_back()

    def _on_failure(self, ticket: Ticket, attempt: Attempt, exc: Exception, shared: bool) -> None:
        """ON_FAILURE applied: the worker killed or left to be given back, then
        ON_RETRY (pool/retry.py) decides the job: requeued, or failed. A RETRY
        failure on a `shared` process (one that had run another job's attempt
        first) is not charged to the job: what another job's code left behind
        (a thread that forges the next frame, a stolen stdin) fails whoever
        comes next. The job goes again, once, on a process nothing ran on,
        where a failure is its own: an honest job never pays for a forger, and
        a job that fails every process still ends."""
        pool = self._pool
        kind, kill, then = next(row for row in ON_FAILURE if isinstance(exc, row[0]))
        if kind is Exception:
            log.error("job failed unexpectedly on %s", attempt.worker.name, exc_info=exc)
        if kill is not None and attempt.stage is Stage.RUNNING:
            attempt.kill_worker(kill)
        facts = Facts(
            shared=shared,
            fresh_process=ticket.fresh_process,
            closing=pool.closing,
            charged=ticket.attempts - ticket.uncharged,
            attempts=ticket.attempts,
            max_retries=pool.config.pool.max_retries,
            breaker_allows=then is Then.RETRY_BOOT and self._supervisor.breaker.allow(),
        )
        step = decide(then, facts)
        if step is Next.ALONE:
            again(pool, ticket, alone=True)
        elif step is Next.FRESH:
            ticket.uncharged += 1
            pool.stats.retries += 1
            pool.stats.fresh_retries += 1
            pool.requeue(ticket, fresh_process=True)
        elif step is Next.RETRY:
            pool.stats.retries += 1
            pool.requeue(ticket)
        elif step is Next.REBOOT:
            pool.requeue(ticket)
        elif step is Next.NOT_SERVING:  # no REPL could start: never a verdict (issue 41 item 2)
            pool.fail(ticket, NotServingError(f"no REPL worker can start: {exc.message}"))
        else:
            pool.fail(ticket, exc)

    # -- each kind's work, once the worker holds the job's header and preamble ----

    async def _run_body(
        self, ticket: Ticket, attempt: Attempt, prepared: Prepared, queue_s: float
    ) -> BodyOutcome:
        job: BodyJob = ticket.job
        worker = attempt.worker
        riders = self._pool.take_riders(ticket, worker)
        if riders:
            try:  # the riders' own canary draws, before the group's one exchange
                await self.canaries.before_riders(job, worker, len(riders))
            except BaseException:
                for rider in riders:  # nothing of theirs ran: back as they were
                    if not rider.future.done():
                        self._pool.requeue(rider)
                raise
            total = None if job.deadline is None else max(0.001, job.deadline - time.monotonic())
            return await run_group(
                self._pool,
                ticket,
                riders,
                lambda one: self._command(one, worker, prepared.base_env),
                attempt,
                prepared,
                queue_s,
                _bounded(job.timeout_s, job),
                total,
            )
        sent = await self._send(job, attempt, prepared.base_env)
        after, reference, reference_s = await self._follow_up(job, worker, sent)
        return BodyOutcome(
            response=sent.response,
            after_response=after,
            worker=worker.name,
            warm_header=prepared.warm,
            reused_prefix_chars=sent.reused,
            queue_s=queue_s,
            header_s=prepared.header_s,
            boot_s=prepared.boot_s,
            body_s=sent.body_s,
            attempts=ticket.attempts,
            preamble_messages=prepared.preamble_messages,
            reference_response=reference,
            reference_s=reference_s,
        )

    async def _run_session(
        self, ticket: Ticket, attempt: Attempt, prepared: Prepared, queue_s: float
    ) -> SessionOutcome:
        job: SessionJob = ticket.job
        pool = self._pool
        worker = attempt.worker
        started = time.monotonic()
        session = job.session.session
        slot = pool.slots.of(worker.name)
        run_env, replayed = await realize_session(
            session,
            worker,
            slot.built(session),
            prepared.base_env,
            job.session.parent,
            _bounded(pool.config.pool.header_timeout_s, job),
        )
        pool.stats.session_replays += replayed
        header_s = prepared.header_s + time.monotonic() - started
        sent = await self._send(job, attempt, run_env)
        # Recorded before the follow-up: the env exists whatever its checks say.
        session_env = _record_session(job, slot, sent.response)
        after, _reference, _reference_s = await self._follow_up(job, worker, sent)
        return SessionOutcome(
            response=sent.response,
            after_response=after,
            worker=worker.name,
            warm_header=prepared.warm,
            reused_prefix_chars=sent.reused,
            queue_s=queue_s,
            header_s=header_s,
            boot_s=prepared.boot_s,
            body_s=sent.body_s,
            attempts=ticket.attempts,
            session_env=session_env,
            replayed_commands=replayed,
            preamble_messages=prepared.preamble_messages,
        )

    async def _run_call(
        self, ticket: Ticket, attempt: Attempt, prepared: Prepared, queue_s: float
    ) -> CallOutcome:
        """The call runs its own requests on the worker, through a handle that cannot kill it."""
        job: CallJob = ticket.job
        started = time.monotonic()
        worker = attempt.worker
        handle = WorkerHandle(worker, self._pool.slots.of(worker.name))
        value = await job.call.run(handle, prepared.base_env, _bounded(job.timeout_s, job))
        worker.requests_served += 1
        return CallOutcome(
            value=value,
            worker=worker.name,
            warm_header=prepared.warm,
            queue_s=queue_s,
            header_s=prepared.header_s,
            boot_s=prepared.boot_s,
            body_s=time.monotonic() - started,
            attempts=ticket.attempts,
        )

    def _command(self, job: BodyJob | SessionJob, worker: Worker, env: int) -> tuple[dict, int]:
        """The job's command on `env`, and how much of it the worker's history holds."""
        pool = self._pool
        body = job.text
        features = pool.features.of(job.profile)  # the job's own profile's REPL
        incremental = features.incrementality and job.reuse
        reused = pool.index.reusable_prefix(worker.name, job.scope, body) if incremental else 0
        if reused:
            pool.stats.prefix_routed += 1
            pool.stats.prefix_reused_chars += reused
        payload = repl.command(
            job.sent_text(),
            env,
            infotree=job.infotree,
            all_tactics=job.all_tactics,
            root_goals=job.root_goals,
            declarations=job.declarations,
            incrementality=incremental,
            elab_async=features.elab_async,
        )
        return payload, reused

    async def _send(self, job: BodyJob | SessionJob, attempt: Attempt, env: int) -> _Sent:
        """The command on `env`, pipelined with its after-body checks where the
        channel is fenced (one fence, one audit: the checks name the env the
        command will get, the channel's next one)."""
        pool = self._pool
        worker = attempt.worker
        body = job.text
        payload, reused = self._command(job, worker, env)
        started = time.monotonic()
        follow = job.apart()
        pipelined = bool(follow) and worker.fenced
        early: list = []
        if pipelined:
            predicted = worker.next_env
            total = None if job.deadline is None else max(0.001, job.deadline - time.monotonic())
            early = await worker.request_batch(
                [payload] + [repl.command(t, predicted) for t in follow],
                _bounded(job.timeout_s, job),
                total,
            )
            response, early = early[0], early[1:]
            if response.env != predicted:
                early = []  # no env (a refusal): the checks' answers are not about this body
        else:
            response = await worker.request(payload, _bounded(job.timeout_s, job))
        response, inline = job.split_answer(response)  # the checks that rode in it
        body_s = time.monotonic() - started
        worker.requests_served += 1
        pool.cost.observe(body_s, len(body) - reused)
        # The history owns the in-flight entry now.
        pool.index.remember(worker.name, job.scope, body, attempt.remembered())
        return _Sent(response, early, pipelined, reused, body_s, inline)

    async def _follow_up(self, job: BodyJob | SessionJob, worker: Worker, sent: _Sent):
        """The after-body checks' answers: (after, reference, reference_s),
        from the pipelined batch, or asked now when the channel is not fenced."""
        if sent.inline is not None:  # they rode in the command: answered with it
            return (*sent.inline, 0.0)
        after = reference = None
        reference_s = 0.0
        early = list(sent.early)
        query = job.reference_query if isinstance(job, BodyJob) else None
        if early:
            if job.after_body:
                after = early.pop(0)
            if query:
                reference = early.pop(0)
        elif not sent.pipelined and sent.response.env is not None:
            if job.after_body:
                after = await worker.request(
                    repl.command(job.after_body, sent.response.env), _bounded(job.timeout_s, job)
                )
            if query:
                started = time.monotonic()
                reference = await worker.request(
                    repl.command(query, sent.response.env), _bounded(job.timeout_s, job)
                )
                reference_s = time.monotonic() - started
        return after, reference, reference_s

    async def close(self) -> None:
        await self.loader.close()


def _bounded(timeout: float, job: Job) -> float:
    """`timeout`, cut to what is left before the job's deadline."""
    if job.deadline is not None:
        timeout = min(timeout, max(0.001, job.deadline - time.monotonic()))
    return timeout


class _Sent(NamedTuple):
    """A command's answer, with the pipelined checks' answers that are about it."""

    response: repl.Response
    early: list
    pipelined: bool
    reused: int
    body_s: float
    inline: list | None  # [after, reference] that rode in the command (repl.trailing), or None


def _record_session(job: SessionJob, slot: Slot, response: repl.Response) -> int | None:
    call = job.session
    if not call.record or response.env is None:
        return None
    session = call.session
    session_env = session.record(call.parent, call.text)
    slot.built(session)[session_env] = response.env
    return session_env


# Each kind's run (Runner._run picks one by the job's class).
_RUN = {BodyJob: Runner._run_body, SessionJob: Runner._run_session, CallJob: Runner._run_call}
