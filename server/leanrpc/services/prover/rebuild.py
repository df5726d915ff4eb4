"""Making a tactic path exist on a worker: unpickle what the server holds, replay the rest.

Owns: `Rebuilder` (what a rebuild needs: the registry and its stats, the
workers' scratch, the pool's body cost model, which workers can pickle) and
`realize`, which gives the REPL proof state of a path on one worker. It
starts from the longer of (the prefix the worker already holds, the deepest
prefix the server holds a pickle of) when the cost model says the pickle is
cheaper, and replays the rest (the proof's command, then the tactics). May
import: errors, repl, pool (the cost model),
services.prover.{registry, pickles}.

Cost: replaying costs one request per command or tactic, each priced by the
prefix-routing cost model (`overhead + per_char * chars`). Unpickling is
priced like elaborating the proof's command once (it re-adds the command's
constants on the worker's header env), so a pickle of a state with tactics
behind it is always cheaper than replaying from nothing; ties go to the
pickle. A failed unpickle (a message, other goals than when pickled, a REPL
that died on the file) drops every pickle of that proof: the path is replayed
(on the same worker, or, when the REPL died, by the pool's retry on another).

A replay that answers differently from the first time (no proof state where
there was one, a different number of sorries) means the process is not a
faithful copy: the call fails with WorkerDiverged; the pool kills the worker
(services never do) and retries the expansion on another.
"""

from __future__ import annotations

import time

from ... import repl
from ...errors import WorkerCrashed, WorkerDiverged, WorkerError
from .answers import opened_sorries, proof_sorries
from .pickles import Scratch, unpickle_state
from .registry import Path, Proof, RegistryStats, SorryStep, StateRegistry

__all__ = ["Rebuilder", "realize", "record_opened", "record_roots"]

# Seconds per request and per character when the pool has measured nothing yet.
_NOMINAL_REQUEST_S = 1e-3
_NOMINAL_CHAR_S = 1e-5


class Rebuilder:
    def __init__(self, registry: StateRegistry, scratch: Scratch, cost=None, pickling=lambda worker: False) -> None:
        self.registry = registry
        self.scratch = scratch
        self.cost = cost            # pool.cost (BodyCostModel) or None
        self.pickling = pickling    # worker -> bool: its REPL pickles proof states

    @property
    def stats(self) -> RegistryStats:
        return self.registry.stats

    def seconds(self, chars: int) -> float:
        if self.cost is not None and self.cost.known:
            return self.cost.seconds(chars)
        return _NOMINAL_REQUEST_S + _NOMINAL_CHAR_S * chars

    def replay_seconds(self, proof: Proof, path: Path, held: int) -> float:
        """Expected time to replay `path` from its prefix of length `held`."""
        total = self.seconds(len(proof.command)) if held == 0 else 0.0
        return total + sum(self.seconds(len(t)) for t in path[max(held, 1):] if not isinstance(t, SorryStep))

    def pickle_start(self, proof: Proof, worker, path: Path, held: int) -> int:
        """The prefix length to unpickle before replaying, or 0 to replay from `held`."""
        if not proof.pickles or not self.pickling(worker):
            return 0
        k = proof.deepest_pickle(path, above=held)
        if k == 0:
            return 0
        by_pickle = self.seconds(len(proof.command)) + self.replay_seconds(proof, path, k)
        return k if by_pickle <= self.replay_seconds(proof, path, held) else 0


def record_roots(proof: Proof, worker_name: str, response: repl.Response) -> list[int]:
    """Sorry index -> REPL proof state, for the sorries that have one."""
    built = proof.realized.setdefault(worker_name, {})
    roots = []
    for index, sorry in enumerate(proof_sorries(response)):
        if sorry.proof_state is not None:
            built[(index,)] = sorry.proof_state
            roots.append(index)
    return roots


