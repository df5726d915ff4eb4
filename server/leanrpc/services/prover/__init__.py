"""Prover: step-level proof search on the pool (docs/PROVER.md).

Rooms: proofs (the proof model: proofs, tactic paths, states), registry
(state ids, quotas, TTL, the pickle store),
pickles (which REPLs pickle, each worker's scratch, pickle/unpickle
exchanges), rebuild (a path on a worker: unpickle or replay, by cost), calls
(the pool WorkerCalls: elaborate a proof, run a tactic, rebuild a state),
moves (states moved off a worker before its recycle), assemble (bare
statements, whole-proof text), outcomes (a tactic's answer as an outcome),
whole (the whole-proof check), service (the service on internal types). May
import: config, core, errors, results, repl, pool, worker (states only),
services.verify. Never imports edge or `*_pb2`.
"""

from .outcomes import ProofStatus, StartedProof, TacticOutcome
from .proofs import ProofState
from .registry import StateRegistry
from .service import ProverLimits, ProverService

__all__ = [
    "ProofState",
    "ProofStatus",
    "ProverLimits",
    "ProverService",
    "StartedProof",
    "StateRegistry",
    "TacticOutcome",
]
