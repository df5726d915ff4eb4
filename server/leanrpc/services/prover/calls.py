"""The Prover's work on one worker: elaborate a proof, run a tactic, rebuild a state.

Owns: the three `pool.WorkerCall`s: `StartCall` (the proof's command; its
sorries become root states), `TacticCall` (one tactic on one state, the state
rebuilt first if the worker lacks it) and `RealizeCall` (only the rebuild:
states moved off a worker before it is recycled, where the REPL cannot
pickle). Rebuilding is `rebuild.realize`. Each `run` gets a
`pool.slot.WorkerHandle` (requests, the slot's realizations, a taint mark),
never the Worker: a call cannot kill a worker or change its state. May
import: errors, repl, services.prover.{answers, registry, rebuild}.
"""

from __future__ import annotations

from ... import repl
from .answers import proof_sorries
from .rebuild import Rebuilder, realize, record_opened, record_roots
from .registry import Path, Proof, SorryStep

__all__ = ["RealizeCall", "StartCall", "TacticCall", "TacticRun"]


class StartCall:
    """Elaborates the proof's command; its sorries become the root states."""

    def __init__(self, proof: Proof) -> None:
        self.proof = proof
        self.scope = f"proof:{proof.proof_id}"
        self.text = proof.command

    def held_chars(self, worker_name: str) -> int:
        return 0

    async def run(self, worker, base_env: int, timeout: float) -> repl.Response:
        response = await worker.request(repl.command(self.proof.command, base_env), timeout)
        if response.env is not None:
            self.proof.roots = len(proof_sorries(response))
            record_roots(self.proof, worker.built(self.proof), response)
        return response


class TacticRun:
    """What a TacticCall gives back: the REPL's answer and what was rebuilt first."""

    __slots__ = ("response", "rebuilt", "worker")

    def __init__(self, response: repl.Response, rebuilt: bool, worker: str) -> None:
        self.response = response
        self.rebuilt = rebuilt
        self.worker = worker


class RealizeCall:
    """Rebuilds the state at `path` on a worker (no tactic); answers the requests spent."""

    def __init__(self, proof: Proof, path: Path, rebuilder: Rebuilder) -> None:
        self.proof = proof
        self.path = path
        self.rebuilder = rebuilder
        self.scope = f"proof:{proof.proof_id}"
        self.text = proof.command + _tactics_text(path)

    def held_chars(self, worker_name: str) -> int:
        return self.proof.held_chars(worker_name, self.path)

    async def run(self, worker, base_env: int, timeout: float) -> int:
        _state, spent = await realize(self.proof, worker, base_env, self.path, timeout, self.rebuilder)
        return spent


class TacticCall:
    """Runs `tactic` on the state at `path`, rebuilding the state first if needed."""

    def __init__(self, proof: Proof, path: Path, tactic: str, rebuilder: Rebuilder) -> None:
        self.proof = proof
        self.path = path
        self.tactic = tactic
        self.rebuilder = rebuilder
        self.scope = f"proof:{proof.proof_id}"
        # The work to redo on a worker holding none of it: the command, the path, the tactic.
        self.text = proof.command + _tactics_text(path) + tactic

    def held_chars(self, worker_name: str) -> int:
        return self.proof.held_chars(worker_name, self.path)

    async def run(self, worker, base_env: int, timeout: float) -> TacticRun:
        state, spent = await realize(self.proof, worker, base_env, self.path, timeout, self.rebuilder)
        response = await worker.request(repl.tactic(self.tactic, state), timeout)
        if response.proof_state is not None:
            built = worker.built(self.proof)
            built[self.path + (self.tactic,)] = response.proof_state
            record_opened(self.proof, built, self.path + (self.tactic,), response, self.tactic)
        return TacticRun(response, spent > 0, worker.name)


def _tactics_text(path: Path) -> str:
    return "".join(t + "\n" for t in path[1:] if not isinstance(t, SorryStep))
