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
