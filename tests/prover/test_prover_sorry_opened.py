"""Goals a tactic's own `sorry` opened can be finished on every REPL (issue 41).

After `have h : x > 0 := by sorry` opens a state, the REPL's `proofStatus`
judges the wrong root there: upstream v4.33.0-rc2 answers a finished goal
`Incomplete: contains metavariable(s)` with no goals (read as INCOMPLETE, so
best-first search dropped it), and the LeanInteract fork at v4.8.0-rc1 answers
`Error: Goal not assigned` (read as REFUTED). No goals, no error and no sorry
of its own on such a state goes to the whole-proof check.

Inputs: every transcript in shared/fixtures (upstream v4.33.0-rc2 and the fork
at v4.9, v4.19, v4.32), and the fork's own v4.8.0-rc1 answers to the same
test, quoted below as recorded.
"""

from __future__ import annotations

import json
import os

from leanrpc import repl
from leanrpc.core.headers import split_header
from leanrpc.services.prover.answers import Reading, read_tactic
from leanrpc.services.prover.calls import TacticRun
from leanrpc.services.prover.outcomes import ProofStatus, read_run
from leanrpc.services.prover.registry import Proof, SorryStep, StateRegistry
from leanrpc.standin.fixtures import fixture_sets, split_requests, split_responses, transcripts
from testkit import shared_path

# augustepoiroux/repl, tag v1.3.18_lean-toolchain-v4.8.0-rc1 (commit
# 1debf37bf2c40eed78417b8d36f39df34a593a0e, Lean v4.8.0-rc1, Apache-2.0),
# test/name_generator.in and .expected.out: the tactics run on proof state 1,
# which `have h : x > 0 := by sorry` opened, and the REPL's answers (traces left out).
FORK_V4_8_0_RC1 = [
    ("exact h0", {"proofStatus": "Error: Goal not assigned", "proofState": 3, "goals": []}),
    ("assumption", {"proofStatus": "Error: Goal not assigned", "proofState": 4, "goals": []}),
    (
        "simp only [of_eq_true (eq_true h0)]",
        {"proofStatus": "Error: Goal not assigned", "proofState": 5, "goals": []},
    ),
    ("{ simp [h0] }", {"proofStatus": "Error: Goal not assigned", "proofState": 6, "goals": []}),
    (
        "{ simp (config := {memoize := false}) [h0] }",
        {"proofStatus": "Error: Goal not assigned", "proofState": 7, "goals": []},
    ),
    (
        "{ rw (config := {}) [(show x = x from rfl)] }",
        {
            "proofStatus": "Error: Goal not assigned",
            "proofState": 8,
            "messages": [
                {
                    "severity": "error",
                    "pos": {"line": 0, "column": 0},
                    "endPos": {"line": 0, "column": 0},
                    "data": "unsolved goals\nx : Int\nh0 : x > 0\n⊢ x > 0",
                }
            ],
            "goals": [],
        },
    ),
]


def _decode(answer: dict) -> repl.Response:
    return repl.decode(json.dumps(answer).encode())


def _on_opened_states() -> list[tuple[str, str, dict]]:
    """(transcript, tactic, answer) for every recorded tactic run on a state
    that a tactic's own sorry opened, or on one below it."""
    found = []
    for _name, _version, _fork, root in fixture_sets(str(shared_path("fixtures"))):
        for path, _cwd in transcripts(root):
            out = path[:-3] + ".expected.out"
            if not os.path.exists(out):
                continue
            with open(path, "rb") as f:
                requests = [json.loads(r) for r in split_requests(f.read())]
            with open(out, encoding="utf-8") as f:
                answers = [json.loads(a) for a in split_responses(f.read())]
            opened: set[int] = set()
            for request, answer in zip(requests, answers):
                if "tactic" not in request or "proofState" not in answer:
                    continue
                if request["proofState"] in opened:
                    found.append((path, request["tactic"], answer))
                    opened.add(answer["proofState"])
                opened.update(s["proofState"] for s in answer.get("sorries", []))
    return found


