"""Admission: the one queue check, the fair queue, deadlines, retry hints.

Owns: whether a request may enter (`check`), the queued jobs, and the order
routing sees them in. May import: errors, pool.job. No processes, no asyncio.

Fair queuing: jobs are queued per client (the authenticated identity the
edge passes) and, within a client, per stream or batch. The order handed to
routing takes one job from each client in turn, and within a client one job
from each of its streams in turn (deficit round robin with one unit per job:
a job's REPL time is not known before it runs, so every job costs the same).
A client or stream that was just served goes to the back of the rotation;
a client that had nothing queued enters at the front, a new stream of a
client already queued enters at the back of that client's streams (so one
client's unary calls are served in arrival order). A stream of 3,000
snippets thus delays another client's single call by at most one running
job, never by the 3,000. Jobs without a client share one
anonymous client, which behaves as a plain FIFO.

Riders (`riders`): a job about to run may take queued jobs of its own client
and stream along (pool/runner.py pipelines their bodies on its worker). That
serves one stream several jobs in one turn; `pool.pipeline_bodies` bounds it,
so another client waits for at most one group of that many bodies.
"""

from __future__ import annotations

import collections
import itertools
from typing import Callable

from ..errors import OverloadedError
from .job import Job

__all__ = ["Admission"]

# Longest retry hint handed to an overloaded caller.
_MAX_RETRY_S = 30.0


