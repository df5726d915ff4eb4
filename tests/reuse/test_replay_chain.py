"""The one replay loop (pool/replay.py) with scripted answers, no processes.

Sessions and proofs hand it their chains; an answer that differs from the
first time raises WorkerDiverged (the pool then kills the worker: the
runner's WorkerCrashed path, tests/reuse/test_diverged_replay.py), and
nothing of the failed step is recorded.
"""

from __future__ import annotations

import pytest

from leanrpc import repl
from leanrpc.core.headers import split_header
from leanrpc.errors import WorkerDiverged
from leanrpc.pool.replay import realize_session, replay, resume_point
from leanrpc.pool.sessions import Session
from leanrpc.pool.slot import Slot
from leanrpc.services.prover.rebuild import Rebuilder, proof_links, realize
from leanrpc.services.prover.registry import Proof, SorryStep, StateRegistry


class Scripted:
    """A worker handle that answers from a script and records what it was sent."""

    def __init__(self, *answers: repl.Response, name: str = "w1") -> None:
        self.answers = list(answers)
        self.sent: list = []
        self.name = name
        self.alive = True
        self.slot = Slot(name)

    async def request(self, payload, timeout):
        self.sent.append(payload)
        return self.answers.pop(0)

    def built(self, chain) -> dict:
        return self.slot.built(chain)


def _session() -> Session:
    session = Session("s", split_header("import Mathlib\n"))
    session.record(None, None)  # env 0: the header env itself
    session.record(0, "def a := 1")  # env 1
    session.record(1, "def b := a")  # env 2
    return session


async def test_a_session_chain_replays_only_what_the_slot_lacks():
    session, worker = _session(), Scripted(repl.Response(env=7), repl.Response(env=8))
    env, replayed = await realize_session(session, worker, worker.built(session), 5, 2, 1.0)
    assert (env, replayed) == (8, 3)
    assert [p.cmd for p in worker.sent] == ["def a := 1", "def b := a"]
    assert [p.env for p in worker.sent] == [5, 7]
    assert session.realized["w1"] == {0: 5, 1: 7, 2: 8}
    again = await realize_session(session, worker, worker.built(session), 5, 2, 1.0)
    assert again == (8, 0) and len(worker.sent) == 2


async def test_a_session_step_answered_otherwise_diverges_and_is_not_recorded():
    session = _session()
    worker = Scripted(repl.Response(env=7), repl.Response(message="unknown identifier 'a'"))
    with pytest.raises(WorkerDiverged, match="replaying session 's' env 2"):
        await realize_session(session, worker, worker.built(session), 5, 2, 1.0)
    assert 2 not in session.realized["w1"]


def _proof() -> tuple[Proof, Rebuilder]:
    proof = Proof(
        "p1", split_header("import Mathlib\n"), "theorem t : True ∧ True := by sorry", "c", False, 1
    )
    registry = StateRegistry(max_states_per_client=100, default_ttl_s=60.0, max_ttl_s=60.0)
    rebuilder = Rebuilder(registry, scratch=None)
    return proof, rebuilder


def _sorry_answer() -> repl.Response:
    return repl.Response(env=3, sorries=[repl.ReplSorry(proof_state=10, goal="⊢ True ∧ True")])


async def test_a_proof_chain_replays_the_command_then_the_tactics():
    proof, rb = _proof()
    worker = Scripted(_sorry_answer(), repl.Response(proof_state=11, goals=["⊢ True"]))
    state, spent = await realize(proof, worker, 2, (0, "constructor"), 1.0, rb)
    assert (state, spent) == (11, 2)
    assert [type(p).__name__ for p in worker.sent] == ["CommandRequest", "TacticRequest"]
    assert worker.sent[1].proof_state == 10
    assert proof.realized["w1"][(0,)] == 10 and rb.stats.replayed_tactics == 1


async def test_a_proof_replay_that_fails_a_tactic_now_diverges():
    proof, rb = _proof()
    worker = Scripted(_sorry_answer(), repl.Response(message="tactic failed"))
    with pytest.raises(
        WorkerDiverged, match="replaying tactic 1 of a state of proof p1 failed now"
    ):
        await realize(proof, worker, 2, (0, "constructor"), 1.0, rb)
    assert (0, "constructor") not in proof.realized["w1"]


async def test_a_proof_command_with_other_sorries_now_diverges():
    proof, rb = _proof()
    worker = Scripted(repl.Response(env=3, sorries=[]))
    with pytest.raises(WorkerDiverged, match="gave a different answer"):
        await realize(proof, worker, 2, (0,), 1.0, rb)


async def test_a_sorry_the_replayed_tactic_did_not_open_diverges():
    proof, rb = _proof()
    path = (0, "constructor", SorryStep(1, 2))
    worker = Scripted(
        _sorry_answer(), repl.Response(proof_state=11, goals=["⊢ True"])
    )  # opened none
    with pytest.raises(WorkerDiverged, match="opened other sorries"):
        await realize(proof, worker, 2, path, 1.0, rb)


def test_resume_point_never_starts_before_a_derived_step_it_lacks():
    proof, rb = _proof()
    path = (0, "constructor", SorryStep(1, 2), "trivial")
    links = proof_links(proof, path, rb, "w1")
    assert resume_point({}, links) == 0
    # The opened sorry is not held: replay from the root state, the tactic again.
    assert resume_point({(0,): 10, (0, "constructor"): 11}, links) == 1
    assert resume_point({(0,): 10, path[:3]: 12}, links) == 3
    assert resume_point({path: 13}, links) == 4


async def test_an_empty_chain_is_its_root():
    assert await replay(Scripted(), {}, [], 9, 1.0) == (9, 0)
