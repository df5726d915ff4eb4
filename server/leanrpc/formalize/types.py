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


@dataclasses.dataclass(frozen=True)
class TokenChunk:
    iteration: int
    text: str


@dataclasses.dataclass
class Candidate:
    iteration: int  # 1-based
    lean_statement: str
    well_formed: WellFormedness
    verify_result: VerifyResult | None  # None when not well-formed
    # Internal only (not in the proto): what the loop fed back and how it was generated.
    error_category: str | None = None
    suggestions: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    generated_tokens: int = 0
    generation_s: float = 0.0
    finish_reason: str = ""


@dataclasses.dataclass
class Outcome:
    status: OutcomeStatus
    iterations: int
    lean_statement: str = ""
    error: str = ""
    generation_s: float = 0.0
    generated_tokens: int = 0


Payload = TokenChunk | Candidate | Outcome


@dataclasses.dataclass(frozen=True)
class FormalizeEvent:
    job_id: str
    payload: Payload
