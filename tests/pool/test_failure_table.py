"""The runner's ON_FAILURE table as a table of situations (issue 27 item 4):
an attempt's exception, the job's attempts, the breaker, whether the process
had run another job first -> whether the worker is killed (and why), and
whether the job is retried (on a fresh process or not) or answered. No processes:
the worker is a fake held by a RUNNING `Attempt` (pool/attempt.py), which alone kills it."""

from __future__ import annotations

import types

import pytest

from leanrpc.config import Config
from leanrpc.errors import (
    HeaderLoadError,
    NotServingError,
    WorkerBootError,
    WorkerCrashed,
    WorkerDiverged,
    WorkerPoisoned,
    WorkerTimeout,
)  # fmt: skip
from leanrpc.pool.attempt import Attempt, Stage
from leanrpc.pool.runner import Runner
from leanrpc.pool.stats import PoolStats
from leanrpc.worker.states import ExitCause


class _Pool:
    def __init__(self, closing: bool = False) -> None:
        self.config = Config()  # max_retries = 1
        self.closing = closing
        self.stats = PoolStats()
        self.answered: list = []

    def fail(self, job, exc) -> None:
        self.answered.append(("fail", type(exc)))

    def requeue(self, job, *, fresh_process: bool = False) -> None:
        self.answered.append(("retry fresh" if fresh_process else "retry", None))

    def poke(self) -> None:
        pass


class _Worker:
    name = "w1"

    def __init__(self) -> None:
        self.alive = True
        self.killed: list = []

    def kill(self, cause) -> None:
        self.killed.append(cause)
        self.alive = False


def _running(pool: _Pool, worker: _Worker) -> Attempt:
    """The attempt as `_run` holds it when a kind's work fails."""
    attempt = Attempt(pool, worker)
    attempt.stage = Stage.RUNNING
    return attempt


def _ticket(attempts: int, uncharged: int = 0, fresh_process: bool = False):
    """The job's ticket as the failure table reads it (pool/ticket.py)."""
    return types.SimpleNamespace(
        attempts=attempts, uncharged=uncharged, fresh_process=fresh_process
    )


def _decide(exc, attempts: int = 1, *, breaker: bool = True, closing: bool = False, ticket=None,
            shared: bool = False):  # fmt: skip
    pool = _Pool(closing)
    supervisor = types.SimpleNamespace(breaker=types.SimpleNamespace(allow=lambda: breaker))
    runner = Runner(pool, supervisor)
    worker = _Worker()
    runner._on_failure(ticket or _ticket(attempts), _running(pool, worker), exc, shared)
    return worker.killed, pool.answered, pool.stats.retries


# (situation, exception, attempts, breaker allows, closing, killed, answer, retries counted)
TABLE = [
    ("a header that does not load: the worker goes, the job is answered",
     HeaderLoadError("bad"), 1, True, False, [ExitCause.HEADER_FAILED], ("fail", HeaderLoadError), 0),
    ("a crash on the first attempt: killed, retried, counted",
     WorkerCrashed("x"), 1, True, False, [ExitCause.CRASH], ("retry", None), 1),
    ("a diverged replay is a crash", WorkerDiverged("x"), 1, True, False, [ExitCause.CRASH], ("retry", None), 1),
    ("a poisoned exchange is a crash", WorkerPoisoned("x"), 1, True, False, [ExitCause.CRASH], ("retry", None), 1),
    ("a crash past max_retries: killed, answered with it",
     WorkerCrashed("x"), 2, True, False, [ExitCause.CRASH], ("fail", WorkerCrashed), 0),
    ("a crash while the pool closes: not retried", WorkerCrashed("x"), 1, True, True, [ExitCause.CRASH],
     ("fail", WorkerCrashed), 0),
    ("a timeout: the worker layer killed it; answered", WorkerTimeout("t"), 1, True, False, [],
     ("fail", WorkerTimeout), 0),
    ("shutting down: answered", NotServingError("down"), 1, True, False, [], ("fail", NotServingError), 0),
    ("a failed boot with boots left: retried, not counted as a crash retry",
     WorkerBootError("b"), 2, True, False, [], ("retry", None), 0),
    ("a failed boot past max_retries + 1: not serving (no REPL could start for it)",
     WorkerBootError("b"), 3, True, False, [], ("fail", NotServingError), 0),
    ("a failed boot with the breaker open: not serving",
     WorkerBootError("b"), 1, False, False, [], ("fail", NotServingError), 0),
    ("a bug: the worker is in doubt, the job still answered",
     KeyError("bug"), 1, True, False, [ExitCause.CRASH], ("fail", KeyError), 0),
]  # fmt: skip


@pytest.mark.parametrize("situation,exc,attempts,breaker,closing,killed,answer,retries", TABLE,
                         ids=[row[0] for row in TABLE])  # fmt: skip
def test_failure_table(situation, exc, attempts, breaker, closing, killed, answer, retries):
    assert _decide(exc, attempts, breaker=breaker, closing=closing) == (killed, [answer], retries)


def test_a_dead_worker_is_not_killed_again():
    pool = _Pool()
    supervisor = types.SimpleNamespace(breaker=types.SimpleNamespace(allow=lambda: True))
    worker = _Worker()
    worker.alive = False
    Runner(pool, supervisor)._on_failure(
        _ticket(1), _running(pool, worker), WorkerCrashed("x"), False
    )
    assert worker.killed == [] and pool.answered == [("retry", None)]


# Who is charged (issue 15's forgers, CI of 2026-12-05): a process that ran
# another job's attempt first may carry what that code left behind.
# (situation, exception, job, shared process, answer, retries counted, fresh retries)
SHARED = [
    ("a crash on a process another job ran on: retried on a fresh one, uncharged",
     WorkerPoisoned("x"), _ticket(1), True, "retry fresh", 1, 1),
    ("past max_retries, still one uncharged retry on a fresh process",
     WorkerCrashed("x"), _ticket(2), True, "retry fresh", 1, 1),
    ("the same crash on a process nothing else ran on: charged as before",
     WorkerPoisoned("x"), _ticket(2), False, "fail", 0, 0),
    ("only one uncharged retry: after it, every failure is the job's",
     WorkerCrashed("x"), _ticket(2, uncharged=1, fresh_process=True), True, "retry", 1, 0),
    ("charged attempts decide: two attempts, one uncharged, is one charged",
     WorkerCrashed("x"), _ticket(2, uncharged=1, fresh_process=True), False, "retry", 1, 0),
    ("three attempts, one uncharged: past max_retries, answered",
     WorkerCrashed("x"), _ticket(3, uncharged=1, fresh_process=True), False, "fail", 0, 0),
    ("a timeout on a shared process is still the job's: answered",
     WorkerTimeout("t"), _ticket(1), True, "fail", 0, 0),
]  # fmt: skip


@pytest.mark.parametrize("situation,exc,job,shared,answer,retries,fresh", SHARED,
                         ids=[row[0] for row in SHARED])  # fmt: skip
def test_who_is_charged(situation, exc, job, shared, answer, retries, fresh):
    pool = _Pool()
    supervisor = types.SimpleNamespace(breaker=types.SimpleNamespace(allow=lambda: True))
    Runner(pool, supervisor)._on_failure(job, _running(pool, _Worker()), exc, shared)
    assert [a for a, _ in pool.answered] == [answer]
    assert (pool.stats.retries, pool.stats.fresh_retries) == (retries, fresh)


def test_closing_pool_does_not_retry_even_uncharged():
    assert _decide(WorkerCrashed("x"), closing=True, shared=True)[1] == [("fail", WorkerCrashed)]
