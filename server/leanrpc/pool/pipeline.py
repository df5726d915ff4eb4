"""Pipelined bodies: several body jobs of one stream on one worker, one fence, one audit.

Owns: which jobs may lead a group and which queued jobs may ride with a lead
(`take_riders`: `may_lead`, `fits`, `rider_limit`, `within_time`), the group's
commands (each body, then its after-body checks naming the env the body will
get: `Group`), its one
exchange and each body's outcome (`run_group`: riders answered here, the
lead's outcome returned to the runner), and which bodies a failed group runs
again (`Group.lead_failed`, `Group.owner`, `again`, `GroupBroken`,
`RiderTimedOut`). May import: repl, errors (WorkerTimeout), config and worker
(types), pool.job, pool.ticket, pool.admission, pool.attempt, pool.cost,
pool.loader and pool.ports (types). It reads the frozen jobs and writes the
tickets' bookkeeping (attempts, uncharged, solo, future). The runner
(pool/runner.py) starts a group and applies its failure table to the lead.

    lead (dispatched) + riders (same client, stream, header, preamble, limits)
      -> [body 0 (its checks on its last lines), body 1, ...] + ONE fence -> one audit
      -> each body's answer, cut from its checks' (BodyJob.split_answer) -> its job's outcome
    (a body asking for an infotree: [body 0, its checks, body 1, ...], each check a command)

Why it is safe (docs/SECURITY.md, "Pipelined bodies"):

* Each answer is proven to answer its own command: the channel's batch
  exchange takes exactly one frame per command, in order, before the fence's
  answer, and checks the env and proof-state counters answer by answer; a
  missing, extra or forged frame poisons the worker and NO answer of the
  group is delivered (the audit vouches for the whole group or for none).
* A body's checks in its own command are about it (repl/trailing.py). Checks
  sent as commands of their own are believed only when the body got the env
  predicted for it: the checks name that env, so they are about that body. When an earlier
  body broke the count (it was refused an env), a later body's checks named
  another env: that body goes again alone, never gets a verdict from them.
* A failure of one body never becomes another body's verdict. A failure in
  the lead's own commands is the lead's, exactly as if it ran alone (nothing
  of the group ran before it). A timeout in a rider's own commands (its
  body or its checks: the timer restarts at each answer, so the REPL was the
  rider's alone for the whole limit) is that rider's, as a lone job's timeout
  is its own on a process other jobs ran on (`Group.owner`, `RiderTimedOut`).
  The bodies after it never ran: they go again, uncharged, and may ride
  again. The lead and the riders answered before it go again ALONE: one of
  them may have left code behind that stalled it (code that got past the
  policy), and in a new group it would stall the next sibling, and the next
  (tests/canary/test_stall_after_trap.py). Any
  other failure (a crash, memory, a poisoned exchange, a failed audit in a
  rider, anything at the fence) is not charged to anyone: every body of the
  group runs again ALONE (`Ticket.solo`), uncharged, where the usual rules
  charge a failure to its own body.
* Every body gets exactly one answer: from the group, or from its run alone.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING, Callable, NamedTuple

from .. import repl
from ..errors import WorkerTimeout
from .job import BodyJob, BodyOutcome

if TYPE_CHECKING:
    from ..config import Config
    from ..worker.worker import Worker
    from .admission import Admission
    from .attempt import Attempt
    from .cost import BodyCostModel
    from .loader import Prepared
    from .ports import RunnerPort
    from .ticket import Ticket

__all__ = [
    "Group",
    "GroupBroken",
    "Piece",
    "RiderTimedOut",
    "again",
    "fits",
    "may_lead",
    "rider_limit",
    "run_group",
    "take_riders",
    "within_time",
]


class GroupBroken(Exception):
    """A group failed outside its lead's own commands: nobody is charged, every
    body goes again alone (the runner's failure table: Then.ALONE)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"a pipelined group failed: {cause}")
        self.cause = cause


class RiderTimedOut(Exception):
    """A rider's own commands ran out of time: that rider is answered with its
    timeout, and the lead goes again alone, uncharged (the runner's failure table:
    Then.ALONE), as do the riders answered before it; the riders after it, which
    never ran, go again as they were (`run_group`)."""

    def __init__(self, cause: WorkerTimeout) -> None:
        super().__init__(f"a rider of a pipelined group timed out: {cause}")
        self.cause = cause


def may_lead(ticket: Ticket) -> bool:
    """A body job that may take riders: not one that must run alone or on a fresh process."""
    job = ticket.job
    return (
        type(job) is BodyJob
        and not ticket.solo
        and not ticket.fresh_process
        and not job.retire_worker
    )


def fits(lead: Ticket, ticket: Ticket, worker: str) -> bool:
    """`ticket`'s job may ride with `lead`'s on `worker`: a body on the same header
    and preamble (the lead's base env), with the same time limits (one exchange
    bounds them all), that may share a process and still waits for an answer."""
    job, first = ticket.job, lead.job
    return (
        type(job) is BodyJob
        and not ticket.solo
        and not ticket.fresh_process
        and not job.retire_worker
        and job.scope == first.scope
        and job.profile == first.profile
        and job.timeout_s == first.timeout_s
        and job.deadline == first.deadline
        and job.avoid_worker != worker
        and not ticket.future.done()
    )


def take_riders(
    admission: Admission,
    workers: list[Worker],
    config: Config,
    cost: BodyCostModel,
    lead: Ticket,
    worker: Worker,
) -> list[Ticket]:
    """Queued jobs that run pipelined with `lead` on `worker`, taken out of the
    queue: at most `pool.pipeline_bodies` - 1, no more than the lead's share
    of its stream over `worker` and the idle workers of its profile
    (`rider_limit`), and no more than fit the group's time (`within_time`). Workers
    busy with other jobs take no share: spreading a stream over them would only
    cut it into more groups, each with its own fence, audit and memory polls,
    whose bodies still wait for a worker."""
    if not may_lead(lead):
        return []
    profile = lead.job.profile
    idle = sum(
        1
        for w in workers
        if w is not worker and w.alive and not w.reserved and w.profile == profile
    )
    limit = rider_limit(config.pool.pipeline_bodies - 1, admission.stream_length(lead), 1 + idle)
    if not limit:
        return []
    in_time = within_time(cost, config.pool.pipeline_group_s, lead)
    return admission.riders(
        lead, limit, lambda ticket: fits(lead, ticket, worker.name) and in_time(ticket)
    )


def rider_limit(most: int, queued: int, workers: int) -> int:
    """How many riders a lead takes: at most `most`, and no more than its share
    of the `queued` jobs of its stream over the `workers` that could serve them
    now (its own and the idle ones), so a group of 16 on 8 idle workers still
    spreads (about 2 each) while on workers that are all busy it rides in
    groups as large as `most` allows."""
    if most <= 0 or queued <= 0:
        return 0
    return min(most, math.ceil(queued / max(1, workers)))


def within_time(cost: BodyCostModel, budget_s: float, lead: Ticket) -> Callable[[Ticket], bool]:
    """A rider's test that the group's expected REPL time, the lead's and the riders' taken
    so far by the pool's body cost model (pool/cost.py), stays within `budget_s`
    (`pool.pipeline_group_s`): the wait another client may have behind one group is about
    `budget_s` whatever the bodies cost, where a count alone made it a group of the slowest
    bodies. A GRPO group of fast bodies still runs as one group. Before any body was
    observed, every rider fits (`pipeline_bodies` alone bounds the group)."""
    if not cost.known:
        return lambda ticket: True
    left = budget_s - cost.seconds(len(lead.job.text))

    def in_time(ticket: Ticket) -> bool:
        nonlocal left
        seconds = cost.seconds(len(ticket.job.text))
        if seconds > left:
            return False
        left -= seconds
        return True

    return in_time


class Piece(NamedTuple):
    """One body's share of a group's answers."""

    job: BodyJob
    response: repl.Response
    early: list  # its checks' answers, [] when they are not about this body
    in_step: bool  # False: an earlier body broke the env count (its checks named another env)
    body_s: float
    reference_s: float


class Group:
    """The commands of a lead and its riders, and their answers read back."""

    def __init__(self, jobs: list[BodyJob], first_env: int) -> None:
        self.jobs = jobs
        self.follow = [job.apart() for job in jobs]
        # The env each body will get when every command before it got one.
        self.predicted = []
        env = first_env
        for follow in self.follow:
            self.predicted.append(env)
            env += 1 + len(follow)

    def payloads(self, commands: list) -> list:
        """Each body's command (given, in job order), then its checks on its predicted env."""
        out = []
        for command, follow, env in zip(commands, self.follow, self.predicted):
            out.append(command)
            out.extend(repl.command(text, env) for text in follow)
        return out

    def _body_at(self, exc: BaseException) -> int | None:
        """The body (its index) whose command, or one of whose checks, the failure came
        during (`batch_index`); None when it does not say, or came at the fence."""
        at = getattr(exc, "batch_index", None)
        if at is None:
            return None
        end = 0
        for index, follow in enumerate(self.follow):
            end += 1 + len(follow)
            if at < end:
                return index
        return None

    def lead_failed(self, exc: BaseException) -> bool:
        """The failure is in the lead's own commands (a timeout says which command)."""
        return self._body_at(exc) == 0

    def owner(self, exc: BaseException) -> int | None:
        """The body (its index in the group) a timeout is its own failure: the one
        whose body or checks were waiting for their answer when the time ran out.
        None for any other failure (a crash, memory, poison, an audit: not known
        whose) and for a timeout at the fence, after every body answered."""
        return self._body_at(exc) if type(exc) is WorkerTimeout else None

    def split(self, answers: list, started: float, arrivals: list[float]) -> list[Piece]:
        """Each body's answer and its checks' answers, with its REPL time (from
        `arrivals`, the time.monotonic() each answer came; `started`, when the group
        was sent)."""
        pieces = []
        at = 0
        before = started
        for job, follow, predicted in zip(self.jobs, self.follow, self.predicted):
            response = answers[at]
            early = answers[at + 1 : at + 1 + len(follow)]
            done = arrivals[at] if at < len(arrivals) else before
            checks_done = arrivals[at + len(follow)] if at + len(follow) < len(arrivals) else done
            # The checks are about this body only when it got the env they name.
            in_step = response.env is None or response.env == predicted
            if response.env != predicted:
                early = []
            reference_s = 0.0
            if job.reference_query and len(follow) > 1 and at + len(follow) < len(arrivals):
                reference_s = arrivals[at + len(follow)] - arrivals[at + len(follow) - 1]
            pieces.append(Piece(job, response, early, in_step, done - before, reference_s))
            before = checks_done
            at += 1 + len(follow)
        return pieces


async def run_group(
    pool: RunnerPort,
    lead: Ticket,
    riders: list[Ticket],
    command_of: Callable[[BodyJob], tuple[dict, int]],
    attempt: Attempt,
    prepared: Prepared,
    queue_s: float,
    timeout: float,
    total: float | None,
) -> BodyOutcome:
    """The lead and its riders in one exchange; `command_of(job)` is a body's
    (payload, reused prefix chars). Each rider's ticket's future gets its own outcome;
    the lead's is returned. Raises the lead's own failure as is, a rider's own
    timeout as RiderTimedOut (that rider answered with it), any other failure
    as GroupBroken, with the riders already back in the queue: no rider is ever
    left without an answer or a place in the queue."""
    worker = attempt.worker
    for rider in riders:
        rider.attempts += 1
    # Counted here, not where the riders were taken: a riders' canary that fails first
    # puts them back, and no group ran.
    pool.stats.pipelined_groups += 1
    pool.stats.pipelined_bodies += 1 + len(riders)
    pool.stats.header_hits += len(riders)  # each rides on the worker holding its header
    tickets = [lead, *riders]
    jobs = [ticket.job for ticket in tickets]
    group = Group(jobs, worker.next_env)
    arrivals: list[float] = []  # time.monotonic() of each answer (worker/pending.py)
    started = time.monotonic()
    try:
        commands = [command_of(job) for job in jobs]
        answers = await worker.request_batch(
            group.payloads([payload for payload, _ in commands]), timeout, total, arrivals
        )
    except asyncio.CancelledError:  # the lead's caller left: the riders did not fail
        for rider in riders:
            again(pool, rider, alone=False)
        raise
    except Exception as exc:
        owner = group.owner(exc)
        if owner is not None and owner > 0:  # a rider's own timeout: its own verdict, as alone
            pool.stats.pipelined_rider_timeouts += 1
            for index, rider in enumerate(riders, 1):
                if index == owner:
                    pool.fail(rider, exc)
                else:  # not failed; answered before it (unconfirmed): a suspect, alone
                    again(pool, rider, alone=index < owner)
            raise RiderTimedOut(exc) from exc
        ours = group.lead_failed(exc)
        for rider in riders:  # never ran (ours), or not known whose: alone
            again(pool, rider, alone=not ours)
        if ours:
            raise  # the lead's own failure, exactly as if it ran alone
        raise GroupBroken(exc) from exc
    handled: set[int] = set()  # riders answered or requeued
    try:
        pieces = group.split(answers, started, arrivals)
        return _answer(
            pool, tickets, group, pieces, commands, attempt, prepared, queue_s, started, handled
        )
    except Exception:  # a bug: the riders not answered yet go again alone
        for rider in riders:
            if id(rider) not in handled:
                again(pool, rider, alone=True)
        raise


def _answer(
    pool: RunnerPort,
    tickets: list[Ticket],
    group: Group,
    pieces: list[Piece],
    commands: list[tuple[dict, int]],
    attempt: Attempt,
    prepared: Prepared,
    queue_s: float,
    started: float,
    handled: set[int],
) -> BodyOutcome:
    """Each body's outcome from its piece of the answers (`tickets` in the group's
    order): the riders' set (each one added to `handled`), the lead's returned."""
    lead = tickets[0]
    worker = attempt.worker
    outcome = None
    for ticket, piece, (_payload, reused) in zip(tickets, pieces, commands):
        job = piece.job
        worker.requests_served += 1
        pool.cost.observe(piece.body_s, len(job.text) - reused)
        first = ticket is lead
        # The lead's in-flight entry goes to the history; riders reserved none.
        pool.index.remember(
            worker.name, job.scope, job.text, attempt.remembered() if first else None
        )
        if not piece.in_step and job.apart():
            again(pool, ticket, alone=True)  # its checks named another body's env
            handled.add(id(ticket))
            continue
        early = list(piece.early)
        response, inline = job.split_answer(piece.response)  # checks in it: about it
        if inline is not None:
            after, reference = inline
        else:
            after = early.pop(0) if early and job.after_body else None
            reference = early.pop(0) if early and job.reference_query else None
        done = BodyOutcome(
            response=response,
            after_response=after,
            worker=worker.name,
            warm_header=prepared.warm,
            reused_prefix_chars=reused,
            queue_s=queue_s if first else started - ticket.enqueued_at,
            header_s=prepared.header_s if first else 0.0,
            boot_s=prepared.boot_s if first else 0.0,
            body_s=piece.body_s,
            attempts=ticket.attempts,
            preamble_messages=prepared.preamble_messages,
            reference_response=reference,
            reference_s=piece.reference_s,
        )
        if first:
            outcome = done
        elif not ticket.future.done():
            ticket.future.set_result(done)
        handled.add(id(ticket))
    # The lead is in step: nothing ran before it in the group (an env it was
    # refused leaves its own checks unread, as when it runs alone).
    assert outcome is not None
    return outcome


def again(pool: RunnerPort, ticket: Ticket, *, alone: bool) -> None:
    """A body of a group back to the queue, this attempt not charged; `alone`:
    it never rides or leads again, so its next run's failure is its own."""
    if ticket.future.done():
        return  # its caller left
    ticket.uncharged += 1
    if alone:
        ticket.solo = True
        pool.stats.pipelined_alone += 1
    pool.requeue(ticket)
