"""Admission: the one queue check, the fair queue, deadlines, retry hints.

Owns: whether a request may enter (`check`), the queued jobs (their pool-private
tickets, pool/ticket.py), and the order routing sees them in. May import:
errors, pool.ticket. No processes, no asyncio.

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
serves one stream several jobs in one turn; `pool.pipeline_bodies` bounds it by
count and `pool.pipeline_group_s` by expected time (pool/pipeline.py
`within_time`), so another client waits for about one group's time at most.
"""

from __future__ import annotations

import collections
import itertools
from typing import Callable

from ..errors import OverloadedError
from .ticket import Ticket

__all__ = ["Admission"]

# Longest retry hint handed to an overloaded caller.
_MAX_RETRY_S = 30.0


class Admission:
    def __init__(self, queue_limit: int) -> None:
        self.queue_limit = queue_limit
        # client -> stream -> jobs, each dict in rotation order (front serves next).
        self._clients: collections.OrderedDict[
            str, collections.OrderedDict[str, collections.deque[Ticket]]
        ] = collections.OrderedDict()
        self._size = 0
        self._order: collections.deque[Ticket] | None = (
            None  # the fair order built last, still valid
        )
        self._order_complete = False  # it holds every queued ticket
        self._earliest = float("inf")  # no queued deadline is earlier (a lower bound)
        self.order_builds = 0  # rebuilds, for tests

    def __len__(self) -> int:
        return self._size

    def __contains__(self, ticket: Ticket) -> bool:
        streams = self._clients.get(ticket.job.client_id)
        jobs = streams.get(ticket.job.stream_id) if streams is not None else None
        return jobs is not None and ticket in jobs

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

    def push(self, ticket: Ticket) -> None:
        streams = self._clients.get(ticket.job.client_id)
        if streams is None:
            # A client with nothing queued goes first (FQ-CoDel's "new flow"):
            # it waits for one running job at most, never for a round of
            # the busy clients. It cannot gain more: once it has jobs
            # queued, it takes its turn like everyone else.
            streams = self._clients[ticket.job.client_id] = collections.OrderedDict()
            self._clients.move_to_end(ticket.job.client_id, last=False)
        jobs = streams.get(ticket.job.stream_id)
        if jobs is None:
            # A new stream of a client enters at the BACK of that client's
            # rotation. At the front, a client sending many one-snippet calls
            # (each unary Verify is a stream of its own) was served newest
            # first: LIFO, with the oldest calls overtaken again and again.
            jobs = streams[ticket.job.stream_id] = collections.deque()
        jobs.append(ticket)
        self._size += 1
        self._order = None
        if ticket.job.deadline is not None and ticket.job.deadline < self._earliest:
            self._earliest = ticket.job.deadline

    def push_front(self, ticket: Ticket) -> None:
        """Puts a job back at the head (a retry after a crash): it goes next."""
        self.push(ticket)
        self._order = None
        jobs = self._clients[ticket.job.client_id][ticket.job.stream_id]
        jobs.rotate(1)
        self._clients[ticket.job.client_id].move_to_end(ticket.job.stream_id, last=False)
        self._clients.move_to_end(ticket.job.client_id, last=False)

    def take(self, ticket: Ticket) -> None:
        """Removes a job that is being dispatched; its client and stream
        move to the back of their rotations."""
        order = self._order
        head = order is not None and order and order[0] is ticket
        self._remove(ticket)
        if head:
            order.popleft()
            self._order = order
        else:
            self._order = None
        streams = self._clients.get(ticket.job.client_id)
        if streams is not None:
            self._clients.move_to_end(ticket.job.client_id)
            if ticket.job.stream_id in streams:
                streams.move_to_end(ticket.job.stream_id)

    def stream_length(self, ticket: Ticket) -> int:
        """How many jobs of `job`'s client and stream are queued."""
        streams = self._clients.get(ticket.job.client_id)
        jobs = streams.get(ticket.job.stream_id) if streams is not None else None
        return 0 if jobs is None else len(jobs)

    def riders(self, ticket: Ticket, limit: int, fits: Callable[[Ticket], bool]) -> list[Ticket]:
        """Up to `limit` queued jobs of `job`'s client and stream, oldest first,
        for which `fits` holds, taken out of the queue (they run with `ticket`)."""
        streams = self._clients.get(ticket.job.client_id)
        jobs = streams.get(ticket.job.stream_id) if streams is not None else None
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

    def remove(self, ticket: Ticket) -> bool:
        """Removes a job that leaves without running (cancel, deadline)."""
        self._order = None
        return self._remove(ticket)

    def _remove(self, ticket: Ticket) -> bool:
        streams = self._clients.get(ticket.job.client_id)
        jobs = streams.get(ticket.job.stream_id) if streams is not None else None
        if jobs is None:
            return False
        try:
            jobs.remove(ticket)
        except ValueError:
            return False
        self._size -= 1
        if not jobs:
            del streams[ticket.job.stream_id]
            if not streams:
                del self._clients[ticket.job.client_id]
        return True

    def ordered(self, limit: int) -> list[Ticket]:
        """Up to `limit` queued jobs in the order they should be served."""
        order = self._order
        if order is None or (len(order) < limit and not self._order_complete):
            order = self._order = collections.deque(self._build_order(2 * limit))
            self._order_complete = len(order) >= self._size
            self.order_builds += 1
        return list(itertools.islice(order, limit))

    def _build_order(self, limit: int) -> list[Ticket]:
        per_client = [
            self._interleave(list(streams.values()), limit) for streams in self._clients.values()
        ]
        return self._interleave(per_client, limit)

    @staticmethod
    def _interleave(lists: list, limit: int) -> list[Ticket]:
        if len(lists) == 1:
            return list(itertools.islice(lists[0], limit))
        out: list[Ticket] = []
        iters = [iter(x) for x in lists]
        while iters and len(out) < limit:
            alive = []
            for it in iters:
                ticket = next(it, None)
                if ticket is not None:
                    out.append(ticket)
                    alive.append(it)
                    if len(out) >= limit:
                        break
            iters = alive
        return out

    def expired(self, now: float) -> list[Ticket]:
        """Queued jobs whose deadline has passed (still queued)."""
        if now < self._earliest:
            return []
        deadlines = [
            (ticket, ticket.job.deadline)
            for streams in self._clients.values()
            for tickets in streams.values()
            for ticket in tickets
            if ticket.job.deadline is not None
        ]
        self._earliest = min((d for _t, d in deadlines if d > now), default=float("inf"))
        return [ticket for ticket, d in deadlines if d <= now]

    def clear(self) -> list[Ticket]:
        """Empties the queue; returns the jobs in it."""
        tickets = [t for streams in self._clients.values() for q in streams.values() for t in q]
        self._clients.clear()
        self._size = 0
        self._order = None
        return tickets
