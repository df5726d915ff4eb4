"""What becomes of a job whose attempt failed: the retry table beside `ON_FAILURE`.

Owns `Then` (what the failure table says of the job), `Facts` (what the
decision reads: the job's attempt counts, the process it ran on, the pool's
state), `Next` (what the runner does) and `ON_RETRY`, the table `decide`
reads; the first row whose `Then` and condition match decides. Pure data and
one pure function: tests drive it without a pool (tests/pool/test_retry_table.py).
May import nothing of the project.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import NamedTuple

__all__ = ["Facts", "Next", "ON_RETRY", "Then", "decide"]


class Then(enum.Enum):
    """What becomes of a job whose attempt failed."""

    FAIL = "fail"  # answered with the error
    ALONE = "alone"  # requeued uncharged, to run alone (a failed group, or ran before its timeout)
    RETRY = "retry"  # requeued while crash retries remain (counted in stats.retries), else failed
    RETRY_BOOT = "retry_boot"  # requeued while boots remain and the breaker allows, else failed


class Next(enum.Enum):
    """What the runner does with the job."""

    ALONE = "alone"  # back to the queue uncharged, never to ride or lead a group again
    FRESH = "fresh"  # back to the queue uncharged, for a process nothing ran on
    RETRY = "retry"  # back to the queue, charged (stats.retries)
    REBOOT = "reboot"  # back to the queue: another boot may start
    NOT_SERVING = "not_serving"  # no REPL can start: infrastructure, never a verdict
    FAIL = "fail"  # answered with the attempt's error


class Facts(NamedTuple):
    """What the decision reads about a failed attempt."""

    shared: bool  # the process had run another job's attempt first
    fresh_process: bool  # the job already asked for a process nothing ran on
    closing: bool  # the pool is shutting down
    charged: int  # attempts charged to the job (attempts - uncharged)
    attempts: int  # every attempt so far, this one included
    max_retries: int
    breaker_allows: bool  # the boot breaker lets another boot start


_Row = tuple[Then, Callable[[Facts], bool], Next]
ON_RETRY: tuple[_Row, ...] = (
    (Then.ALONE, lambda f: True, Next.ALONE),
    # A crash on a process another job ran on first: once more, uncharged, on a fresh one.
    (Then.RETRY, lambda f: f.shared and not f.fresh_process and not f.closing, Next.FRESH),
    (Then.RETRY, lambda f: f.charged <= f.max_retries and not f.closing, Next.RETRY),
    (Then.RETRY_BOOT, lambda f: f.breaker_allows and f.attempts <= f.max_retries + 1, Next.REBOOT),
    (Then.RETRY_BOOT, lambda f: True, Next.NOT_SERVING),
)


def decide(then: Then, facts: Facts) -> Next:
    """The first matching row's step; FAIL when none matches."""
    for kind, holds, step in ON_RETRY:
        if kind is then and holds(facts):
            return step
    return Next.FAIL