ON_OPENED = _on_opened_states()


def _finished(answer: dict) -> bool:
    errors = [m for m in answer.get("messages", []) if m["severity"] == "error"]
    return not answer["goals"] and not errors and not answer.get("sorries")


def test_recorded_answers_on_sorry_opened_states_go_to_the_whole_proof_check():
    finished = [(p, t, a) for p, t, a in ON_OPENED if _finished(a)]
    statuses = {a.get("proofStatus") for _p, _t, a in finished}
    assert "Incomplete: contains metavariable(s)" in statuses  # upstream v4.33.0-rc2
    upstream = [p for p, _t, _a in finished if "/repl/test/" in p]
    assert len(upstream) >= 5, upstream
    for path, tactic, answer in finished:
        reading = read_tactic(_decode(answer), tactic, sorry_opened=True)
        assert reading.kind is Reading.CLOSED, (path, tactic, answer)
        # Read as before on a state a command's sorry opened: the status stands.
        if answer.get("proofStatus") == "Incomplete: contains metavariable(s)":
            assert read_tactic(_decode(answer), tactic).kind is Reading.OPEN
    for path, tactic, answer in ON_OPENED:
        if not _finished(answer):
            reading = read_tactic(_decode(answer), tactic, sorry_opened=True)
            assert reading.kind is not Reading.CLOSED, (path, tactic, answer)


def test_the_forks_goal_not_assigned_is_not_refuted_there():
    distinct = {(t, json.dumps(a, sort_keys=True)) for t, a in FORK_V4_8_0_RC1}
    upstream = {(t, json.dumps(a, sort_keys=True)) for p, t, a in ON_OPENED if _finished(a)}
    assert len(distinct | upstream) >= 13
    for tactic, answer in FORK_V4_8_0_RC1:
        reading = read_tactic(_decode(answer), tactic, sorry_opened=True)
        if answer.get("messages"):
            assert reading.kind is Reading.ERROR  # "unsolved goals": Lean said no
        else:
            assert reading.kind is Reading.CLOSED, (tactic, answer)
            # On a root state the fork's Error: status is still the REPL's refusal.
            assert read_tactic(_decode(answer), tactic).kind is Reading.REFUTED


COMMAND = "example {x : Int} (h0 : x > 0) : False := by sorry"


def _opened_state():
    registry = StateRegistry(max_states_per_client=10, default_ttl_s=60, max_ttl_s=60)
    proof = Proof("p1", split_header(COMMAND), COMMAND, "c", False, 1)
    root = registry.add(proof, (0,), ["x : Int\nh0 : x > 0\n⊢ False"], "", 60)
    have = root.path + ("have h : x > 0 := by sorry",)
    opened = registry.add(
        proof, have + (SorryStep(0, 1),), ["x : Int\nh0 : x > 0\n⊢ x > 0"], "", 60
    )
    return registry, root, opened


def test_the_prover_sends_a_finished_opened_goal_to_the_whole_proof_check():
    registry, root, opened = _opened_state()
    for tactic, answer in FORK_V4_8_0_RC1[:1] + [
        (
            "exact h0",
            {"proofStatus": "Incomplete: contains metavariable(s)", "proofState": 3, "goals": []},
        )
    ]:
        run = TacticRun(_decode(answer), rebuilt=False, worker="w1")
        out, child = read_run(registry, opened, tactic, run, "r1")
        assert child is not None, (tactic, answer)  # the whole-proof check decides
        assert out.status is not ProofStatus.REFUTED and out.status is not ProofStatus.INCOMPLETE
        assert SorryStep(0, 1) in child.path
        # The same answer on the root state keeps its old reading.
        out, child = read_run(registry, root, tactic, run, "r2")
        assert child is None
