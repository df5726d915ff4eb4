"""What routing reads and what it decides: the snapshot in, the plan out.

Owns the data of one routing pass, all of it plain:

    Snapshot   now; the queued jobs in fair order (`JobView`s, at most
               LOOKAHEAD); the workers (`WorkerView`s); `PrefixFacts` (what
               the prefix index and the chains say of a job's work on a
               worker); the cost model's figures (`CostView`); which profiles
               reuse prefixes; the rent paid so far per prefix and the jobs'
               wait marks (`Mark`)
    Plan       the decisions (Assign | Import | Start | Switch | Expire), when
               to plan again, the routing counters to add (`RoutingStats`) and
               the rent changes to apply (`RentChange`)

Views are frozen: routing never changes what it was given, and the pool
applies a plan (pool/dispatch.py). `PrefixFacts` is the one input given as a
query rather than a table: a pass asks about a few of 256 jobs on a few
workers, and computing every pair first would cost more than the pass.
May import nothing of the pool's live rooms (no worker, no index, no asyncio).
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Mapping, Protocol, Sequence

__all__ = [
    "Assign",
    "CostView",
    "Expire",
    "Import",
    "JobKind",
    "JobView",
    "LOOKAHEAD",
    "Mark",
    "Plan",
    "PrefixFacts",
    "RentChange",
    "RoutingStats",
    "Snapshot",
    "Start",
    "Switch",
    "View",
    "WorkerView",
    "routes_by_prefix",
]

# Queued jobs one pass looks at (the fair order's head).
LOOKAHEAD = 256


class View(enum.Enum):
    """What routing needs to know of a worker's state."""

    SPAWNING = "spawning"
    IDLE = "idle"
    BUSY = "busy"  # reserved or running
    WARMING = "warming"  # loading a header or preamble
    STOPPING = "stopping"  # still holds its process, so its slot
    GONE = "gone"  # dead or failed: holds nothing


class JobKind(enum.Enum):
    BODY = "body"
    SESSION = "session"
    CALL = "call"


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class JobView:
    """A queued job as routing sees it. `job` is the pool's own object (its
    `pool.ticket.Ticket`), handed back in the decisions; routing never reads it."""

    job: Any
    kind: JobKind
    import_key: str
    scope: str
    text: str
    profile: str = ""
    reuse: bool = True
    enqueued_at: float = 0.0
    deadline: float | None = None
    # Another idle worker is preferred to this one (the Prover's whole-proof check).
    avoid_worker: str = ""
    # Seconds per character of `text` as the job's own kind of work measured them (a
    # WorkerCall's `char_s`: the Prover's tactics and rebuilds, whose time is not the
    # bodies' per-character cost); None: the body cost model (`CostView`) prices it.
    char_s: float | None = None
    # A retry after a failure on a process another job had run on (pool/runner.py):
    # `reuse` is False, and a worker that holds the job's header but has run no
    # job (the pool's replacement, warmed by the pool) will do as well as a new one.
    fresh_retry: bool = False


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class WorkerView:
    name: str
    state: View
    import_key: str | None = None
    loading_key: str | None = None  # the header it is loading, if any
    last_used: float = 0.0
    busy_since: float = 0.0
    expected_busy_s: float = 0.0
    # Every header whose env the worker holds (import_key among them).
    header_keys: frozenset = frozenset()
    profile: str = ""
    # May import one more header in-process (under its count and memory bounds).
    can_import: bool = True
    # Has had a job's attempt (a reuse=false job never goes to it).
    served: bool = False

    def holds(self, key: str) -> bool:
        return key == self.import_key or key in self.header_keys

    @property
    def fresh(self) -> bool:
        """Holds no header and loads none."""
        return self.import_key is None and not self.header_keys and self.loading_key is None

    @property
    def header_key(self) -> str | None:
        """The header this worker holds or is loading."""
        return self.import_key if self.import_key is not None else self.loading_key

    @property
    def holds_slot(self) -> bool:
        return self.state is not View.GONE

    def as_left(
        self, state: View, busy_since: float, expected_busy_s: float, loading_key: str | None
    ) -> WorkerView:
        """This worker as a plan leaves it (a view is replaced, never changed;
        positional, as this runs for every decision)."""
        return WorkerView(
            self.name, state, self.import_key, loading_key, self.last_used, busy_since,
            expected_busy_s, self.header_keys, self.profile, self.can_import, self.served,
        )  # fmt: skip