def record_opened(proof: Proof, built: dict, path: Path, response: repl.Response, tactic: str) -> int:
    """The states the tactic at the end of `path` opened with its own sorries; returns how many."""
    opened = opened_sorries(response, tactic)
    for sorry in opened:
        built[path + (SorryStep(sorry.index, len(opened)),)] = sorry.proof_state
    if opened:
        proof.opened[path] = len(opened)
    return len(opened)


def _held(built: dict, path: Path) -> int:
    """Length of the longest prefix of `path` built here from which a replay can go on
    (not one whose next step is a sorry the worker has no state of)."""
    for k in range(len(path), 0, -1):
        if path[:k] in built and not (k < len(path) and isinstance(path[k], SorryStep)):
            return k
    return 0


async def _unpickle(rb: Rebuilder, proof: Proof, worker, base_env: int, prefix: Path, timeout: float) -> int | None:
    data, goals = proof.pickles[prefix]
    try:
        response = await unpickle_state(worker, rb.scratch, data, base_env, timeout)
    except (WorkerError, OSError):
        _drop_all(rb, proof)
        if worker.alive:
            return None
        raise WorkerCrashed(f"unpickling a state of proof {proof.proof_id} killed {worker.name}; "
                            "the pickle is dropped and the state replayed") from None
    if response.proof_state is None or list(response.goals or []) != goals:
        _drop_all(rb, proof)
        return None
    return response.proof_state


def _drop_all(rb: Rebuilder, proof: Proof) -> None:
    """A pickle of `proof` did not load: its others were made the same way."""
    rb.registry.drop_pickles(proof)
    rb.stats.unpickle_failures += 1


async def realize(proof: Proof, worker, base_env: int, path: Path, timeout: float, rb: Rebuilder) -> tuple[int, int]:
    """The REPL proof state of `path` on `worker`, unpickling or replaying what is missing.

    Returns (REPL proof state number, requests spent rebuilding).
    """
    built = proof.realized.setdefault(worker.name, {})
    if path in built:
        return built[path], 0
    held = _held(built, path)
    spent, by_pickle = 0, False
    start = rb.pickle_start(proof, worker, path, held)
    if start:
        began = time.monotonic()
        state = await _unpickle(rb, proof, worker, base_env, path[:start], timeout)
        spent += 1
        if state is not None:
            built[path[:start]] = state
            held, by_pickle = start, True
            rb.stats.unpickle_s += time.monotonic() - began
    if held == 0:
        response = await worker.request(repl.command(proof.command, base_env), timeout)
        spent += 1
        rb.stats.replayed_commands += 1
        sorries = len(proof_sorries(response))
        if response.env is None or sorries != proof.roots:
            raise WorkerDiverged(
                f"replaying proof {proof.proof_id} on {worker.name} gave a different answer "
                f"({sorries} sorries, first time {proof.roots}; {response.message!r})"
            )
        record_roots(proof, worker.name, response)
        built = proof.realized[worker.name]
        if path[:1] not in built:
            raise WorkerDiverged(f"replaying proof {proof.proof_id}: sorry {path[0]} has no proof state now")
        held = 1
    for k in range(held, len(path)):
        if isinstance(path[k], SorryStep):
            if path[:k + 1] not in built:
                raise WorkerDiverged(f"replaying tactic {k - 1} of a state of proof {proof.proof_id} opened "
                                    f"other sorries than the first time (no {path[k].index} of {path[k].count})")
            continue
        response = await worker.request(repl.TacticRequest(tactic=path[k], proof_state=built[path[:k]]), timeout)
        spent += 1
        rb.stats.replayed_tactics += 1
        if response.proof_state is None:
            raise WorkerDiverged(
                f"replaying tactic {k} of a state of proof {proof.proof_id} failed now: {response.message!r}"
            )
        built[path[:k + 1]] = response.proof_state
        record_opened(proof, built, path[:k + 1], response, path[k])
    if spent:
        rb.stats.states_rebuilt += 1
        if by_pickle:
            rb.stats.states_rebuilt_by_pickle += 1
        else:
            rb.stats.states_rebuilt_by_replay += 1
    return built[path], spent
