"""The Prover reads every real REPL's tactic answers right (issue 28 item 5).

Inputs are the recorded transcripts in shared/fixtures (upstream REPL v4.33,
the LeanInteract fork at v4.9, v4.19, v4.32), read with the stand-in's own
transcript splitter. Answers from before REPL v4.19.0 are those same answers
without `proofStatus`: that key is the only tactic-mode difference between the
tags (it arrived in the REPL's PR #63), so dropping it gives the old shape.
"""

from __future__ import annotations

import json
import os
import sys

import msgspec

from leanrpc import repl
from leanrpc.client import best_first_search
from leanrpc.services.prover.answers import (
    Reading,
    nest_tactics,
    proof_sorries,
    read_tactic,
    sorry_spans,
)
from leanrpc.services.prover.registry import SorryStep
from leanrpc.standin.fixtures import fixture_sets, split_requests, split_responses, transcripts
from prover_support import running_server
from testkit import shared_path


def _recorded() -> list[tuple[str, dict, dict]]:
    """(transcript name, request, answer) for every recorded request/answer pair."""
    pairs = []
    for _name, _version, _fork, set_root in fixture_sets(str(shared_path("fixtures"))):
        for path, _cwd in transcripts(set_root):
            out = path[:-3] + ".expected.out"
            if not os.path.exists(out):
                continue
            with open(path, "rb") as f:
                requests = [json.loads(r) for r in split_requests(f.read())]
            with open(out, encoding="utf-8") as f:
                answers = [json.loads(a) for a in split_responses(f.read())]
            assert len(requests) == len(answers), path
            pairs += [(path, q, a) for q, a in zip(requests, answers)]
    return pairs


RECORDED = _recorded()
TACTIC = [(p, q, a) for p, q, a in RECORDED if "tactic" in q]


def _decode(answer: dict) -> repl.Response:
    return repl.decode(json.dumps(answer).encode())


def _before_v4_19(answer: dict) -> dict:
    return {k: v for k, v in answer.items() if k != "proofStatus"}


def test_the_fixtures_hold_hundreds_of_tactic_answers_of_every_kind():
    statuses = {
        (a.get("proofStatus") or "").split(":")[0] for _p, _q, a in TACTIC if "message" not in a
    }
    assert len(TACTIC) >= 200
    assert {"Completed", "Incomplete", "Error"} <= statuses


def test_every_recorded_tactic_answer_reads_right_with_and_without_proof_status():
    closed_without_status = 0
    for path, request, answer in TACTIC:
        now, old = (
            read_tactic(_decode(answer), request["tactic"]),
            read_tactic(_decode(_before_v4_19(answer)), request["tactic"]),
        )
        status = answer.get("proofStatus")
        where = f"{path}: {request['tactic']!r} -> {answer}"
        if "message" in answer or any(m["severity"] == "error" for m in answer.get("messages", [])):
            # Lean rejected the tactic (or recovered from an error): no state to go on from.
            assert now.kind is old.kind is Reading.ERROR, where
            continue
        sorries = [s for s in answer.get("sorries", []) if "proofState" in s]
        assert [o.proof_state for o in now.opened] == [s["proofState"] for s in sorries], where
        assert [o.goal for o in old.opened] == [s["goal"] for s in sorries], where
        if answer["goals"]:
            assert now.kind is old.kind is Reading.OPEN, where
            continue
        if status == "Completed":
            assert now.kind is Reading.CLOSED, where
        elif status.startswith("Error: kernel type check failed"):
            assert now.kind is Reading.REFUTED and status in now.error, where
        # Before v4.19.0 no goals is the only signal: the whole-proof check
        # decides, unless the tactic opened sorries of its own (states to go on with).
        assert old.kind is (Reading.OPEN if sorries else Reading.CLOSED), where
        assert old.repl_status == ""
        closed_without_status += old.kind is Reading.CLOSED
    assert closed_without_status >= 30


def test_kernel_refusals_are_refuted_with_the_reason():
    kernel = [
        (q, a)
        for _p, q, a in TACTIC
        if (a.get("proofStatus") or "").startswith("Error: kernel type check")
    ]
    assert len(kernel) >= 10
    for request, answer in kernel:
        reading = read_tactic(_decode(answer), request["tactic"])
        assert reading.kind is Reading.REFUTED and answer["proofStatus"] in reading.error


def test_sorries_a_tactic_opens_carry_goal_and_position_in_the_tactic():
    [(request, answer)] = [
        (q, a)
        for p, q, a in TACTIC
        if p.endswith("repl/test/Mathlib/test/induction.in") and "sorry" in q["tactic"]
    ]
    reading = read_tactic(_decode(answer), request["tactic"])
    assert reading.kind is Reading.OPEN and reading.goals == []
    assert [o.goal.split("\n")[0] for o in reading.opened] == ["case zero", "case succ"]
    lines = request["tactic"].split("\n")
    for sorry in reading.opened:
        (line, column), (end_line, end_column) = sorry.start, sorry.end
        assert lines[line - 1][column:end_column] == "sorry" and end_line == line
    nested = nest_tactics((request["tactic"], SorryStep(1, 2), "simp", "rfl"))
    assert nested == ("induction x with\n| zero => sorry\n| succ x => simp\n            rfl",)


def test_sorry_spans_skip_comments_and_names():
    assert sorry_spans("exact sorry_lemma -- sorry\n  <;> sorry") == [((2, 6), (2, 11))]


