"""Making a tactic path exist on a worker: unpickle what the server holds, replay the rest.

Owns: `Rebuilder` (what a rebuild needs: the registry and its stats, the
workers' scratch, the pool's body cost model, which workers can pickle) and
`realize`, which gives the REPL proof state of a path on one worker, and
the proof's chain (`proof_links`: the command, then the tactics) that it hands
to the one replay loop (pool/replay.py). It
starts from the longer of (the prefix the worker already holds, the deepest
prefix the server holds a pickle of) when the cost model says the pickle is
cheaper, and replays the rest (the proof's command, then the tactics). May
import: errors, repl, pool (the cost model, pool.replay),
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
from ...pool import replay, resume_point
from .answers import opened_sorries, proof_sorries
from .pickles import Scratch, unpickle_state
from .proofs import Path, Proof, SorryStep
from .registry import RegistryStats, StateRegistry

__all__ = ["Rebuilder", "proof_links", "realize", "record_opened", "record_roots"]

# Seconds per request and per character when the pool has measured nothing yet.
_NOMINAL_REQUEST_S = 1e-3
_NOMINAL_CHAR_S = 1e-5
# Weight of the newest batch in the tactic time (as the body cost model's).
_TACTIC_WEIGHT = 0.1


class Rebuilder:
    def __init__(
        self, registry: StateRegistry, scratch: Scratch, cost=None, pickling=lambda worker: False
    ) -> None:
        self.registry = registry
        self.scratch = scratch
        self.cost = cost  # pool.cost (BodyCostModel) or None
        self.pickling = pickling  # worker -> bool: its REPL pickles proof states
        # Seconds one tactic request takes on a held state (weighted over batches):
        # with each proof's measured command, routing's price of a rebuild (char_s).
        self.tactic_s: float | None = None

    @property
    def stats(self) -> RegistryStats:
        return self.registry.stats

    def seconds(self, chars: int) -> float:
        if self.cost is not None and self.cost.known:
            return self.cost.seconds(chars)
        return _NOMINAL_REQUEST_S + _NOMINAL_CHAR_S * chars

    def observe_tactics(self, seconds: float, count: int) -> None:
        """A batch of `count` tactics on a held state took `seconds` (TacticCall)."""
        if count <= 0:
            return
        each = seconds / count
        old = self.tactic_s
        self.tactic_s = each if old is None else old + _TACTIC_WEIGHT * (each - old)

    def char_s(self, proof: Proof, path: Path, tactics: int, chars: int) -> float | None:
        """Routing's price of a call on `path` that runs `tactics` tactics: seconds per
        character of its `chars` of text (the command, the path, the tactics), from the
        measured command and tactic times; None before both were measured (routing
        then prices it like a body)."""
        if self.tactic_s is None or proof.command_s is None or chars <= 0:
            return None
        steps = sum(1 for step in path[1:] if not isinstance(step, SorryStep)) + tactics
        return (proof.command_s + steps * self.tactic_s) / chars

    def replay_seconds(self, proof: Proof, path: Path, held: int) -> float:
        """Expected time to replay `path` from its prefix of length `held`."""
        total = self.seconds(len(proof.command)) if held == 0 else 0.0
        return total + sum(
            self.seconds(len(t)) for t in path[max(held, 1) :] if not isinstance(t, SorryStep)
        )

    def pickle_start(self, proof: Proof, worker, path: Path, held: int) -> int:
        """The prefix length to unpickle before replaying, or 0 to replay from `held`."""
        if not proof.pickles or not self.pickling(worker):
            return 0
        k = proof.deepest_pickle(path, above=held)
        if k == 0:
            return 0
        by_pickle = self.seconds(len(proof.command)) + self.replay_seconds(proof, path, k)
        return k if by_pickle <= self.replay_seconds(proof, path, held) else 0


def record_roots(proof: Proof, built: dict, response: repl.Response) -> list[int]:
    """Sorry index -> REPL proof state, for the sorries that have one (into `built`,
    the worker slot's map for the proof)."""
    roots = []
    for index, sorry in enumerate(proof_sorries(response)):
        if sorry.proof_state is not None:
            built[(index,)] = sorry.proof_state
            roots.append(index)
    return roots


def record_opened(
    proof: Proof, built: dict, path: Path, response: repl.Response, tactic: str
) -> int:
    """The states the tactic at the end of `path` opened with its own sorries; returns how many."""
    opened = opened_sorries(response, tactic)
    for sorry in opened:
        built[path + (SorryStep(sorry.index, len(opened)),)] = sorry.proof_state
    if opened:
        proof.opened[path] = len(opened)
    return len(opened)


class _CommandLink:
    """The proof's command on the header env: its sorry `path[0]` is the first state."""

    derived = False

    def __init__(self, proof: Proof, key: Path, rb: Rebuilder, worker: str) -> None:
        self.proof, self.key, self._rb, self._worker = proof, key, rb, worker

    def request(self, handle: int) -> repl.Request:
        return repl.command(self.proof.command, handle)

    def accept(self, response: repl.Response, built: dict) -> int:
        self._rb.stats.replayed_commands += 1
        sorries = len(proof_sorries(response))
        if response.env is None or sorries != self.proof.roots:
            raise WorkerDiverged(
                f"replaying proof {self.proof.proof_id} on {self._worker} gave a different answer "
                f"({sorries} sorries, first time {self.proof.roots}; {response.message!r})"
            )
        record_roots(self.proof, built, response)
        if self.key not in built:
            raise WorkerDiverged(
                f"replaying proof {self.proof.proof_id}: sorry {self.key[0]} has no proof state now"
            )
        return built[self.key]


class _TacticLink:
    """Tactic `key[-1]` on the state before it."""

    derived = False

    def __init__(self, proof: Proof, key: Path, rb: Rebuilder) -> None:
        self.proof, self.key, self._rb = proof, key, rb

    def request(self, handle: int) -> repl.Request:
        return repl.tactic(self.key[-1], handle)

    def accept(self, response: repl.Response, built: dict) -> int:
        self._rb.stats.replayed_tactics += 1
        if response.proof_state is None:
            raise WorkerDiverged(
                f"replaying tactic {len(self.key) - 1} of a state of proof "
                f"{self.proof.proof_id} failed now: {response.message!r}"
            )
        record_opened(self.proof, built, self.key, response, self.key[-1])
        return response.proof_state


class _SorryLink:
    """A sorry the tactic before it opened: its state came with that tactic's answer."""

    derived = True

    def __init__(self, proof: Proof, key: Path) -> None:
        self.proof, self.key = proof, key

    def missing(self) -> str:
        step = self.key[-1]
        return (
            f"replaying tactic {len(self.key) - 2} of a state of proof {self.proof.proof_id} opened "
            f"other sorries than the first time (no {step.index} of {step.count})"
        )


def proof_links(proof: Proof, path: Path, rb: Rebuilder, worker: str) -> list:
    """The chain of the state at `path`: the command, then each tactic or opened sorry."""
    links: list = [_CommandLink(proof, path[:1], rb, worker)]
    for k in range(1, len(path)):
        step = path[k]
        links.append(
            _SorryLink(proof, path[: k + 1])
            if isinstance(step, SorryStep)
            else _TacticLink(proof, path[: k + 1], rb)
        )
    return links


async def _unpickle(
    rb: Rebuilder, proof: Proof, worker, base_env: int, prefix: Path, timeout: float
) -> int | None:
    data, goals = proof.pickles[prefix]
    try:
        response = await unpickle_state(worker, rb.scratch, data, base_env, timeout)
    except (WorkerError, OSError):
        _drop_all(rb, proof)
        if worker.alive:
            return None
        raise WorkerCrashed(
            f"unpickling a state of proof {proof.proof_id} killed {worker.name}; "
            "the pickle is dropped and the state replayed"
        ) from None
    if response.proof_state is None or list(response.goals or []) != goals:
        _drop_all(rb, proof)
        return None
    return response.proof_state


def _drop_all(rb: Rebuilder, proof: Proof) -> None:
    """A pickle of `proof` did not load: its others were made the same way."""
    rb.registry.drop_pickles(proof)
    rb.stats.unpickle_failures += 1


async def realize(
    proof: Proof, worker, base_env: int, path: Path, timeout: float, rb: Rebuilder
) -> tuple[int, int]:
    """The REPL proof state of `path` on `worker` (a pool.slot.WorkerHandle),
    unpickling or replaying what is missing (pool/replay.py).

    Returns (REPL proof state number, requests spent rebuilding).
    """
    built = worker.built(proof)
    if path in built:
        return built[path], 0
    links = proof_links(proof, path, rb, worker.name)
    held = resume_point(built, links)
    spent, by_pickle = 0, False
    start = rb.pickle_start(proof, worker, path, held)
    if start:
        began = time.monotonic()
        state = await _unpickle(rb, proof, worker, base_env, path[:start], timeout)
        spent += 1
        if state is not None:
            built[path[:start]] = state
            by_pickle = True
            rb.stats.unpickle_s += time.monotonic() - began
    state, replayed = await replay(worker, built, links, base_env, timeout)
    spent += replayed
    if spent:
        rb.stats.states_rebuilt += 1
        if by_pickle:
            rb.stats.states_rebuilt_by_pickle += 1
        else:
            rb.stats.states_rebuilt_by_replay += 1
    return state, spent
