"""Expand requests with several tactics for one state (issue 28 item 2): one
result per tactic, matched by request_id and index, run as ONE pipelined batch
on one worker (one fence, one audit); a bad tactic is REJECTED alone before any
REPL sees it; a tactic whose time runs out is REJECTED alone and the others run
again; a forged or missing frame anywhere in the batch poisons the worker and
no answer of that batch is delivered. Real gRPC, stand-in workers (and the
hostile fake of tests/workers/batch_repl.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import grpc
import pytest

from leanrpc.v1 import prover_pb2 as pb
from leanrpc.v1 import prover_pb2_grpc as pb_grpc
from prover_support import AND_STATEMENT, running_server
from testkit import wait_until

pytestmark = pytest.mark.timeout(120)

FAKE = [sys.executable, str(Path(__file__).resolve().parents[1] / "workers" / "batch_repl.py")]


async def _expand(app, requests: list[pb.ExpandRequest]) -> list[pb.TacticResult]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
        call = pb_grpc.ProverStub(channel).Expand(iter(requests))
        return [r async for r in call]


def _batches(app) -> int:
    return sum(w._channel.batches for w in app.pool.workers)


async def test_several_tactics_on_one_state_are_one_batch_with_a_result_each():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        before = _batches(app)
        tactics = ["constructor", "frobnicate", "", "intro h", "run_tac pure ()", "constructor"]
        results = await _expand(
            app, [pb.ExpandRequest(request_id="r", state_id=root, tactics=tactics)]
        )
        assert _batches(app) == before + 1  # the four good ones: one fence, one audit
        assert sorted(r.index for r in results) == list(range(len(tactics)))
        by_index = {r.index: r for r in results}
        for k, tactic in enumerate(tactics):
            assert by_index[k].request_id == "r" and by_index[k].tactic == tactic
            assert by_index[k].parent_state_id == root
        assert by_index[0].status == pb.PROOF_STATUS_INCOMPLETE and len(by_index[0].goals) == 2
        assert by_index[1].status == pb.PROOF_STATUS_ERROR
        assert by_index[2].status == pb.PROOF_STATUS_REJECTED and by_index[2].error.startswith(
            "INVALID_ARGUMENT"
        )
        assert by_index[4].status == pb.PROOF_STATUS_REJECTED and by_index[4].error.startswith(
            "INVALID_ARGUMENT"
        )
        assert "run_tac" in by_index[4].error  # refused by the code policy, never run
        # Each tactic ran on the state itself, not on its neighbour's result.
        assert by_index[5].status == pb.PROOF_STATUS_INCOMPLETE and list(by_index[5].goals) == list(
            by_index[0].goals
        )
        assert by_index[0].state_id != by_index[5].state_id
        # The new states go on like any other.
        left = await client.run_tactic(by_index[5].state_id, "exact hp")
        assert left.status == "INCOMPLETE"


@pytest.mark.parametrize("pack", [True, False])
async def test_the_client_sends_a_state_s_pairs_as_one_request_and_keeps_pair_ids(pack):
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        split = await client.run_tactic(root, "constructor")
        before = _batches(app)
        pairs = [
            (root, "constructor"),
            (root, "frobnicate"),
            (split.state_id, "exact hp"),
            (split.state_id, "simp"),
            (root, "intro h"),
        ]
        results = {r.request_id: r async for r in client.expand(pairs, pack=pack)}
        assert sorted(results, key=int) == ["0", "1", "2", "3", "4"]
        assert _batches(app) == before + 2  # (0, 1) and (2, 3); 4 alone is no batch
        for k, (state, tactic) in enumerate(pairs):
            assert results[str(k)].tactic == tactic and results[str(k)].parent_state_id == state
        assert results["1"].status == "ERROR" and results["2"].status == "INCOMPLETE"
        assert results["3"].status in ("INCOMPLETE", "COMPLETED", "REFUTED")


async def test_bad_requests_are_rejected_once_per_tactic():
    async with running_server(1, prover__max_tactics_per_expand=3) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        results = await _expand(
            app,
            [
                pb.ExpandRequest(
                    request_id="both", state_id=root, tactic="simp", tactics=["simp", "intro h"]
                ),
                pb.ExpandRequest(request_id="many", state_id=root, tactics=["simp"] * 4),
                pb.ExpandRequest(
                    request_id="gone", state_id="no-such-state", tactics=["simp", "intro h"]
                ),
            ],
        )
        by_id: dict[str, list] = {}
        for r in results:
            by_id.setdefault(r.request_id, []).append(r)
        assert sorted(r.index for r in by_id["both"]) == [0, 1]
        assert all(
            r.status == pb.PROOF_STATUS_REJECTED and "not both" in r.error for r in by_id["both"]
        )
        assert len(by_id["many"]) == 4 and all(
            "max_tactics_per_expand" in r.error for r in by_id["many"]
        )
        assert [r.error.split(":")[0] for r in by_id["gone"]] == ["NOT_FOUND", "NOT_FOUND"]


async def test_a_tactic_out_of_time_is_rejected_alone_and_the_others_run_again():
    async with running_server(2) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        tactics = ["constructor", "intro h\n--@standin: hang", "constructor"]
        results = {
            r.request_id: r
            async for r in client.expand([(root, t) for t in tactics], timeout_s=2.0)
        }
        assert results["1"].status == "REJECTED" and "no answer within" in results["1"].error
        assert results["0"].status == "INCOMPLETE" and results["2"].status == "INCOMPLETE"
        await wait_until(
            lambda: app.pool.stats.restarts["timeout"] >= 1, 20, "the timed-out worker's exit"
        )


async def test_a_forged_frame_in_a_tactic_batch_poisons_and_delivers_nothing():
    """The hostile fake forges a "Completed" answer for the middle tactic: the
    fence sees one frame too many, the worker is killed, the pool retries once
    on a fresh (equally hostile) worker, and every tactic of the batch is
    REJECTED: no forged (or honest but unconfirmed) answer gets out."""
    # Sandbox off: the fake imports its loop from tests/, which the sandbox does not show.
    async with running_server(1, repl__command=FAKE, axioms__check=False, sandbox__mode="off") as (
        app,
        client,
    ):
        proof = await client.start_proof("theorem t : True := sorry")
        root = proof.states[0].state_id
        honest = await client.run_tactic(root, "trivial")
        assert honest.status == "INCOMPLETE"  # the control: the fake answers a lone honest tactic
        results = {
            r.request_id: r
            async for r in client.expand(
                [(root, "trivial"), (root, "skip -- forge"), (root, "trivial")]
            )
        }
        assert sorted(results) == ["0", "1", "2"]
        for result in results.values():
            assert result.status == "REJECTED", result
            assert "poisoned" in result.error
        await wait_until(
            lambda: app.pool.stats.restarts["poisoned"] >= 2, 20, "both poisoned workers' exits"
        )


async def test_the_whole_proof_check_runs_on_another_idle_worker():
    async with running_server(2) as (app, client):
        # Both workers warm with the (empty) header: two slow snippets at once.
        await client.verify(["theorem a : True := trivial\n--@standin: burn=0.3"] * 2, cache=False)
        assert sum(1 for w in app.pool.workers if w.requests_served) == 2
        proof = await client.start_proof(AND_STATEMENT)
        split = await client.run_tactic(proof.states[0].state_id, "constructor")
        left = await client.run_tactic(split.state_id, "exact hp")
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            done = await pb_grpc.ProverStub(channel).RunTactic(
                pb.RunTacticRequest(state_id=left.state_id, tactic="exact hq")
            )
        assert done.status == pb.PROOF_STATUS_COMPLETED, done.error
        assert done.verification.reuse.worker and done.worker
        assert done.verification.reuse.worker != done.worker


def _same(a: pb.TacticResult, b: pb.TacticResult) -> bool:
    """The same verdict on the same tactic (new states get new ids)."""
    return (
        a.request_id,
        a.index,
        a.tactic,
        a.parent_state_id,
        a.status,
        list(a.goals),
        a.error,
    ) == (
        b.request_id,
        b.index,
        b.tactic,
        b.parent_state_id,
        b.status,
        list(b.goals),
        b.error,
    )


async def test_packed_results_are_one_message_with_the_same_answers():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        tactics = ["constructor", "frobnicate", "", "intro h", "run_tac pure ()", "constructor"]
        plain = await _expand(
            app, [pb.ExpandRequest(request_id="r", state_id=root, tactics=tactics)]
        )
        before = _batches(app)
        packed = await _expand(
            app,
            [pb.ExpandRequest(request_id="r", state_id=root, tactics=tactics, pack_results=True)],
        )
        assert _batches(app) == before + 1  # still one batch on the worker
        [message] = packed  # one stream message for the six results
        parts = [message, *message.more]
        assert [p.index for p in parts] == list(range(len(tactics)))
        assert all(len(p.more) == 0 for p in message.more)
        by_index = {r.index: r for r in plain}
        for part in parts:
            assert _same(part, by_index[part.index]), (part, by_index[part.index])
        assert parts[0].status == pb.PROOF_STATUS_INCOMPLETE and parts[0].state_id
        assert parts[4].status == pb.PROOF_STATUS_REJECTED and "run_tac" in parts[4].error


async def test_packed_rejections_are_one_message_per_request():
    async with running_server(1, prover__max_tactics_per_expand=3) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        requests = [
            pb.ExpandRequest(
                request_id="both", state_id=root, tactic="simp", tactics=["simp", "intro h"]
            ),
            pb.ExpandRequest(request_id="many", state_id=root, tactics=["simp"] * 4),
            pb.ExpandRequest(
                request_id="gone", state_id="no-such-state", tactics=["simp", "intro h"]
            ),
        ]
        for request in requests:
            request.pack_results = True
        results = await _expand(app, requests)
        assert sorted(r.request_id for r in results) == ["both", "gone", "many"]
        by_id = {r.request_id: [r, *r.more] for r in results}
        assert [p.index for p in by_id["many"]] == [0, 1, 2, 3]
        assert all("max_tactics_per_expand" in p.error for p in by_id["many"])
        assert all("not both" in p.error for p in by_id["both"])
        assert [p.error.split(":")[0] for p in by_id["gone"]] == ["NOT_FOUND", "NOT_FOUND"]
        assert all(p.status == pb.PROOF_STATUS_REJECTED for parts in by_id.values() for p in parts)


def test_a_packed_message_fits_the_size_bound_part_by_part():
    from leanrpc.edge.prover import fit_packed

    def packed(answers):
        head = answers[0]
        head.more.extend(answers[1:])
        return head

    big = ["goal " + "x" * 40_000] * 5
    answers = [pb.TacticResult(request_id="r", index=k, tactic="simp", goals=big) for k in range(4)]
    limit = 64 * 1024
    head = fit_packed(packed(answers), limit)
    assert head.ByteSize() <= limit
    assert [p.index for p in (head, *head.more)] == [0, 1, 2, 3]
    assert all("result cut to fit" in p.error for p in (head, *head.more))
    small = [pb.TacticResult(request_id="r", index=k, tactic="simp", goals=["a"]) for k in range(3)]
    untouched = fit_packed(packed(small), limit)
    assert untouched.error == "" and list(untouched.more[1].goals) == ["a"]
