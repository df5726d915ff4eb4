"""The REPL's command options on Verify (issue 41): `allTactics`, `rootGoals`
and the fork's `declarations`, through a real server and the Python client.

What the stand-in answers is what the REPL's own transcripts show
(shared/fixtures/repl/test/all_tactics, root_goals; the fork's
extract_declaration); the classify test reads the recorded `root_goals`
answer itself.
"""

from __future__ import annotations

import json
import sys

import pytest

from leanrpc import repl
from leanrpc.repl.outcome import classify
from leanrpc.results import Status
from leanrpc.standin.fixtures import split_responses
from testkit import shared_path
from verify_support import running_server

# Two finished tactic blocks: rootGoals answers two zero-width entries.
DONE = (
    "import Mathlib\n\ntheorem a : 1 = 1 := by\n  skip\n  rfl\n\ntheorem b : 2 = 2 := by\n  rfl\n"
)
# One finished block and one sorry.
HOLE = "import Mathlib\n\ntheorem a : 1 = 1 := by\n  rfl\n\ntheorem b (n : Nat) : n = n := by\n  sorry\n"


def _fork_command() -> list[str]:
    return [sys.executable, "-m", "leanrpc.standin", "--no-replay", "--fork"]


async def test_all_tactics_lists_each_tactic_with_its_goals_at_user_positions():
    async with running_server() as (_app, client):
        [plain] = await client.verify_batch([DONE])
        [asked] = await client.verify_batch([DONE], all_tactics=True)
        streamed = await client.verify([("s", DONE)], all_tactics=True)
    assert plain.status == "VALID" and plain.tactics == [] and plain.root_goals == []
    assert asked.status == "VALID"
    got = [(t.text, t.line, t.column, t.end_line, t.end_column, t.goals) for t in asked.tactics]
    assert got == [
        ("skip", 4, 2, 4, 6, "⊢ 1 = 1"),
        ("rfl", 5, 2, 5, 5, "⊢ 1 = 1"),
        ("rfl", 8, 2, 8, 5, "⊢ 2 = 2"),
    ]
    # VerifyStream carries the options too.
    assert [t.text for t in streamed[0].tactics] == ["skip", "rfl", "rfl"]


async def test_root_goals_are_not_sorries():
    async with running_server() as (_app, client):
        done, hole = await client.verify_batch([DONE, HOLE], root_goals=True)
    # Two zero-width entries on a finished proof: VALID, no sorry (issue 41).
    assert done.status == "VALID" and done.sorries == []
    assert done.root_goals == [
        {"line": 3, "column": 21, "goal": "⊢ 1 = 1"},
        {"line": 7, "column": 21, "goal": "⊢ 2 = 2"},
    ]
    # A real sorry stays a sorry; its block's start is a root goal beside it.
    assert hole.status == "SORRY"
    assert hole.sorries == [{"line": 7, "column": 2, "goal": "n : Nat\n⊢ n = n"}]
    assert [(g["line"], g["column"]) for g in hole.root_goals] == [(3, 21), (6, 31)]


def test_classify_reads_the_recorded_root_goals_answer():
    """The REPL's own `root_goals` transcript: a command with rootGoals gets
    two zero-width entries in `sorries`, which must not make it SORRY."""
    recorded = shared_path("fixtures", "repl", "test", "root_goals.expected.out").read_text()
    first = split_responses(recorded)[0]
    response = repl.decode(first.encode())
    assert len(response.sorries) == 2  # what the REPL lists

    class Outcome:
        response = None
        after_response = None
        queue_s = header_s = body_s = boot_s = 0.0
        warm_header = False
        reused_prefix_chars = 0
        worker = ""
        attempts = 1

    Outcome.response = response
    result = classify("r", Outcome, check_axioms=False)
    assert result.status is Status.VALID and result.sorries == []
    assert [(g.start.line, g.start.column, g.goal) for g in result.root_goals] == [
        (1, 17, "⊢ 1 = 1"),
        (5, 22, "⊢ 1 + 1 = 2"),
    ]


def test_classify_reads_the_recorded_all_tactics_answer():
    recorded = shared_path("fixtures", "repl", "test", "all_tactics.expected.out").read_text()
    response = repl.decode(split_responses(recorded)[0].encode())

    class Outcome:
        after_response = None
        queue_s = header_s = body_s = boot_s = 0.0
        warm_header = False
        reused_prefix_chars = 0
        worker = ""
        attempts = 1

    Outcome.response = response
    result = classify("r", Outcome, check_axioms=False)
    assert result.status is Status.VALID
    assert [(t.text, t.start.column, t.end.column, t.goals) for t in result.tactics] == [
        ("have t := 37", 18, 30, "⊢ Nat"),
        ("exact t", 32, 39, "t : Nat\n⊢ Nat"),
    ]
    assert result.tactics[0].used_constants == ["instOfNatNat", "Nat", "OfNat.ofNat"]


