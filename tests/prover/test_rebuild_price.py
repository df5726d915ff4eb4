"""Routing's price of a proof state's rebuild (issue 28 item 2): the Prover times
each proof's command and its tactic batches, and a tactic call reaches routing
with seconds per character of its work (`char_s`), so a state waits for its busy
holder when rebuilding it elsewhere would cost more than the wait. Before, such
calls were priced by the bodies' cost model, which knows nothing on a
search-only server: every idle worker rebuilt what a busy one held."""

from __future__ import annotations

from leanrpc.core.headers import split_header
from leanrpc.pool.job import CallJob
from leanrpc.pool.ticket import Ticket
from leanrpc.services.prover.calls import TacticCall
from leanrpc.services.prover.rebuild import Rebuilder
from leanrpc.services.prover.registry import Proof, SorryStep
from prover_support import AND_STATEMENT, running_server

COMMAND = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by sorry"


def _proof() -> Proof:
    return Proof("p1", split_header("import Mathlib\n\n" + COMMAND), COMMAND, "c", False, 1)


def test_no_price_before_the_command_and_a_tactic_batch_were_timed():
    rb = Rebuilder(None, None)
    proof = _proof()
    assert rb.char_s(proof, (0, "constructor"), 7, 100) is None
    rb.observe_tactics(0.07, 7)
    assert rb.char_s(proof, (0, "constructor"), 7, 100) is None  # the command not yet
    proof.command_s = 0.05
    assert rb.char_s(proof, (0, "constructor"), 7, 100) is not None


def test_the_price_is_the_command_and_each_tactic_to_redo_per_character():
    rb = Rebuilder(None, None)
    proof = _proof()
    proof.command_s = 0.05
    rb.observe_tactics(0.07, 7)  # 10 ms a tactic
    # Two tactics on the path (an opened sorry costs nothing: its tactic made it), seven to run.
    path = (0, "constructor", SorryStep(0, 2), "exact hp")
    assert abs(rb.char_s(proof, path, 7, 200) - (0.05 + 9 * 0.01) / 200) < 1e-12
    rb.observe_tactics(0.14, 7)  # weighted, as the body cost model
    assert abs(rb.tactic_s - 0.011) < 1e-12


async def test_the_prover_times_its_work_and_its_tactic_calls_reach_routing_priced():
    async with running_server(1) as (app, client):
        proof_answer = await client.start_proof(AND_STATEMENT)
        root = proof_answer.states[0].state_id
        [_result] = [r async for r in client.expand([(root, "constructor")])]
        prover = app.prover
        [proof] = {s.proof for s in prover.registry.held_states(app.pool.workers[0].name)}
        assert proof.command_s is not None and proof.command_s > 0
        assert prover.rebuilder.tactic_s is not None and prover.rebuilder.tactic_s > 0
        call = TacticCall(proof, (0, "constructor"), ("exact hp", "exact hq"), prover.rebuilder)
        view = Ticket(CallJob(split=proof.split, timeout_s=10, call=call), None, 0.0).view
        assert view.char_s is not None and view.char_s == call.char_s > 0
