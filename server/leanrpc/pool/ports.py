"""Typed ports: the operations the pool lends its runner and supervisor.

Runner and Supervisor are handed the pool as one of these Protocols, not as
the `Pool` class, so each names the few members it may use (and a type
checker can hold it to them). Only the pool itself adds to or removes from
its workers list: the supervisor asks through `discard_worker`.

May import: config, worker (types only), and pool rooms below pool.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..config import Config
    from ..worker.worker import ExitCause, Worker
    from .admission import Admission
    from .cost import BodyCostModel
    from .features import Features
    from .prefix_index import PrefixIndex
    from .sessions import SessionRegistry
    from .stats import PoolStats


class PoolCore(Protocol):
    """What both the runner and the supervisor read and call."""

    config: Config
    stats: PoolStats
    features: Features
    closing: bool

    def poke(self) -> None: ...


class SupervisorPort(PoolCore, Protocol):
    """The pool as the supervisor sees it: boot, recycle, spares, breaker."""

    admission: Admission
    prefix_index: PrefixIndex
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
    """The pool as the runner sees it: results, requeue, release."""

    cost: BodyCostModel
    index: PrefixIndex
    sessions: SessionRegistry
    router: Any
    supervisor: Any

    def fail(self, *args: Any, **kwargs: Any) -> Any: ...
    def requeue(self, *args: Any, **kwargs: Any) -> Any: ...
    def release(self, *args: Any, **kwargs: Any) -> Any: ...
