"""A submitted job's run record: the pool-private ticket that admission queues.

Owns `Ticket`: what the pool writes about one job while it is queued and
runs (when the pool accepted it, its future, its attempts and how many were
not charged to it, whether it asked for a process nothing ran on or to run
alone, its current `Attempt`) and `view`, the job as routing sees it (a
frozen `pool.plan.JobView`, made again only when the ticket changes what
routing must see: `fresh_process`). The job itself is frozen (pool/job.py):
what a service asked for, never written by the pool.

`Pool.submit` makes the ticket, admission queues it, the dispatcher hands it
to the runner, and `Pool._settle` drops its view and attempt at the end (both
point back at it: dropped, a finished ticket is freed at once, not by the
cycle collector). One ticket per snippet, with slots, replaces the job's own
bookkeeping fields: no task, future or lock is added per snippet (issue 38).

Pool-private: no module outside pool/ imports or reads a ticket
(tests/arch/test_job_fields.py). May import: pool.job, pool.plan,
pool.attempt (types).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from .job import Job
from .plan import JobView

if TYPE_CHECKING:
    from .attempt import Attempt

__all__ = ["Ticket"]


class Ticket:
    """One submitted job's bookkeeping; `job` is the frozen request."""

    __slots__ = (
        "job",
        "future",
        "enqueued_at",
        "attempts",
        "uncharged",
        "fresh_process",
        "solo",
        "attempt",
        "view",
    )

    def __init__(self, job: Job, future: asyncio.Future, enqueued_at: float) -> None:
        self.job = job
        self.future = future
        # When the pool accepted it (submit), not when the service built the job.
        self.enqueued_at = enqueued_at
        self.attempts = 0
        # Failed attempts not charged to the job: they ran on a process that had
        # run other jobs first, whose leftovers may be what failed (runner.py).
        # After one, every attempt runs on a process nothing ran on yet.
        self.uncharged = 0
        self.fresh_process = False
        # Runs alone: it was in a pipelined group that failed (pool/pipeline.py),
        # so it never leads or rides in one again; the usual rules charge it.
        self.solo = False
        # The current attempt (pool/attempt.py: its worker, load, task and
        # in-flight prefix entry); None while queued.
        self.attempt: Attempt | None = None
        self.view: JobView | None = None
        self.make_view()

    def make_view(self) -> JobView:
        """The ticket as routing sees it now (frozen; made again when `fresh_process` changes)."""
        job = self.job
        self.view = JobView(
            self,
            job.KIND,
            job.import_key,
            job.scope,
            job.text,
            job.profile,
            job.reuse and not self.fresh_process,  # routing: a process nothing ran on
            self.enqueued_at,
            job.deadline,
            job.avoid_worker,
            job.char_s(),
            self.fresh_process,
        )
        return self.view

    def ask_fresh_process(self) -> None:
        """Every later attempt runs on a process nothing ran on: routing must see it."""
        self.fresh_process = True
        self.make_view()
