"""Typed ports: what the pool lends its own rooms, and what it offers the layers above.

Downward, each partner is handed the pool as one of these Protocols, not as
the `Pool` class, so each names the few members it may use (and a type
checker can hold it to them): `RunnerPort`, `SupervisorPort`,
`DispatchPort`. Only the pool itself adds to or removes from its workers
list: the supervisor asks through `discard_worker`.

Upward, `PoolPort` is all the services (and the cache) may use of a pool, and
`PoolOwner` adds what the composition root, the metrics endpoint and the
commands use (start, close, the published metrics). Nothing above the pool
touches a worker, the supervisor, the queue or the index: listeners get a
`WorkerInfo`, recycle hooks and WorkerCalls a `pool.slot.WorkerHandle`.
tests/arch/test_pool_port.py holds every module above the pool to these
names (read from this file).

May import: config, results, worker (types only), and pool rooms below pool.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol, overload

if TYPE_CHECKING:
    from ..config import Config
    from ..results import VerifierIdentity
    from ..worker.launcher import Launcher
    from ..worker.worker import ExitCause, Worker
    from .admission import Admission
    from .cost import BodyCostModel, HeaderCostModel
    from .features import Features
    from .job import BodyJob, BodyOutcome, CallJob, CallOutcome, Job, SessionJob, SessionOutcome
    from .prefix_index import PrefixIndex
    from .sessions import SessionRegistry
    from .slot import Slots, WorkerHandle
    from .stats import PoolMetrics, PoolSnapshot, PoolStats, WorkerInfo
    from .ticket import Ticket


# -- downward: the pool's own rooms ---------------------------------------------------


class PoolCore(Protocol):
    """What the runner, the supervisor and the dispatcher all read and call."""

    config: Config
    stats: PoolStats
    features: Features
    closing: bool
    # Measured header import times (routing weighs waiting against importing).
    header_cost: HeaderCostModel

    def poke(self) -> None: ...


class SupervisorPort(PoolCore, Protocol):
    """The pool as the supervisor sees it: boot, recycle, spares, breaker."""

    admission: Admission

    @property
    def loads_in_flight(self) -> int: ...

    @property
    def workers(self) -> list[Worker]: ...

    def free_slots(self) -> int: ...
    def spawn_worker(self, profile: str = "") -> Worker: ...
    def recycle(self, worker: Worker, cause: ExitCause) -> None: ...
    def discard_worker(self, worker: Worker) -> None: ...
    def fail_queued_not_serving(self, message: str) -> None: ...


class RunnerPort(PoolCore, Protocol):
    """The pool as the runner sees it: answers, requeue, release, the slots."""

    cost: BodyCostModel
    index: PrefixIndex
    slots: Slots

    def routes_by_prefix(self, ticket: Ticket) -> bool: ...
    def fail(self, ticket: Ticket, exc: BaseException) -> None: ...
    def requeue(self, ticket: Ticket, *, fresh_process: bool = False) -> None: ...
    def release(self, worker: Worker) -> None: ...
    def take_riders(self, lead: Ticket, worker: Worker) -> list[Ticket]: ...


class Launches(Protocol):
    """The runner as the dispatcher sees it."""

    def launch(self, ticket: Ticket, worker: Worker) -> None: ...


class DispatchPort(PoolCore, Protocol):
    """The pool as the dispatcher sees it: the queue, the workers, the runner."""

    admission: Admission
    cost: BodyCostModel
    index: PrefixIndex
    runner: Launches
    slots: Slots  # read only: which workers have had a job's attempt

    @property
    def workers(self) -> list[Worker]: ...

    @property
    def retrying(self) -> bool: ...

    def fail(self, ticket: Ticket, exc: BaseException) -> None: ...
    def spawn_worker(self, profile: str = "") -> Worker: ...
    def switch_out(self, victim: Worker) -> None: ...


# -- upward: the layers above the pool ----------------------------------------------------


class PoolPort(Protocol):
    """What services and the result cache may use of the pool."""

    config: Config
    # The launcher its workers start with (the judge's sandbox, the Prover's scratch dir).
    launcher: Launcher
    # Named sessions (their commands and realizations; pool/sessions.py).
    sessions: SessionRegistry
    # The body cost model (seconds = overhead + per_char * chars): `known`, `seconds`.
    cost: BodyCostModel

    @property
    def identity(self) -> VerifierIdentity | None:
        """The default profile's verifier identity (None before its first boot)."""

    @property
    def serving(self) -> bool: ...

    @overload
    async def submit(self, job: SessionJob, *, finish_if_running: bool = ...) -> SessionOutcome: ...
    @overload
    async def submit(self, job: BodyJob, *, finish_if_running: bool = ...) -> BodyOutcome: ...
    @overload
    async def submit(self, job: CallJob, *, finish_if_running: bool = ...) -> CallOutcome: ...
    async def submit(self, job: Job, *, finish_if_running: bool = False) -> Any:
        """Runs one job; its outcome, or its error (`attempts`: how many were
        made). Exactly one per job. `finish_if_running`: a cancelled caller
        leaves a running job to finish unread (a queued one leaves the queue)."""

    def check_admission(self, count: int = 1) -> None:
        """NotServingError / OverloadedError unless `count` more jobs may enter now."""

    def check_profile(self, name: str) -> None:
        """ConfigError for a profile the config lacks."""

    def identity_of(self, profile: str) -> VerifierIdentity | None: ...

    def snapshot(self) -> PoolSnapshot: ...

    def worker_pid(self, name: str) -> int:
        """The pid of live worker `name`, 0 when it is gone."""

    def live_workers(self) -> frozenset[str]:
        """The names of the workers that are alive now."""

    def add_state_listener(self, listener: Callable[[WorkerInfo, Any, Any], None]) -> None:
        """`listener(info, old_state, new_state)` on every worker transition."""

    def add_recycle_hook(self, hook: Callable[[WorkerHandle, Any], Awaitable[None]]) -> None:
        """`await hook(handle, cause)` before a live worker is recycled."""


class PoolOwner(PoolPort, Protocol):
    """What the composition root, the metrics endpoint and the commands also use."""

    async def start(self) -> None: ...

    async def close(self, grace: float | None = None) -> None: ...

    def metrics(self, *, memory: bool = True) -> PoolMetrics:
        """The published snapshot: state, counters, each worker's process (and
        memory, a /proc walk per worker, unless `memory=False`)."""
