"""One job's attempt on one worker: who holds the worker, from reserve() to release().

Owns `Stage`, `TRANSITIONS` (the table every change of hands obeys, like the
worker's own in worker/states.py) and `Attempt`, the one place that moves an
attempt between stages and, with the supervisor, the only room above the
worker layer that kills a worker (tests/arch/test_kills.py). May import:
errors, worker (its own narrow port, `AttemptPool`: jobs name
their attempt, so it imports no pool room).

    RESERVED ──> LOADING ──> RUNNING ──> GIVEN_BACK   (released to the pool)
       │            │           └──────> KILLED       (cancelled mid-command, or in doubt)
       │            └──> LEFT_TO_LOAD ─> GIVEN_BACK   (the job left; the load went on)
       │                        └──────> KILLED       (the load failed, or shutdown)
       └──> GIVEN_BACK / KILLED                       (cancelled before its first step)

RESERVED: the dispatcher reserved (or spawned) the worker and the runner
launched the job's task. LOADING: the worker boots, loads the header and
preamble (pool/loader.py) in a task of its own. RUNNING: the load's outcome
was read; the job's kind runs (pool/runner.py). LEFT_TO_LOAD: the job was
cancelled or its deadline passed during the load; the load keeps the worker
and gives it back (or kills it) when it ends. Every end drops the attempt's
in-flight prefix reservation and asks for a new plan.

Why a table and not flags: the worker used to pass between the caller, the
job task, the load task and a done-callback, tracked by `loading` /
`given_back` flags with six kill-or-release branches; an illegal change of
hands now raises (`AttemptTransitionError`) instead of leaking or double
releasing a worker, and tests drive the table without processes.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Protocol

from ..errors import HeaderLoadError
from ..worker.worker import ExitCause, Worker, WorkerState

__all__ = ["Attempt", "AttemptPool", "AttemptTransitionError", "Stage", "TRANSITIONS"]


class Stage(enum.Enum):
    RESERVED = "reserved"
    LOADING = "loading"
    RUNNING = "running"
    LEFT_TO_LOAD = "left_to_load"
    GIVEN_BACK = "given_back"
    KILLED = "killed"


_ENDS = frozenset({Stage.GIVEN_BACK, Stage.KILLED})
TRANSITIONS: dict[Stage, frozenset[Stage]] = {
    Stage.RESERVED: frozenset({Stage.LOADING}) | _ENDS,
    Stage.LOADING: frozenset({Stage.RUNNING, Stage.LEFT_TO_LOAD}),
    Stage.RUNNING: _ENDS,
    Stage.LEFT_TO_LOAD: _ENDS,
    Stage.GIVEN_BACK: frozenset(),
    Stage.KILLED: frozenset(),
}


class _Index(Protocol):
    def unreserve(self, key: str) -> None: ...


class AttemptPool(Protocol):
    """What an Attempt uses of the pool (a `RunnerPort` is one)."""

    index: _Index

    def release(self, worker: Worker) -> None: ...
    def poke(self) -> None: ...


class AttemptTransitionError(RuntimeError):
    """A change of hands the table does not allow (a bug, never a job's fault)."""


class Attempt:
    """One attempt's hold on `worker`; `stage` changes only in `_to`."""

    def __init__(self, pool: AttemptPool, worker: Worker, *, retire_worker: bool = False) -> None:
        self._pool = pool
        self.worker = worker
        self.retire_worker = retire_worker  # drained at give-back (a trusted client's code ran)
        self.stage = Stage.RESERVED
        # Pool-trie entry reserved at launch (the worker will hold the text);
        # the prefix history takes it over (`remembered`) or an end drops it.
        self.inflight_key: str | None = None
        self.load: asyncio.Future | None = None  # boot + header + preamble (pool/loader.py)
        self.task: asyncio.Task | None = None  # the job's run (pool/runner.py)

    @property
    def ended(self) -> bool:
        return self.stage in _ENDS

    def _to(self, stage: Stage) -> None:
        if stage not in TRANSITIONS[self.stage]:
            raise AttemptTransitionError(
                f"attempt on {self.worker.name}: {self.stage.value} -> {stage.value}"
            )
        self.stage = stage

    # -- the steps --------------------------------------------------------------------

    def loading(self, load: asyncio.Future) -> None:
        """The load of this attempt started (or was found done: a warm worker)."""
        self._to(Stage.LOADING)
        self.load = load

    def loaded(self) -> None:
        """The load's outcome is the job's to read: the worker is the job's now."""
        self._to(Stage.RUNNING)

    def remembered(self) -> str | None:
        """The in-flight key, handed to the prefix history (which owns it from now)."""
        key, self.inflight_key = self.inflight_key, None
        return key

    # -- the ends ----------------------------------------------------------------------

    def give_back(self) -> None:
        """RUNNING -> GIVEN_BACK: the worker to the pool (idle or recycled)."""
        self._to(Stage.GIVEN_BACK)
        self._drop_inflight()
        worker = self.worker
        if self.retire_worker and worker.alive:
            worker.drain(ExitCause.TRUSTED_CODE)  # never serves another job
        self._pool.release(worker)
        self._pool.poke()

    def kill_worker(self, cause: ExitCause) -> None:
        """-> KILLED: a worker in doubt never serves again (one already gone stays so)."""
        self._to(Stage.KILLED)
        self._drop_inflight()
        if self.worker.alive:
            self.worker.kill(cause)
        self._pool.poke()

    def leave_to_load(self) -> None:
        """LOADING -> LEFT_TO_LOAD: the job left during its load; the load
        goes on and ends the attempt (`_load_ended`)."""
        self._to(Stage.LEFT_TO_LOAD)
        self._drop_inflight()
        assert self.load is not None
        self.load.add_done_callback(self._load_ended)
        self._pool.poke()

    def _load_ended(self, load: asyncio.Future) -> None:
        """A left load's end: the worker serves others (IDLE, holding the
        header), or fails as it would have for the job."""
        if load.cancelled():  # close(): the worker is being stopped with the pool
            self.kill_worker(ExitCause.SHUTDOWN)
        elif isinstance(load.exception(), HeaderLoadError):
            self.kill_worker(ExitCause.HEADER_FAILED)
        elif load.exception() is not None:
            # Boot failures were counted by Supervisor.boot; crashes and
            # timeouts already killed the worker.
            self.kill_worker(ExitCause.CRASH)
        else:
            self._to(Stage.GIVEN_BACK)
            self._pool.release(self.worker)
            self._pool.poke()

    def task_done(self, task: asyncio.Task) -> None:
        """The job's task ended. A task cancelled before its first step (a
        cancellation storm) never ran the run's ends: the reserved worker
        goes back here. Once the load started, the run's ends own it."""
        self._drop_inflight()
        if not task.cancelled() or self.stage is not Stage.RESERVED:
            return
        worker = self.worker
        if worker.state is WorkerState.SPAWNING:
            self.kill_worker(ExitCause.CANCELLED)
        elif worker.state is WorkerState.RESERVED:
            self._to(Stage.GIVEN_BACK)
            worker.release()  # reserved, but the request was never sent
            self._pool.poke()
        else:  # already handed on (dead, stopping): nothing is the attempt's to give
            self._to(Stage.GIVEN_BACK)

    def _drop_inflight(self) -> None:
        if self.inflight_key is not None:
            self._pool.index.unreserve(self.inflight_key)
            self.inflight_key = None
