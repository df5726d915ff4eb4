"""Internal result types shared by the worker, pool and services layers.

Plain dataclasses: the gRPC edge converts them to and from protobuf, so no
layer below it ever sees a `*_pb2` type.
"""

from __future__ import annotations

import dataclasses
import enum
import re

_LEAN_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def lean_version_tuple(text: str) -> tuple[int, int, int] | None:
    """(major, minor, patch) of a Lean version ("4.19.0", "v4.3.0", "4.22.0-rc1"); None without one."""
    match = _LEAN_VERSION.search(text or "")
    return None if match is None else (int(match[1]), int(match[2]), int(match[3] or 0))


class Status(enum.IntEnum):
    """Mirrors leanrpc.v1.Status (same numbers)."""

    VALID = 1
    INVALID = 2
    SORRY = 3
    TIMEOUT = 4
    CRASH = 5
    OUT_OF_MEMORY = 6
    REJECTED = 7
    CANCELLED = 8


class Severity(enum.IntEnum):
    """Mirrors leanrpc.v1.Severity."""

    INFO = 1
    WARNING = 2
    ERROR = 3

    @classmethod
    def from_repl(cls, text: str) -> "Severity":
        # The REPL schema also names "trace"; it never sends it, but map it
        # to INFO rather than fail.
        return {"error": cls.ERROR, "warning": cls.WARNING}.get(text, cls.INFO)


@dataclasses.dataclass(frozen=True, slots=True)
class Position:
    line: int  # 1-based
    column: int  # 0-based, code points


@dataclasses.dataclass(slots=True)
class Message:
    severity: Severity
    start: Position
    end: Position | None
    text: str


@dataclasses.dataclass(slots=True)
class SorryInfo:
    start: Position | None
    end: Position | None
    goal: str


@dataclasses.dataclass(slots=True)
class TacticInfo:
    """One tactic the REPL listed for `allTactics` (REPL-PROTOCOL.md 5.4)."""

    text: str
    start: Position | None
    end: Position | None
    goals: str  # the goals before it, one string ("no goals" when none)
    used_constants: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(slots=True)
class Timings:
    queue_s: float = 0.0
    header_s: float = 0.0
    body_s: float = 0.0
    total_s: float = 0.0
    boot_s: float = 0.0


@dataclasses.dataclass(slots=True)
class ReuseInfo:
    warm_header: bool = False
    reused_prefix_chars: int = 0
    worker: str = ""
    attempts: int = 1
    # Set by leanrpc.cache: "" when this request was elaborated, else
    # "memory" / "disk" / "redis" (result cache) or "in-flight" (an identical
    # snippet running at the same time); `original_run` names that run.
    cache_source: str = ""
    original_run: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class VerifierIdentity:
    kind: str  # "lean" or "stand-in"
    lean_version: str = ""
    repl_revision: str = ""
    project_revision: str = ""
    description: str = ""
    # A Lean before a published kernel soundness fix (repl.probes.soundness_warning); "" = none known.
    warning: str = ""

    @property
    def cache_key(self) -> str:
        """For result caches: verdicts of different toolchains never mix.

        Not used by the pool (all its workers run one toolchain); a cache of
        results must put it in every key.
        """
        return f"{self.kind}|{self.lean_version}|{self.repl_revision}|{self.project_revision}"


STAND_IN_KIND = "stand-in"
LEAN_KIND = "lean"


@dataclasses.dataclass(slots=True)
class VerifyResult:
    id: str
    status: Status
    messages: list[Message] = dataclasses.field(default_factory=list)
    sorries: list[SorryInfo] = dataclasses.field(default_factory=list)
    timings: Timings = dataclasses.field(default_factory=Timings)
    reuse: ReuseInfo = dataclasses.field(default_factory=ReuseInfo)
    verifier: VerifierIdentity | None = None
    error: str = ""
    # The REPL's infotree as decoded JSON (None when not asked for); the
    # edge serializes it once, for the wire.
    infotree: dict | list | None = None
    axioms: list[str] = dataclasses.field(default_factory=list)
    # Set only on a REJECTED result for a snippet that never ran (queue full,
    # server shutting down): it may be sent again after this many seconds.
    retry_after_s: float | None = None
    # Set when the snippet carried a reference (issue 25 item 2); `judge`
    # when a `[judge]` ran on it (item 5).
    reference: "ReferenceCheck | None" = None
    judge: "JudgeCheck | None" = None
    # The checks behind the verdict (issue 25 item 4): the code policy in
    # force ("proof" or "trusted"), and whether the axiom check ran.
    policy: str = ""
    axioms_checked: bool = False
    # The REPL command options' answers (issue 41), each only when asked:
    # `allTactics`' tactics, `rootGoals`' starting goals (kept apart from the
    # sorries), the fork's `declarations` (decoded JSON; None when the REPL
    # gave none, as an upstream REPL does).
    tactics: list[TacticInfo] = dataclasses.field(default_factory=list)
    root_goals: list[SorryInfo] = dataclasses.field(default_factory=list)
    declarations: list | None = None


