"""Prover: step-level proof search on the pool (docs/PROVER.md).

Rooms: registry (state ids, tactic paths, quotas, TTL), calls (the pool
WorkerCalls: elaborate a proof, rebuild a state by replay, run a tactic),
assemble (bare statements, whole-proof text), service (the service on
internal types). May import: config, core, errors, results, repl, pool,
worker (states only), services.verify. Never imports edge or `*_pb2`.
"""

from .registry import ProofState, StateRegistry
from .service import ProofStatus, ProverLimits, ProverService, StartedProof, TacticOutcome

__all__ = ["ProofState", "ProofStatus", "ProverLimits", "ProverService", "StartedProof", "StateRegistry",
           "TacticOutcome"]
