"""The Prover's work on one worker: elaborate a proof, run a tactic, rebuild a state.

Owns: the three `pool.WorkerCall`s: `StartCall` (the proof's command; its
sorries become root states), `TacticCall` (tactics on one state, the state
rebuilt first if the worker lacks it; several are pipelined as one batch, one
fence) and `RealizeCall` (only the rebuild: states moved off a worker before
it is recycled, where the REPL cannot pickle). Rebuilding is
`rebuild.realize`. The calls time what they run (a proof's command, a batch
of tactics) and carry routing's price of their work (`char_s`, from
`rebuild.Rebuilder.char_s`). Each `run` gets a `pool.slot.WorkerHandle`
(requests, the slot's realizations, a taint mark), never the Worker: a call
cannot kill a worker or change its state. `job_of` makes any of them a
pool job for a `Caller` (the one place the Prover builds its jobs). May
import: errors, pool (CallJob), repl, services.requests (Caller),
services.prover.{answers, proofs, rebuild}.
"""

from __future__ import annotations

import time

from ... import repl
from ...pool import CallJob
from ..requests import Caller
from .answers import proof_sorries
from .proofs import Path, Proof, SorryStep
from .rebuild import Rebuilder, realize, record_opened, record_roots

__all__ = ["RealizeCall", "StartCall", "TacticCall", "TacticRun", "job_of"]


def job_of(call, timeout_s: float, caller: Caller) -> CallJob:
    """`call` (on `call.proof`) as a pool job for `caller`: fair per proof
    unless the caller names its own stream."""
    proof = call.proof
    return CallJob(
        split=proof.split,
        timeout_s=timeout_s,
        deadline=caller.deadline,
        client_id=caller.client_id,
        stream_id=caller.stream_id or f"prover:{proof.proof_id}",
        call=call,
    )


class StartCall:
    """Elaborates the proof's command; its sorries become the root states."""

    def __init__(self, proof: Proof) -> None:
        self.proof = proof
        self.scope = f"proof:{proof.proof_id}"
        self.text = proof.command

    def held_chars(self, worker_name: str) -> int:
        return 0

    async def run(self, worker, base_env: int, timeout: float) -> repl.Response:
        started = time.monotonic()
        response = await worker.request(repl.command(self.proof.command, base_env), timeout)
        self.proof.command_s = time.monotonic() - started  # what a rebuild redoes first
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
        self.char_s = rebuilder.char_s(proof, path, 0, len(self.text))  # routing's price

    def held_chars(self, worker_name: str) -> int:
        return self.proof.held_chars(worker_name, self.path)

    async def run(self, worker, base_env: int, timeout: float) -> int:
        _state, spent = await realize(
            self.proof, worker, base_env, self.path, timeout, self.rebuilder
        )
        return spent


class TacticCall:
    """Runs `tactics` on the state at `path`, rebuilding the state first if needed.

    Several tactics are pipelined (`request_batch`: written at once, one fence,
    one audit), each on the state itself; `run` gives one `TacticRun` per tactic,
    in order. `deadline` (monotonic) bounds the whole batch; the timeout is per
    tactic.
    """

    def __init__(
        self,
        proof: Proof,
        path: Path,
        tactics: tuple[str, ...],
        rebuilder: Rebuilder,
        deadline: float | None = None,
    ) -> None:
        self.proof = proof
        self.path = path
        self.tactics = tuple(tactics)
        self.rebuilder = rebuilder
        self.deadline = deadline
        self.scope = f"proof:{proof.proof_id}"
        # The work to redo on a worker holding none of it: the command, the path, the tactics.
        self.text = proof.command + _tactics_text(path) + "\n".join(self.tactics)
        # Routing's price per character: measured command and tactic times (None before).
        self.char_s = rebuilder.char_s(proof, path, len(self.tactics), len(self.text))

    def held_chars(self, worker_name: str) -> int:
        return self.proof.held_chars(worker_name, self.path)

    async def run(self, worker, base_env: int, timeout: float) -> list[TacticRun]:
        state, spent = await realize(
            self.proof, worker, base_env, self.path, timeout, self.rebuilder
        )
        requests = [repl.tactic(tactic, state) for tactic in self.tactics]
        started = time.monotonic()
        if len(requests) == 1:
            responses = [await worker.request(requests[0], timeout)]
        else:
            total = None if self.deadline is None else max(0.001, self.deadline - started)
            responses = await worker.request_batch(requests, timeout, total)
        self.rebuilder.observe_tactics(time.monotonic() - started, len(requests))
        built = worker.built(self.proof)
        for tactic, response in zip(self.tactics, responses):
            if response.proof_state is not None:
                built[self.path + (tactic,)] = response.proof_state
                record_opened(self.proof, built, self.path + (tactic,), response, tactic)
        return [TacticRun(response, spent > 0, worker.name) for response in responses]


def _tactics_text(path: Path) -> str:
    return "".join(t + "\n" for t in path[1:] if not isinstance(t, SorryStep))