async def test_declarations_on_the_fork_and_an_honest_empty_field_upstream():
    async with running_server(repl__command=_fork_command()) as (_app, client):
        [fork] = await client.verify_batch([DONE], declarations=True)
        [without] = await client.verify_batch([DONE])
    assert fork.status == "VALID" and without.declarations_json == ""
    names = [(d["name"], d["kind"]) for d in json.loads(fork.declarations_json)]
    assert names == [("a", "theorem"), ("b", "theorem")]
    async with running_server() as (_app, client):
        [upstream] = await client.verify_batch([DONE], declarations=True)
    # Upstream ignores the key: nothing is made up.
    assert upstream.status == "VALID" and upstream.declarations_json == ""


async def test_the_options_are_part_of_the_cache_key():
    async with running_server(cache__enabled=True) as (_app, client):
        [first] = await client.verify_batch([DONE], all_tactics=True)
        [plain] = await client.verify_batch([DONE])
        [again] = await client.verify_batch([DONE], all_tactics=True)
        [plain_again] = await client.verify_batch([DONE])
        [roots] = await client.verify_batch([DONE], root_goals=True)
    assert first.cache_source == "" and len(first.tactics) == 3
    # A result with tactics is not served to a request without them...
    assert plain.cache_source == "" and plain.tactics == []
    # ...and the stored result with tactics keeps them.
    assert again.cache_source == "memory" and again.tactics == first.tactics
    assert plain_again.cache_source == "memory" and plain_again.tactics == []
    assert roots.cache_source == "" and len(roots.root_goals) == 2 and roots.tactics == []


async def test_start_proof_at_a_verify_results_sorry():
    async with running_server() as (_app, client):
        [result] = await client.verify_batch([HOLE])
        assert result.status == "SORRY"
        start, state = await client.start_proof_at_sorry(HOLE, result.sorries[0])
        assert state.start == (7, 2) and state.goals == ["n : Nat\n⊢ n = n"]
        assert state in start.states
        step = await client.run_tactic(state.state_id, "rfl")
        assert step.status == "COMPLETED", step
        assert "theorem b (n : Nat) : n = n" in step.proof_text
        with pytest.raises(ValueError, match="line 3, column 2"):
            await client.start_proof_at_sorry(HOLE, (3, 2))


def test_a_result_over_the_size_limit_drops_the_options_answers_first():
    from leanrpc.edge import convert
    from leanrpc.v1 import verifier_pb2 as pb

    out = pb.Result(id="x", status=pb.STATUS_VALID, declarations_json="[" + "d" * 8000 + "]")
    for i in range(200):
        out.tactics.append(pb.Tactic(text=f"simp {i}", goals="⊢ " + "g" * 100))
        out.root_goals.append(pb.Sorry(goal="⊢ " + "r" * 50))
    fitted = convert.fit_result(out, 4_000)
    assert fitted.ByteSize() <= 4_000 and fitted.status == pb.STATUS_VALID
    assert not fitted.tactics and not fitted.root_goals and fitted.declarations_json == ""
    assert fitted.error.endswith(
        "dropped the tactics, dropped the root goals, dropped the declarations"
    )


async def test_the_cli_asks_for_the_options_and_writes_them_in_json_lines(tmp_path):
    import asyncio

    proof = tmp_path / "done.lean"
    proof.write_text(DONE)
    async with running_server() as (app, _client):
        lines = []
        for flags in (["--all-tactics", "--root-goals"], []):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "leanrpc.cli",
                "verify",
                str(proof),
                "--server",
                f"127.0.0.1:{app.port}",
                "--json",
                "--quiet",
                *flags,
                stdout=asyncio.subprocess.PIPE,
            )
            out, _ = await asyncio.wait_for(process.communicate(), 120)
            assert process.returncode == 0
            [line] = out.decode().splitlines()
            lines.append(json.loads(line))
    asked, plain = lines
    assert asked["status"] == "VALID" and asked["sorries"] == []
    assert [(t["text"], t["line"]) for t in asked["tactics"]] == [
        ("skip", 4),
        ("rfl", 5),
        ("rfl", 8),
    ]
    assert [(g["line"], g["column"]) for g in asked["root_goals"]] == [(3, 21), (7, 21)]
    # One schema: the keys are there, empty, when not asked.
    assert plain["tactics"] == [] and plain["root_goals"] == [] and plain["declarations_json"] == ""


async def test_each_tactics_goals_are_the_goals_before_it():
    code = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q := by\n  constructor\n  exact hp\n  exact hq\n"
    async with running_server() as (_app, client):
        [result] = await client.verify_batch([code], all_tactics=True)
    assert result.status == "VALID"
    hyps = "p q : Prop\nhp : p\nhq : q\n"
    assert [t.goals for t in result.tactics] == [
        f"{hyps}⊢ p ∧ q",
        f"case left\n{hyps}⊢ p\n\ncase right\n{hyps}⊢ q",
        f"case right\n{hyps}⊢ q",
    ]
