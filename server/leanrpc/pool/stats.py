"""What the pool publishes about itself: its counters (`PoolStats`, for
metrics and benchmarks) and a snapshot (`PoolSnapshot`, for ServerInfo,
health and metrics), plain data read above the pool without reaching into it.
May import: results.
"""

from __future__ import annotations

import collections
import dataclasses

from ..results import VerifierIdentity


@dataclasses.dataclass
class PoolStats:
    header_loads: int = 0
    header_hits: int = 0
    header_switches: int = 0
    header_imports: int = 0      # headers imported in-process next to others
    prefix_routed: int = 0       # jobs that ran with a reused prefix
    prefix_reused_chars: int = 0
    prefix_waits: int = 0        # jobs that waited for a busy prefix holder while a worker was idle
    prefix_wait_s: float = 0.0   # seconds those jobs spent waiting so
    prefix_spreads: int = 0      # jobs run on an idle worker although a busy one held more
    session_replays: int = 0     # session commands replayed after a worker was lost
    spares_started: int = 0
    jobs_submitted: int = 0
    jobs_finished: int = 0
    retries: int = 0
    boot_failures: int = 0
    restarts: collections.Counter = dataclasses.field(default_factory=collections.Counter)


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
