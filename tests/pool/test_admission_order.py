"""The incremental fair order (issue 28): after any sequence of pushes,
takes (at the head and out of order), removals and retries, `ordered()`
equals the order rebuilt from scratch; dispatching from the head of a big
queue reuses it instead of rebuilding per plan; `expired()` finds every
passed deadline although it skips the walk while none can have passed."""

from __future__ import annotations

import random

from leanrpc.core.headers import split_header
from leanrpc.pool.admission import Admission
from leanrpc.pool.job import BodyJob
from leanrpc.pool.ticket import Ticket


def _job(client: str, stream: str, deadline: float | None = None) -> Ticket:
    """A queued job: admission queues its ticket (no future: never answered here)."""
    job = BodyJob(
        split=split_header("import Mathlib\ntheorem t : True := trivial\n"),
        timeout_s=10,
        client_id=client,
        stream_id=stream,
        deadline=deadline,
    )
    return Ticket(job, None, 0.0)


def _fresh(queue: Admission, limit: int) -> list[Ticket]:
    return queue._build_order(limit)


def test_the_kept_order_always_equals_a_rebuilt_one():
    rng = random.Random(28)
    for _ in range(40):
        queue = Admission(10_000)
        limit = rng.choice([1, 3, 8, 256])
        for _ in range(300):
            op = rng.random()
            if op < 0.35 or not len(queue):
                queue.push(_job(f"c{rng.randrange(4)}", f"s{rng.randrange(5)}"))
            elif op < 0.75:
                queue.take(queue.ordered(limit)[0])  # the usual dispatch: the head
            elif op < 0.85:
                queue.take(rng.choice(queue.ordered(limit)))  # routing picked another one
            elif op < 0.95:
                queue.remove(rng.choice(queue.ordered(limit)))
            else:
                job = queue.ordered(limit)[0]
                queue.take(job)
                queue.push_front(job)  # a retry
            assert queue.ordered(limit) == _fresh(queue, limit)


def test_dispatching_a_big_batch_from_the_head_rebuilds_rarely():
    queue = Admission(10_000)
    for i in range(3000):
        queue.push(_job(f"c{i % 3}", f"s{i % 7}"))
    queue.ordered(256)
    builds = queue.order_builds
    for _ in range(1000):
        queue.take(queue.ordered(256)[0])
    # Rebuilt when the kept order (2 x 256) runs short: every 256 takes, not on each of the 1000.
    assert queue.order_builds - builds <= 4
    assert queue.ordered(256) == _fresh(queue, 256)


def test_expired_finds_each_passed_deadline():
    queue = Admission(100)
    early, late, none = _job("a", "1", deadline=10.0), _job("a", "1", deadline=20.0), _job("b", "2")
    for job in (late, none, early):
        queue.push(job)
    assert queue.expired(5.0) == []
    assert queue.expired(10.0) == [early]
    queue.remove(early)
    assert queue.expired(15.0) == []
    assert queue.expired(25.0) == [late]
    queue.remove(late)
    sooner = _job("c", "3", deadline=1.0)
    queue.push(sooner)
    assert queue.expired(26.0) == [sooner]
