"""Internal request and event types of the Formalize RPC (the edge maps them to protobuf)."""

from __future__ import annotations

import dataclasses
import enum

from leanrpc.results import VerifyResult

from .wellformed import WellFormedness


class OutcomeStatus(enum.IntEnum):
    """Mirrors leanrpc.v1.FormalizeOutcomeStatus (same numbers)."""

    FORMALIZED = 1
    EXHAUSTED = 2
    CANCELLED = 3
    FAILED = 4


@dataclasses.dataclass(frozen=True)
class Sampling:
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 0.0  # 0 = off
    max_new_tokens: int = 0  # 0 = server default
    seed: int = 0  # 0 = unseeded


@dataclasses.dataclass(frozen=True)
class FormalizeRequest:
    id: str
    informal_statement: str
    header: str = ""  # "" = the server default ("import Mathlib")
    max_iterations: int = 0  # 0 = the server default (5)
    sampling: Sampling = Sampling()
    stream_tokens: bool = False
    retrieval: bool = False  # System B: prepend top-k Mathlib declarations
    candidates: int = 0  # per round, sampled in one batch; 0 = the server default
    adapter: str = (
        ""  # "" = the server default, "none" = the base model, else a loaded adapter's name
    )
    budget_s: float = 0.0  # wall-clock budget of the job; 0 = the server default (never above it)


@dataclasses.dataclass(frozen=True)
class TokenChunk:
    iteration: int
    text: str
    candidate: int = 0  # index within the round


@dataclasses.dataclass
class Candidate:
    iteration: int  # 1-based
    lean_statement: str
    well_formed: WellFormedness
    verify_result: VerifyResult | None  # None when not well-formed
    error_category: str | None = None
    suggestions: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    generated_tokens: int = 0
    generation_s: float = 0.0
    finish_reason: str = ""
    index: int = 0  # within the round (0..k-1)
    # Same canonical form (comments and whitespace ignored) as an earlier candidate:
    # "round.index" of that one; not verified again.
    duplicate_of: str = ""
    # The triviality gate: `by trivial/decide/simp` closes it, or simp_all refutes its hypotheses.
    suspect_trivial: bool = False
    trivial_reason: str = ""


@dataclasses.dataclass
class Outcome:
    status: OutcomeStatus
    iterations: int
    lean_statement: str = ""
    error: str = ""
    generation_s: float = 0.0
    generated_tokens: int = 0
    elapsed_s: float = 0.0  # wall clock of the job
    budget_s: float = 0.0  # the budget it ran under (0 = none)
    budget_exhausted: bool = False  # the job (or its stream) ran out of wall-clock budget
    candidates_verified: int = 0
    duplicates: int = 0


Payload = TokenChunk | Candidate | Outcome


@dataclasses.dataclass(frozen=True)
class FormalizeEvent:
    job_id: str
    payload: Payload
