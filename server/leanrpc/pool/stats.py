"""What the pool publishes about itself, as plain data read above the pool.

Owns: `PoolStats` (its counters), `PoolSnapshot` (ServerInfo, health),
`PoolMetrics` (what a metrics scrape, the doctor and Ray's stats read: the
snapshot, a copy of the counters and each worker's process) and
`WorkerInfo` (what a worker-state listener above the pool learns of a
worker: never the Worker itself). May import: results.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
from typing import NamedTuple

from ..results import VerifierIdentity

__all__ = ["PoolMetrics", "PoolSnapshot", "PoolStats", "WorkerInfo", "WorkerReport"]


@dataclasses.dataclass
class PoolStats:
    header_loads: int = 0
    header_hits: int = 0
    header_switches: int = 0
    header_imports: int = 0  # headers imported in-process next to others
    prefix_routed: int = 0  # jobs that ran with a reused prefix
    prefix_reused_chars: int = 0
    prefix_waits: int = 0  # jobs that waited for a busy prefix holder while a worker was idle
    prefix_wait_s: float = 0.0  # seconds those jobs spent waiting so
    prefix_spreads: int = 0  # jobs run on an idle worker although a busy one held more
    header_wait_s: float = 0.0  # idle time jobs waited for a busy holder of their header
    header_spreads: int = 0  # headers imported by an idle worker once that wait paid for it
    session_replays: int = 0  # session commands replayed after a worker was lost
    spares_started: int = 0
    jobs_submitted: int = 0
    jobs_finished: int = 0
    retries: int = 0
    # Of those, retries not charged to the job: it failed on a process that had
    # run another job first, and went again on one nothing ran on (pool/runner.py).
    fresh_retries: int = 0
    pipelined_groups: int = 0  # exchanges that ran several body jobs (pool/pipeline.py)
    pipelined_bodies: int = 0  # body jobs run in those
    # Bodies of a failed or out-of-step group, or answered before a rider's own timeout,
    # run again alone.
    pipelined_alone: int = 0
    # Riders answered with their own timeout (the bodies after them went again as they were).
    pipelined_rider_timeouts: int = 0
    boot_failures: int = 0
    restarts: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def copy(self) -> PoolStats:
        return copy.deepcopy(self)


@dataclasses.dataclass(frozen=True)
class PoolSnapshot:
    """What the pool says about itself (ServerInfo, health, metrics)."""

    size: int
    worker_states: dict
    queue_depth: int
    queue_limit: int
    serving: bool
    not_serving_reason: str
    identity: VerifierIdentity | None
    # Profile name ("" = default) -> its identity (None before its first boot).
    profiles: dict = dataclasses.field(default_factory=dict)


class WorkerInfo(NamedTuple):
    """A worker as a state listener above the pool sees it."""

    name: str
    pid: int | None
    profile: str
    exit_cause: object  # worker.ExitCause, or None while it lives


@dataclasses.dataclass(frozen=True)
class WorkerReport:
    """One live worker's process: its pid, and its tree's memory in bytes
    (0 when not measured)."""

    name: str
    state: str
    pid: int | None
    memory_bytes: int = 0


@dataclasses.dataclass(frozen=True)
class PoolMetrics:
    """The pool at one moment, for metrics (`Pool.metrics`)."""

    snapshot: PoolSnapshot
    stats: PoolStats
    workers: tuple[WorkerReport, ...] = ()
