"""Result types of the Python client: plain dataclasses, and ClientError.

Owns: the shapes users get back. May import: grpc (status codes) only.
"""

from __future__ import annotations

import dataclasses

import grpc


class ClientError(Exception):
    """An RPC failed for good (after retries); `partial` holds the results already received.

    From the server's rich status (google.rpc.Status): `reason` is its
    ErrorInfo.reason ("OVERLOADED", "INVALID_REQUEST", ...; "" if none),
    `field_violations` its BadRequest as (field, description) pairs, and
    `retry_after_s` its RetryInfo delay (None if none).
    """

    def __init__(
        self,
        code: grpc.StatusCode,
        details: str,
        partial: list | None = None,
        *,
        reason: str = "",
        field_violations: list[tuple[str, str]] | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(f"{code.name}: {details}")
        self.code = code
        self.details = details
        self.reason = reason
        self.field_violations = list(field_violations or [])
        self.retry_after_s = retry_after_s
        # Results that arrived before the failure (input order), e.g. when a
        # stream broke midway: callers can still show or keep them.
        self.partial: list[Result] = list(partial or [])


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (KeyboardInterrupt) during a blocking `Client.verify`.

    `partial` holds the results received before it, in input order, and
    `total` the number of snippets asked. Still a KeyboardInterrupt, so code
    that catches that keeps working.
    """

    def __init__(self, partial: list, total: int) -> None:
        super().__init__(f"interrupted: {len(partial)} of {total} answered")
        self.partial: list[Result] = list(partial)
        self.total = total


@dataclasses.dataclass
class Message:
    severity: str
    line: int
    column: int
    end_line: int | None
    end_column: int | None
    text: str


@dataclasses.dataclass
class ReferenceCheck:
    """Result.reference: `reason` is "" when passed, else STATEMENT_MISMATCH,
    MISSING_DECLARATION, KIND_CHANGED, FORBIDDEN_AXIOM, ... naming `declaration`."""

    passed: bool
    reason: str
    declaration: str = ""
    detail: str = ""
    declarations: list[str] = dataclasses.field(default_factory=list)
    cached_reference: bool = False


@dataclasses.dataclass
class Checks:
    """Result.checks: the verdict's levels (docs/SECURITY.md, "Levels")."""

    policy: str
    axioms: str
    statement: str
    judge: str


@dataclasses.dataclass
class Tactic:
    """One tactic of the source (Result.tactics, asked with `all_tactics=True`):
    the REPL's text of it, where it is in your code, the goals before it."""

    text: str
    line: int
    column: int
    end_line: int | None
    end_column: int | None
    goals: str  # the goals before it, one string ("no goals" when none)
    used_constants: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Result:
    id: str
    status: str  # VALID, INVALID, SORRY, TIMEOUT, CRASH, OUT_OF_MEMORY, REJECTED, CANCELLED
    messages: list[Message]
    sorries: list[dict]
    error: str
    time_total_s: float
    time_queue_s: float
    time_header_s: float
    time_body_s: float
    time_boot_s: float
    warm_header: bool
    reused_prefix_chars: int
    attempts: int
    verifier: str  # "lean" or "stand-in"
    verifier_description: str
    infotree_json: str = ""
    axioms: list[str] = dataclasses.field(default_factory=list)
    worker: str = ""  # the pool worker that answered (Reuse.worker)
    cache_source: str = ""  # "", "memory", "disk", "redis" or "in-flight" (Reuse.cache_source)
    original_run: str = ""  # the run that elaborated this verdict (Reuse.original_run)
    # Set only on a REJECTED result whose snippet never ran (queue full, server
    # shutting down): it may be sent again after this many seconds (Result.retry_after).
    retry_after_s: float | None = None
    # Set when the snippet carried a reference: the statement check (Result.reference).
    reference: "ReferenceCheck | None" = None
    judge: str = ""  # the external judge's level ("" = none configured), Result.judge
    # Which checks ran behind the verdict (Result.checks): policy "proof" or
    # "trusted"; axioms, statement, judge each "NOT_RUN", "PASSED" or "FAILED".
    checks: "Checks | None" = None
    # The REPL command options' answers, each only when asked (verify's
    # all_tactics / root_goals / declarations): the tactics with their goals;
    # each tactic block's starting goal ({"line", "column", "goal"} as a
    # sorry, but never a sorry); the fork's declarations as JSON text ("" when
    # the REPL gave none: an upstream REPL ignores the option).
    tactics: list[Tactic] = dataclasses.field(default_factory=list)
    root_goals: list[dict] = dataclasses.field(default_factory=list)
    declarations_json: str = ""

    @property
    def valid(self) -> bool:
        return self.status == "VALID"

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class TacticStep:
    text: str
    start: tuple[int, int]
    end: tuple[int, int]
    goals_before: list[str]
    goals_after: list[str]
    kind: str


@dataclasses.dataclass
class Declaration:
    name: str
    steps: list[TacticStep]


@dataclasses.dataclass
class SessionResult:
    """A session call's outcome: `env` is the new session env id (None if
    the code made none); it stays valid across server-side worker restarts."""

    session: str
    env: int | None
    result: Result
    replayed_commands: int = 0
    profile: str = ""  # the REPL profile the session runs on ("" = the server's default)


@dataclasses.dataclass
class BatchSummary:
    """What a batch came to (Kimina's `analyze()`): `summarize(results)`."""

    total: int
    counts: dict[str, int]  # results per status, most first
    valid: int
    cache_hits: int  # answered from the server's result cache (any tier)
    time_total_s: float  # the results' own times, summed (not the wall clock)
    time_mean_s: float
    time_max_s: float

    def __str__(self) -> str:
        lines = [f"{status:<14} {count:>7}" for status, count in self.counts.items()]
        lines.append(f"{'total':<14} {self.total:>7}")
        lines.append(
            f"valid {self.valid}/{self.total}, cache hits {self.cache_hits}, "
            f"time mean {self.time_mean_s:.3f} s, max {self.time_max_s:.3f} s"
        )
        return "\n".join(lines)


def summarize(results) -> BatchSummary:
    """Counts per outcome, times and cache hits of a list of results."""
    results = list(results)
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    times = [result.time_total_s for result in results]
    return BatchSummary(
        total=len(results),
        counts=dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))),
        valid=counts.get("VALID", 0),
        cache_hits=sum(1 for result in results if result.cache_source),
        time_total_s=sum(times),
        time_mean_s=sum(times) / len(times) if times else 0.0,
        time_max_s=max(times, default=0.0),
    )
