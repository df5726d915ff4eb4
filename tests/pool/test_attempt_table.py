"""The Attempt's transition table, driven without processes (pool/attempt.py).

In the style of gunicorn's arbiter tests: a fake worker that records what was
done to it, a fake pool port that records releases, prefix unreserves and
pokes, and asyncio futures standing for the load. Each test is one of the
races tests/workers used to reproduce with real processes and timing
(cancel during load, shutdown during boot, cancel mid-command, a task
cancelled before its first step), now a walk through the table with the
worker's hands checked at every end: released once, or killed once, never both.
Their process versions sit next to this file where they check what only a
real process shows (test_cancel_during_load.py, test_shutdown_during_boot.py,
test_give_back_first.py, test_finish_if_running.py).
"""

from __future__ import annotations

import asyncio
import itertools

import pytest

from leanrpc.errors import HeaderLoadError, WorkerBootError
from leanrpc.pool.attempt import TRANSITIONS, Attempt, AttemptTransitionError, Stage
from leanrpc.worker.worker import ExitCause, WorkerState


class FakeWorker:
    def __init__(self, state: WorkerState = WorkerState.RESERVED) -> None:
        self.name = "w1"
        self.state = state
        self.killed: list[ExitCause] = []
        self.drained: list[ExitCause] = []
        self.released = 0

    @property
    def alive(self) -> bool:
        return self.state not in (WorkerState.DEAD, WorkerState.STOPPING, WorkerState.FAILED)

    def kill(self, cause: ExitCause) -> None:
        self.killed.append(cause)
        self.state = WorkerState.STOPPING

    def drain(self, cause: ExitCause) -> None:
        self.drained.append(cause)

    def release(self) -> None:
        self.released += 1
        self.state = WorkerState.IDLE


class FakeIndex:
    def __init__(self) -> None:
        self.unreserved: list[str] = []

    def unreserve(self, key: str) -> None:
        self.unreserved.append(key)


class FakePool:
    def __init__(self) -> None:
        self.index = FakeIndex()
        self.released: list[FakeWorker] = []
        self.pokes = 0

    def release(self, worker) -> None:
        self.released.append(worker)

    def poke(self) -> None:
        self.pokes += 1


def _attempt(state: WorkerState = WorkerState.RESERVED, *, key: str | None = "k1", **kw):
    pool, worker = FakePool(), FakeWorker(state)
    attempt = Attempt(pool, worker, **kw)
    attempt.inflight_key = key
    return pool, worker, attempt


def _loading(attempt: Attempt) -> asyncio.Future:
    load = asyncio.get_running_loop().create_future()
    attempt.loading(load)
    return load


# -- the table itself ---------------------------------------------------------------


