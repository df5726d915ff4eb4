"""The Prover's requests as its door resolved them, and who asks.

Owns: `Caller` (identity, deadline, stream: one value instead of three
parameters threaded by hand), `ResolvedStart` and `ResolvedExpand` (one
StartProof, one RunTactic or Expand, immutable) and `ProverRules`, the port
through which services.resolve's `Resolver.start` / `Resolver.expand` ask the
Prover what they need (its limits, the bare-statement rule, the caller's own
state). Plain data and a Protocol: the rules that build them are
services.resolve's. May import: core.headers, errors.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Protocol

from ..core.headers import HeaderSplit
from ..errors import RequestError

__all__ = ["Caller", "ProverRules", "ResolvedExpand", "ResolvedStart"]


@dataclasses.dataclass(frozen=True, slots=True)
class Caller:
    """Who asks, until when, on which stream: one value from a door down (the
    Prover's calls, their pool jobs, the whole-proof check)."""

    client_id: str = ""  # edge/identity.py: fairness, ownership, quotas
    deadline: float | None = None  # absolute (time.monotonic()); None: the caller set none
    stream_id: str = ""  # its stream or batch, fairness only ("": the Prover's own, per proof)

    @classmethod
    def at_door(cls, client_id: str, remaining_s: float | None, stream_id: str = "") -> "Caller":
        """The caller of a call with `remaining_s` seconds left (None: no deadline)."""
        deadline = None if remaining_s is None else time.monotonic() + remaining_s
        return cls(client_id, deadline, stream_id)


@dataclasses.dataclass(frozen=True, slots=True)
class ResolvedStart:
    """One StartProof, resolved: the code as elaborated (a bare statement closed
    with `:= by sorry`), split once; the timeout and TTL in range."""

    code: str
    split: HeaderSplit
    timeout_s: float  # the default applied
    ttl_s: float  # 0: the registry's default
    check_axioms: bool | None
    caller: Caller


@dataclasses.dataclass(frozen=True, slots=True)
class ResolvedExpand:
    """One RunTactic or Expand, resolved: the caller's own live state, the
    tactics as sent, and (Expand's `tactics`) each one's refusal or None."""

    state: Any  # services.prover.proofs.ProofState (this module never imports the Prover)
    tactics: tuple[str, ...]
    refusals: tuple[RequestError | None, ...]  # one per tactic; all None unless `each`
    timeout_s: float  # the default applied
    caller: Caller
    request_id: str = ""
    # False (Extract's replay check): closed goals are COMPLETED without the
    # whole-proof check; only for callers that never hand the result out as a proof.
    check_whole: bool = True

    @property
    def runnable(self) -> tuple[int, ...]:
        """Indices of the tactics no check refused, in order."""
        return tuple(k for k, refused in enumerate(self.refusals) if refused is None)


class ProverRules(Protocol):
    """What resolving a Prover request asks of the Prover (services.prover.ProverService)."""

    limits: Any  # services.prover.ProverLimits: TTL bounds, tactic size, tactics per Expand

    def prepare(self, code: str, body: str) -> str:
        """The code to elaborate (a bare statement closed); RequestError without a sorry."""

    def state(self, state_id: str, client_id: str) -> Any:
        """`client_id`'s live state; NotFoundError for anyone else's or none."""