class PrefixFacts(Protocol):
    """What is known of a job's work on the workers (read-only)."""

    def held(self, job: JobView, worker: str) -> int:
        """Characters of the job's work `worker` already did: the reusable
        prefix of its text, plus a session's chain built there; for a call
        job, what the call says the worker holds."""

    def holder(self, job: JobView) -> tuple[str, int] | None:
        """The worker (any state) holding the longest prefix of a body job's
        text in the pool trie, and its length; None when none does."""


@dataclasses.dataclass(frozen=True, slots=True)
class CostView:
    """The body cost model's figures: seconds = overhead_s + per_char * chars."""

    known: bool = False
    per_char: float = 0.0
    overhead_s: float = 0.0

    def seconds(self, chars: int) -> float:
        return self.overhead_s + self.per_char * max(0, chars)


@dataclasses.dataclass(frozen=True, slots=True)
class Mark:
    """A job's waiting for a busy worker that holds more of its work (a longer
    prefix, or its header): since when an idle worker was passed over for it
    (None: not now), and the rent key it pays into (pool/rent.py). The key
    stays once set: a job counts as a prefix wait once."""

    since: float | None
    key: int
    # The wait is for a busy holder of the job's import header (its rent key is the header's).
    header: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    jobs: Sequence[JobView]  # fair order, at most LOOKAHEAD
    workers: Sequence[WorkerView]
    facts: PrefixFacts
    cost: CostView = CostView()
    # Profiles whose REPL reuses prefixes inside one command (True: every profile).
    incremental: bool | frozenset = False
    # Seconds paid waiting per prefix (rent key), oldest first.
    rent: Mapping[int, float] = dataclasses.field(default_factory=dict)
    marks: Mapping[JobView, Mark] = dataclasses.field(default_factory=dict)
    # Measured seconds of importing each header (import key), where known.
    import_s: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def incremental_for(self, profile: str) -> bool:
        return (
            self.incremental if isinstance(self.incremental, bool) else profile in self.incremental
        )


def routes_by_prefix(job: JobView, prefix_routing: bool, incremental: bool) -> bool:
    """Whether a job's worker is chosen by what of its work it holds."""
    if not prefix_routing or not job.reuse:
        return False
    return job.kind is not JobKind.BODY or incremental


@dataclasses.dataclass(frozen=True, slots=True)
class Assign:
    """Run `job` on idle worker `worker`; expect it busy for `expected_s`."""

    job: JobView
    worker: str
    expected_s: float = 0.0


@dataclasses.dataclass(frozen=True, slots=True)
class Import:
    """Run `job` on idle `worker`, which imports the job's header in-process
    first (it keeps the headers it holds)."""

    job: JobView
    worker: str


@dataclasses.dataclass(frozen=True, slots=True)
class Start:
    """Start a new worker in a free slot for `job`."""

    job: JobView


@dataclasses.dataclass(frozen=True, slots=True)
class Switch:
    """Kill idle `victim` (another header) and start a worker for `job`."""

    job: JobView
    victim: str


@dataclasses.dataclass(frozen=True, slots=True)
class Expire:
    """`job`'s deadline passed while it was queued."""

    job: JobView


@dataclasses.dataclass
class RoutingStats:
    """Counters one plan adds to the pool's (PoolStats has the same names)."""

    prefix_waits: int = 0  # jobs that waited for a busy prefix holder while a worker was idle
    prefix_wait_s: float = 0.0
    prefix_spreads: int = 0  # jobs run on an idle worker although a busy one held more
    header_wait_s: float = 0.0  # idle time jobs waited for a busy holder of their header
    header_spreads: int = 0  # headers imported by an idle worker once that wait paid for it


@dataclasses.dataclass
class RentChange:
    """The rent book's changes, in the order the pool applies them: each
    `paid` (key, seconds) in turn, keep the newest `limit` keys, drop each
    `spent` key, then set the `marks`."""

    paid: list = dataclasses.field(default_factory=list)
    spent: list = dataclasses.field(default_factory=list)
    marks: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Plan:
    decisions: list = dataclasses.field(default_factory=list)
    # Plan again at this time (a waiting job's bound, or rent tipping over).
    wake_at: float | None = None
    stats: RoutingStats = dataclasses.field(default_factory=RoutingStats)
    rent: RentChange = dataclasses.field(default_factory=RentChange)

    def wake(self, when: float) -> None:
        if self.wake_at is None or when < self.wake_at:
            self.wake_at = when