class ReferenceReason(enum.IntEnum):
    """Mirrors leanrpc.v1.ReferenceReason: why a snippet does not prove its reference."""

    NONE = 0  # the statement check passed (or did not run)
    STATEMENT_MISMATCH = 1  # the elaborated type differs
    MISSING_DECLARATION = 2  # the reference's declaration is not in the snippet's env
    KIND_CHANGED = 3  # e.g. a theorem became an axiom or an opaque
    FORBIDDEN_AXIOM = 4  # the declaration depends on an axiom outside the allow-list
    BODY_CHANGED = 5  # a def/abbrev body differs from the reference's (not `sorry`)
    CONTAINS_SORRY = 6  # the declaration depends on sorryAx
    REFERENCE_INVALID = 7  # the reference itself does not elaborate
    CHECK_INCOMPLETE = 8  # the REPL did not answer every statement query (fail closed)


@dataclasses.dataclass(slots=True)
class ReferenceCheck:
    """The statement check of a snippet that carried a reference.

    `passed` is True only when every reference declaration was found with
    the same kind and type (and body, for def/abbrev), within the axiom
    allow-list and without sorry.
    """

    passed: bool = False
    reason: ReferenceReason = ReferenceReason.NONE
    declaration: str = ""  # the reference declaration that failed
    detail: str = ""
    declarations: list[str] = dataclasses.field(default_factory=list)  # every one checked
    cached_reference: bool = False  # the reference's types came from the cache
    # REPL seconds of the snippet's statement queries (not on the wire; benchmarks); 0 when
    # they rode in the body's command (repl/trailing.py): their time is the body's then.
    query_s: float = 0.0


class JudgeLevel(enum.IntEnum):
    """Mirrors leanrpc.v1.JudgeLevel: what the external judge (`[judge]`) said."""

    NOT_RUN = 0  # no judge configured, or the result was not VALID with a reference
    ACCEPTED = 1
    REFUSED = 2
    TIMEOUT = 3
    FAILED = 4  # the judge could not be started or crashed


@dataclasses.dataclass(slots=True)
class JudgeCheck:
    level: JudgeLevel = JudgeLevel.NOT_RUN
    judge: str = ""  # the configured judge's name
    detail: str = ""  # the tail of its output
    elapsed_s: float = 0.0


class CheckLevel(enum.IntEnum):
    """Mirrors leanrpc.v1.CheckLevel: how one check behind a verdict came out."""

    NOT_RUN = 0
    PASSED = 1
    FAILED = 2


@dataclasses.dataclass(frozen=True, slots=True)
class Checks:
    """Which checks ran behind a verdict (issue 25 item 4; Result.checks)."""

    policy: str
    axioms: CheckLevel
    statement: CheckLevel
    judge: CheckLevel


def checks_of(result: VerifyResult, allowed_axioms: frozenset[str]) -> Checks:
    """The verdict levels of `result`, read in one place for every door."""
    foreign = [a for a in result.axioms if a not in allowed_axioms]
    if not result.axioms_checked:
        axioms = CheckLevel.NOT_RUN
    elif foreign:
        axioms = CheckLevel.FAILED
    else:
        axioms = CheckLevel.PASSED if result.status is Status.VALID else CheckLevel.NOT_RUN
    if result.reference is None:
        statement = CheckLevel.NOT_RUN
    else:
        statement = CheckLevel.PASSED if result.reference.passed else CheckLevel.FAILED
    if result.judge is None or result.judge.level is JudgeLevel.NOT_RUN:
        judge = CheckLevel.NOT_RUN
    else:
        judge = (
            CheckLevel.PASSED if result.judge.level is JudgeLevel.ACCEPTED else CheckLevel.FAILED
        )
    return Checks(result.policy, axioms, statement, judge)