def test_root_goal_entries_are_not_sorries():
    [answer] = [a for p, q, a in RECORDED if p.endswith("repl/test/root_goals.in") and "cmd" in q]
    assert len(answer["sorries"]) == 2 and proof_sorries(_decode(answer)) == []
    [answer] = [
        a
        for p, q, a in RECORDED
        if p.endswith("repl/test/have_by_sorry.in") and "cmd" in q and "have" in q["cmd"]
    ]
    assert len(proof_sorries(_decode(answer))) == 1


# -- through the server, on a stand-in claiming each version ---------------------------


def _standin(version: str) -> list[str]:
    return [sys.executable, "-m", "leanrpc.standin", "--lean-version", version]


async def test_finished_proof_without_proof_status_is_checked_whole_and_search_finds_it():
    async with running_server(1, repl__command=_standin("4.18.0")) as (app, client):
        proof = await client.start_proof("theorem t (n : Nat) : n + 0 = n := by\n  sorry\n")
        done = await client.run_tactic(proof.states[0].state_id, "simp")
        assert done.repl_status == "" and done.goals == []
        assert done.status == "COMPLETED" and done.verification_status == "VALID", done.error
        bad = await client.run_tactic(proof.states[0].state_id, "leanrpc_unsound")
        assert bad.status == "REFUTED" and bad.verification_status == "INVALID"
        found = await best_first_search(
            client, "theorem t (n : Nat) : n + 0 = n", lambda goals: ["skip", "simp"]
        )
        assert found.proof_text is not None and found.tactics == ["simp"]


async def test_kernel_type_check_failure_is_refuted_with_the_reason():
    async with running_server(1, repl__command=_standin("4.19.0")) as (app, client):
        proof = await client.start_proof("theorem t (n : Nat) : n + 0 = n := by\n  sorry\n")
        result = await client.run_tactic(proof.states[0].state_id, "leanrpc_kernel_reject")
        assert result.status == "REFUTED" and result.state_id == ""
        assert "kernel type check failed" in result.error and result.repl_status.startswith(
            "Error: kernel"
        )


async def _sorries_opened_by_induction(version: str) -> None:
    async with running_server(1, repl__command=_standin(version)) as (app, client):
        proof = await client.start_proof("theorem t (n : Nat) : n + 0 = n := by\n  sorry\n")
        tactic = "induction n with\n| zero => sorry\n| succ k ih => sorry"
        split = await client.run_tactic(proof.states[0].state_id, tactic)
        assert split.status == "INCOMPLETE" and split.goals == []
        zero, succ = split.opened
        assert zero.goals[0].startswith("case zero") and succ.goals[0].startswith("case succ")
        assert zero.start == (2, 10) and succ.start == (3, 15) and succ.end == (3, 20)
        closed = await client.run_tactic(zero.state_id, "simp")
        # The other branch is still a sorry: the text checks up to it, never COMPLETED.
        assert closed.status == "INCOMPLETE" and closed.verification_status == "SORRY", closed.error
        assert "1 sorry a tactic on its path opened" in closed.error
        assert (
            "| zero => simp\n" in closed.proof_text and "| succ k ih => sorry" in closed.proof_text
        )
        # A lost worker costs a replay, and the replay goes back into the same sorry.
        [worker] = app.pool.workers
        app.prover.registry.forget_worker(worker.name)
        again = await client.run_tactic(succ.state_id, "simp")
        assert (
            again.status == "INCOMPLETE" and again.rebuilt and again.verification_status == "SORRY"
        )
        assert "| zero => sorry\n" in again.proof_text and "| succ k ih => simp" in again.proof_text
        # The main line through a tactic's sorry is not a proof either (a search proposing
        # `have … := by sorry` finds nothing), even with the user's other sorries around.
        have = await client.run_tactic(proof.states[0].state_id, "have h : n + 0 = n := by sorry")
        assert len(have.opened) == 1 and have.goals
        done = await client.run_tactic(have.state_id, "exact h")
        assert done.status == "INCOMPLETE" and done.goals == []
        if version == "4.18.0":  # no proofStatus: the whole-proof check finds the sorry
            assert done.repl_status == "" and done.verification_status == "SORRY"
        else:  # the REPL says so itself
            assert (
                done.repl_status == "Incomplete: contains sorry" and done.verification_status == ""
            )


async def test_a_sorry_in_a_tactic_is_never_completed_with_two_roots():
    # 4.18.0: no proofStatus, so the whole-proof check (not the REPL) meets the tactic's sorry.
    async with running_server(1, repl__command=_standin("4.18.0")) as (app, client):
        proof = await client.start_proof(
            "theorem a (n : Nat) : n + 0 = n := by\n  sorry\n\n"
            "theorem b (n : Nat) : 0 + n = n := by\n  sorry\n"
        )
        first = proof.states[0]
        have = await client.run_tactic(first.state_id, "have h : n + 0 = n := by sorry")
        done = await client.run_tactic(have.state_id, "exact h")
        assert done.status == "INCOMPLETE" and done.verification_status == "SORRY", (
            done.status,
            done.error,
        )
        plain = await client.run_tactic(first.state_id, "simp")
        assert (
            plain.status == "COMPLETED" and plain.verification_status == "SORRY"
        )  # b is the user's own sorry


async def test_sorries_opened_by_a_tactic_become_states_v4_19():
    await _sorries_opened_by_induction("4.19.0")


async def test_sorries_opened_by_a_tactic_become_states_before_v4_19():
    await _sorries_opened_by_induction("4.18.0")


def test_a_decoded_answer_keeps_sorry_proof_states():
    response = msgspec.convert(
        {"sorries": [{"proofState": 3, "goal": "⊢ 0 = 0"}], "proofState": 5, "goals": []},
        repl.Response,
    )
    assert read_tactic(response, "cases n <;> sorry").opened[0].proof_state == 3
