"""The Prover's work on one worker: elaborate a proof, rebuild a state, run a tactic.

Owns: the two `pool.WorkerCall`s (`StartCall`, `TacticCall`) and `realize`,
which makes a tactic path exist on a worker by replaying what is missing (the
proof's command, then the tactics, from the longest prefix the worker already
holds). May import: errors, repl, worker (ExitCause), services.prover.registry.

A replay that answers differently from the first time (no proof state where
there was one, a different number of sorries) means the process is not a
faithful copy: the worker is killed and the call fails with WorkerCrashed, so
the pool retries the expansion on another worker.
"""

from __future__ import annotations

from ... import repl
from ...errors import WorkerCrashed
from ...worker.worker import ExitCause
from .registry import Path, Proof, RegistryStats

__all__ = ["StartCall", "TacticCall", "TacticRun", "realize"]


def _record_roots(proof: Proof, worker_name: str, response: repl.Response) -> list[int]:
    """Sorry index -> REPL proof state, for the sorries that have one."""
    built = proof.realized.setdefault(worker_name, {})
    roots = []
    for index, sorry in enumerate(response.sorries):
        if sorry.proof_state is not None:
            built[(index,)] = sorry.proof_state
            roots.append(index)
    return roots


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
            self.proof.roots = len(response.sorries)
            _record_roots(self.proof, worker.name, response)
        return response


class TacticRun:
    """What a TacticCall gives back: the REPL's answer and what was replayed first."""

    __slots__ = ("response", "rebuilt", "worker")

    def __init__(self, response: repl.Response, rebuilt: bool, worker: str) -> None:
        self.response = response
        self.rebuilt = rebuilt
        self.worker = worker


class TacticCall:
    """Runs `tactic` on the state at `path`, rebuilding the state first if needed."""

    def __init__(self, proof: Proof, path: Path, tactic: str, stats: RegistryStats) -> None:
        self.proof = proof
        self.path = path
        self.tactic = tactic
        self.stats = stats
        self.scope = f"proof:{proof.proof_id}"
        # The work to redo on a worker holding none of it: the command, the path, the tactic.
        self.text = proof.command + "".join(t + "\n" for t in path[1:]) + tactic

    def held_chars(self, worker_name: str) -> int:
        return self.proof.held_chars(worker_name, self.path)

    async def run(self, worker, base_env: int, timeout: float) -> TacticRun:
        state, replayed = await realize(self.proof, worker, base_env, self.path, timeout, self.stats)
        response = await worker.request(repl.TacticRequest(tactic=self.tactic, proof_state=state), timeout)
        if response.proof_state is not None:
            self.proof.realized.setdefault(worker.name, {})[self.path + (self.tactic,)] = response.proof_state
        return TacticRun(response, replayed > 0, worker.name)


async def realize(proof: Proof, worker, base_env: int, path: Path, timeout: float,
                  stats: RegistryStats) -> tuple[int, int]:
    """The REPL proof state of `path` on `worker`, replaying what is missing.

    Returns (REPL proof state number, requests replayed).
    """
    built = proof.realized.setdefault(worker.name, {})
    if path in built:
        return built[path], 0
    held = next((k for k in range(len(path), 0, -1) if path[:k] in built), 0)
    replayed = 0
    if held == 0:
        response = await worker.request(repl.command(proof.command, base_env), timeout)
        replayed += 1
        stats.replayed_commands += 1
        if response.env is None or len(response.sorries) != proof.roots:
            worker.kill(ExitCause.CRASH)
            raise WorkerCrashed(
                f"replaying proof {proof.proof_id} on {worker.name} gave a different answer "
                f"({len(response.sorries)} sorries, first time {proof.roots}; {response.message!r})"
            )
        _record_roots(proof, worker.name, response)
        built = proof.realized[worker.name]
        if path[:1] not in built:
            worker.kill(ExitCause.CRASH)
            raise WorkerCrashed(f"replaying proof {proof.proof_id}: sorry {path[0]} has no proof state now")
        held = 1
    for k in range(held, len(path)):
        response = await worker.request(repl.TacticRequest(tactic=path[k], proof_state=built[path[:k]]), timeout)
        replayed += 1
        stats.replayed_tactics += 1
        if response.proof_state is None:
            worker.kill(ExitCause.CRASH)
            raise WorkerCrashed(
                f"replaying tactic {k} of a state of proof {proof.proof_id} failed now: {response.message!r}"
            )
        built[path[:k + 1]] = response.proof_state
    if replayed:
        stats.states_rebuilt += 1
    return built[path], replayed