class Admission:
    def __init__(self, queue_limit: int) -> None:
        self.queue_limit = queue_limit
        # client -> stream -> jobs, each dict in rotation order (front serves next).
        self._clients: collections.OrderedDict[
            str, collections.OrderedDict[str, collections.deque[Job]]
        ] = collections.OrderedDict()
        self._size = 0
        self._order: collections.deque[Job] | None = None  # the fair order built last, still valid
        self._order_complete = False  # it holds every queued job
        self._earliest = float("inf")  # no queued deadline is earlier (a lower bound)
        self.order_builds = 0  # rebuilds, for tests

    def __len__(self) -> int:
        return self._size

    def __contains__(self, job: Job) -> bool:
        streams = self._clients.get(job.client_id)
        jobs = streams.get(job.stream_id) if streams is not None else None
        return jobs is not None and job in jobs

    # -- the check ---------------------------------------------------------------

    def retry_hint(self, busy_workers: int) -> float:
        """Seconds an overloaded caller should wait: the queue's drain time estimate."""
        return min(_MAX_RETRY_S, 0.1 + self._size / max(1, busy_workers) * 0.05)

    def check(self, count: int = 1, *, busy_workers: int = 1) -> None:
        """Raises OverloadedError unless `count` more jobs fit in the queue."""
        if self._size + count > self.queue_limit:
            raise OverloadedError(
                f"queue full ({self._size} waiting, limit {self.queue_limit}): cannot take {count} more",
                retry_after_s=self.retry_hint(busy_workers),
            )

    # -- the queue ---------------------------------------------------------------

    def push(self, job: Job) -> None:
        streams = self._clients.get(job.client_id)
        if streams is None:
            # A client with nothing queued goes first (FQ-CoDel's "new flow"):
            # it waits for one running job at most, never for a round of
            # the busy clients. It cannot gain more: once it has jobs
            # queued, it takes its turn like everyone else.
            streams = self._clients[job.client_id] = collections.OrderedDict()
            self._clients.move_to_end(job.client_id, last=False)
        jobs = streams.get(job.stream_id)
        if jobs is None:
            # A new stream of a client enters at the BACK of that client's
            # rotation. At the front, a client sending many one-snippet calls
            # (each unary Verify is a stream of its own) was served newest
            # first: LIFO, with the oldest calls overtaken again and again.
            jobs = streams[job.stream_id] = collections.deque()
        jobs.append(job)
        self._size += 1
        self._order = None
        if job.deadline is not None and job.deadline < self._earliest:
            self._earliest = job.deadline

    def push_front(self, job: Job) -> None:
        """Puts a job back at the head (a retry after a crash): it goes next."""
        self.push(job)
        self._order = None
        jobs = self._clients[job.client_id][job.stream_id]
        jobs.rotate(1)
        self._clients[job.client_id].move_to_end(job.stream_id, last=False)
        self._clients.move_to_end(job.client_id, last=False)

    def take(self, job: Job) -> None:
        """Removes a job that is being dispatched; its client and stream
        move to the back of their rotations."""
        order = self._order
        head = order is not None and order and order[0] is job
        self._remove(job)
        if head:
            order.popleft()
            self._order = order
        else:
            self._order = None
        streams = self._clients.get(job.client_id)
        if streams is not None:
            self._clients.move_to_end(job.client_id)
            if job.stream_id in streams:
                streams.move_to_end(job.stream_id)

    def stream_length(self, job: Job) -> int:
        """How many jobs of `job`'s client and stream are queued."""
        streams = self._clients.get(job.client_id)
        jobs = streams.get(job.stream_id) if streams is not None else None
        return 0 if jobs is None else len(jobs)

    def riders(self, job: Job, limit: int, fits: Callable[[Job], bool]) -> list[Job]:
        """Up to `limit` queued jobs of `job`'s client and stream, oldest first,
        for which `fits` holds, taken out of the queue (they run with `job`)."""
        streams = self._clients.get(job.client_id)
        jobs = streams.get(job.stream_id) if streams is not None else None
        if not jobs or limit <= 0:
            return []
        taken = []
        for queued in jobs:
            if fits(queued):
                taken.append(queued)
                if len(taken) >= limit:
                    break
        for rider in taken:
            self._remove(rider)
        if taken:
            self._order = None
        return taken

    def remove(self, job: Job) -> bool:
        """Removes a job that leaves without running (cancel, deadline)."""
        self._order = None
        return self._remove(job)

    def _remove(self, job: Job) -> bool:
        streams = self._clients.get(job.client_id)
        jobs = streams.get(job.stream_id) if streams is not None else None
        if jobs is None:
            return False
        try:
            jobs.remove(job)
        except ValueError:
            return False
        self._size -= 1
        if not jobs:
            del streams[job.stream_id]
            if not streams:
                del self._clients[job.client_id]
        return True

    def ordered(self, limit: int) -> list[Job]:
        """Up to `limit` queued jobs in the order they should be served."""
        order = self._order
        if order is None or (len(order) < limit and not self._order_complete):
            order = self._order = collections.deque(self._build_order(2 * limit))
            self._order_complete = len(order) >= self._size
            self.order_builds += 1
        return list(itertools.islice(order, limit))

    def _build_order(self, limit: int) -> list[Job]:
        per_client = [
            self._interleave(list(streams.values()), limit) for streams in self._clients.values()
        ]
        return self._interleave(per_client, limit)

    @staticmethod
    def _interleave(lists: list, limit: int) -> list[Job]:
        if len(lists) == 1:
            return list(itertools.islice(lists[0], limit))
        out: list[Job] = []
        iters = [iter(x) for x in lists]
        while iters and len(out) < limit:
            alive = []
            for it in iters:
                job = next(it, None)
                if job is not None:
                    out.append(job)
                    alive.append(it)
                    if len(out) >= limit:
                        break
            iters = alive
        return out

    def expired(self, now: float) -> list[Job]:
        """Queued jobs whose deadline has passed (still queued)."""
        if now < self._earliest:
            return []
        self._earliest = min(
            (
                job.deadline
                for streams in self._clients.values()
                for jobs in streams.values()
                for job in jobs
                if job.deadline is not None and job.deadline > now
            ),
            default=float("inf"),
        )
        return [
            job
            for streams in self._clients.values()
            for jobs in streams.values()
            for job in jobs
            if job.deadline is not None and job.deadline <= now
        ]

    def clear(self) -> list[Job]:
        """Empties the queue; returns the jobs in it."""
        jobs = [job for streams in self._clients.values() for q in streams.values() for job in q]
        self._clients.clear()
        self._size = 0
        self._order = None
        return jobs