def test_every_stage_is_in_the_table_and_the_ends_are_final():
    assert set(TRANSITIONS) == set(Stage)
    assert TRANSITIONS[Stage.GIVEN_BACK] == TRANSITIONS[Stage.KILLED] == frozenset()
    # Every stage is reachable from RESERVED, and every walk ends.
    seen, todo = {Stage.RESERVED}, [Stage.RESERVED]
    while todo:
        for nxt in TRANSITIONS[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    assert seen == set(Stage)


def test_the_issue_s_walks_are_legal_and_nothing_else_leaves_running():
    assert Stage.RUNNING in TRANSITIONS[Stage.LOADING]
    assert Stage.LEFT_TO_LOAD in TRANSITIONS[Stage.LOADING]
    assert TRANSITIONS[Stage.RUNNING] == {Stage.GIVEN_BACK, Stage.KILLED}
    assert TRANSITIONS[Stage.LEFT_TO_LOAD] == {Stage.GIVEN_BACK, Stage.KILLED}
    # The job never takes a worker back from its load, nor ends one still loading.
    assert Stage.RUNNING not in TRANSITIONS[Stage.LEFT_TO_LOAD]
    assert not TRANSITIONS[Stage.LOADING] & {Stage.GIVEN_BACK, Stage.KILLED}


@pytest.mark.parametrize(
    "src,dst", [(a, b) for a, b in itertools.product(Stage, Stage) if b not in TRANSITIONS[a]]
)
def test_an_illegal_change_of_hands_raises_and_changes_nothing(src, dst):
    _pool, _worker, attempt = _attempt()
    attempt.stage = src
    with pytest.raises(AttemptTransitionError):
        attempt._to(dst)
    assert attempt.stage is src


# -- walks ----------------------------------------------------------------------------


async def test_loading_running_given_back_releases_once_and_drops_the_prefix():
    pool, worker, attempt = _attempt()
    load = _loading(attempt)
    load.set_result("prepared")
    attempt.loaded()
    attempt.give_back()
    assert attempt.stage is Stage.GIVEN_BACK and attempt.ended
    assert pool.released == [worker] and worker.killed == []
    assert pool.index.unreserved == ["k1"] and attempt.inflight_key is None
    assert pool.pokes == 1
    with pytest.raises(AttemptTransitionError):
        attempt.give_back()  # the give-back-first race: never twice
    assert pool.released == [worker]


async def test_a_remembered_prefix_is_the_history_s_and_not_dropped_at_the_end():
    pool, _worker, attempt = _attempt()
    _loading(attempt).set_result(None)
    attempt.loaded()
    assert attempt.remembered() == "k1"
    attempt.give_back()
    assert pool.index.unreserved == []


async def test_a_trusted_client_s_worker_is_drained_before_it_is_given_back():
    pool, worker, attempt = _attempt(retire_worker=True)
    _loading(attempt).set_result(None)
    attempt.loaded()
    attempt.give_back()
    assert worker.drained == [ExitCause.TRUSTED_CODE] and pool.released == [worker]


async def test_cancel_mid_command_kills_and_never_releases():
    pool, worker, attempt = _attempt()
    _loading(attempt).set_result(None)
    attempt.loaded()
    attempt.kill_worker(ExitCause.CANCELLED)
    assert attempt.stage is Stage.KILLED
    assert worker.killed == [ExitCause.CANCELLED] and pool.released == []
    assert pool.index.unreserved == ["k1"]
    with pytest.raises(AttemptTransitionError):
        attempt.give_back()  # the answer racing the cancel cannot hand it back


async def test_a_worker_already_gone_is_not_killed_twice():
    _pool, worker, attempt = _attempt()
    _loading(attempt).set_result(None)
    attempt.loaded()
    worker.state = WorkerState.DEAD  # the worker layer killed it (a timeout)
    attempt.kill_worker(ExitCause.CRASH)
    assert attempt.stage is Stage.KILLED and worker.killed == []


async def test_cancel_during_load_leaves_the_worker_to_a_load_that_succeeds():
    pool, worker, attempt = _attempt()
    load = _loading(attempt)
    attempt.leave_to_load()
    assert attempt.stage is Stage.LEFT_TO_LOAD
    assert pool.released == [] and pool.index.unreserved == ["k1"]
    load.set_result("prepared")
    await asyncio.sleep(0)  # the load's done-callback
    assert attempt.stage is Stage.GIVEN_BACK
    assert pool.released == [worker] and worker.killed == []


@pytest.mark.parametrize(
    "end,cause",
    [
        (HeaderLoadError("bad header"), ExitCause.HEADER_FAILED),
        (WorkerBootError("no boot"), ExitCause.CRASH),
        (None, ExitCause.SHUTDOWN),  # the load cancelled: the pool is closing
    ],
)
async def test_a_left_load_that_fails_kills_its_worker(end, cause):
    pool, worker, attempt = _attempt()
    load = _loading(attempt)
    attempt.leave_to_load()
    if end is None:
        load.cancel()
    else:
        load.set_exception(end)
    await asyncio.sleep(0)
    assert attempt.stage is Stage.KILLED
    assert worker.killed == [cause] and pool.released == []


async def test_shutdown_during_boot_kills_a_worker_still_alive_only():
    _pool, worker, attempt = _attempt(WorkerState.SPAWNING)
    load = _loading(attempt)
    attempt.leave_to_load()
    worker.state = WorkerState.STOPPING  # close() stopped it first
    load.cancel()
    await asyncio.sleep(0)
    assert attempt.stage is Stage.KILLED and worker.killed == []


async def test_the_job_cannot_take_the_worker_back_from_its_load():
    _pool, _worker, attempt = _attempt()
    _loading(attempt)
    attempt.leave_to_load()
    with pytest.raises(AttemptTransitionError):
        attempt.loaded()


# -- the job's task ended -----------------------------------------------------------


async def _cancelled_task() -> asyncio.Task:
    task = asyncio.ensure_future(asyncio.sleep(10))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return task


@pytest.mark.parametrize(
    "state,stage,killed,released",
    [
        (WorkerState.SPAWNING, Stage.KILLED, [ExitCause.CANCELLED], 0),
        (WorkerState.RESERVED, Stage.GIVEN_BACK, [], 1),
        (WorkerState.DEAD, Stage.GIVEN_BACK, [], 0),
    ],
)
async def test_a_task_cancelled_before_its_first_step_gives_its_worker_back(
    state, stage, killed, released
):
    pool, worker, attempt = _attempt(state)
    attempt.task_done(await _cancelled_task())
    assert attempt.stage is stage
    assert worker.killed == killed and worker.released == released
    assert pool.released == []  # the worker's own release: it never ran a job
    assert pool.index.unreserved == ["k1"]


async def test_a_task_that_ran_leaves_the_ends_to_the_run():
    pool, worker, attempt = _attempt()
    _loading(attempt).set_result(None)
    attempt.loaded()
    attempt.task_done(await _cancelled_task())
    assert attempt.stage is Stage.RUNNING  # the run's own ends own it
    assert worker.killed == [] and worker.released == 0 and pool.released == []
