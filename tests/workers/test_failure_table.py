"""The runner's ON_FAILURE table as a table of situations (issue 27 item 4):
an attempt's exception, the job's attempts, the breaker -> whether the worker
is killed (and why), and whether the job is retried or answered. No processes."""

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

    def requeue(self, job) -> None:
        self.answered.append(("retry", None))


class _Worker:
    name = "w1"

    def __init__(self) -> None:
        self.alive = True
        self.killed: list = []

    def kill(self, cause) -> None:
        self.killed.append(cause)
        self.alive = False


def _decide(exc, attempts: int = 1, *, breaker: bool = True, closing: bool = False):
    pool = _Pool(closing)
    supervisor = types.SimpleNamespace(breaker=types.SimpleNamespace(allow=lambda: breaker))
    runner = Runner(pool, supervisor)
    worker = _Worker()
    runner._on_failure(types.SimpleNamespace(attempts=attempts), worker, exc)
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
    ("a failed boot past max_retries + 1: answered with it",
     WorkerBootError("b"), 3, True, False, [], ("fail", WorkerBootError), 0),
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
        types.SimpleNamespace(attempts=1), worker, WorkerCrashed("x")
    )
    assert worker.killed == [] and pool.answered == [("retry", None)]
