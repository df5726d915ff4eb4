"""Prover over gRPC on stand-in workers: proofs found by tactics, the whole-proof
check, bad input, state survival across kill -9, many expansions at once."""

from __future__ import annotations

import os
import signal

import grpc
import pytest

from leanrpc.client import ClientError, best_first_search
from prover_support import AND_STATEMENT, running_server
from testkit import wait_until


async def test_proof_found_by_tactics_is_verified_as_a_whole():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        assert proof.verifier == "stand-in"
        [root] = proof.states
        assert root.goals == ["p q : Prop\nhp : p\nhq : q\n⊢ p ∧ q"]
        assert root.start is not None  # the sorry the server appended, in the user's text
        split = await client.run_tactic(root.state_id, "constructor")
        assert split.status == "INCOMPLETE" and len(split.goals) == 2
        left = await client.run_tactic(split.state_id, "exact hp")
        assert left.status == "INCOMPLETE" and left.goals[0].endswith("⊢ q")
        done = await client.run_tactic(left.state_id, "exact hq")
        assert done.status == "COMPLETED", done.error
        assert done.goals == [] and done.repl_status == "Completed"
        assert done.verification_status == "VALID"
        assert done.proof_text.startswith(AND_STATEMENT + " := by constructor\n")
        assert "exact hp\n" in done.proof_text and "exact hq" in done.proof_text
        # states are immutable: the root still expands, to the same goals
        again = await client.run_tactic(root.state_id, "constructor")
        assert again.goals == split.goals and again.state_id != split.state_id


async def test_tactic_mode_completed_that_the_whole_proof_rejects_is_refuted():
    async with running_server(1) as (app, client):
        proof = await client.start_proof("theorem t (n : Nat) : n + 0 = n := by\n  sorry\n")
        result = await client.run_tactic(proof.states[0].state_id, "leanrpc_unsound")
        assert result.repl_status == "Completed"  # tactic mode said so
        assert result.status == "REFUTED"  # the whole proof did not check
        assert result.verification_status == "INVALID"
        assert "leanrpc_unsound" in result.proof_text and "sorry" not in result.proof_text
        assert not result.completed


async def test_tactic_errors_are_results_with_lean_messages():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        bad = await client.run_tactic(proof.states[0].state_id, "frobnicate_everything")
        assert bad.status == "ERROR" and "unknown tactic" in bad.error and bad.state_id == ""
        unknown = await client.run_tactic(proof.states[0].state_id, "exact Foo.nonexistent_lemma")
        assert unknown.status == "ERROR" and any("nonexistent_lemma" in m for m in unknown.messages)


@pytest.mark.parametrize(
    "call, code, needle",
    [
        ("start", "theorem t : True := trivial", "no `sorry`"),
        ("start", "   ", "empty"),
        ("start", "theorem t : True := by\x00 sorry", "NUL"),
        ("tactic_state", "s-unknown", "unknown proof state"),
        ("tactic_text", "", "tactic is empty"),
        ("tactic_text", "   \n ", "tactic is empty"),
        ("tactic_text", "simp " * 5000, "over the limit"),
    ],
)
async def test_bad_input_gets_its_status(call, code, needle):
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        state = proof.states[0].state_id
        with pytest.raises(ClientError) as info:
            if call == "start":
                await client.start_proof(code)
            elif call == "tactic_state":
                await client.run_tactic(code, "simp")
            else:
                await client.run_tactic(state, code)
        expected = (
            grpc.StatusCode.NOT_FOUND
            if call == "tactic_state"
            else grpc.StatusCode.INVALID_ARGUMENT
        )
        assert info.value.code is expected and needle in info.value.details
        # the server keeps serving
        assert (await client.run_tactic(state, "constructor")).status == "INCOMPLETE"


async def test_released_states_are_not_found_and_expand_rejects_bad_pairs_in_stream():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        child = await client.run_tactic(root, "constructor")
        assert await client.release_states([child.state_id]) == 1
        with pytest.raises(ClientError) as info:
            await client.run_tactic(child.state_id, "exact hp")
        assert info.value.code is grpc.StatusCode.NOT_FOUND
        results = [
            r
            async for r in client.expand(
                [(root, "constructor"), (child.state_id, "simp"), (root, "")]
            )
        ]
        by_id = {r.request_id: r for r in results}
        assert sorted(by_id) == ["0", "1", "2"]
        assert by_id["0"].status == "INCOMPLETE"
        assert by_id["1"].status == "REJECTED" and by_id["1"].error.startswith("NOT_FOUND")
        assert by_id["2"].status == "REJECTED" and by_id["2"].error.startswith("INVALID_ARGUMENT")
        assert await client.release_states(proof_ids=[proof.proof_id]) >= 2
        assert len(app.prover.registry) == 0


async def test_state_survives_kill_9_of_its_worker_mid_search():
    async with running_server(2) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        split = await client.run_tactic(proof.states[0].state_id, "constructor")
        left = await client.run_tactic(split.state_id, "exact hp")
        holder = next(w for w in app.pool.workers if w.name == left.worker)
        os.kill(holder.pid, signal.SIGKILL)
        await wait_until(
            lambda: holder not in app.pool.workers, 10, "the killed worker to be reaped"
        )
        done = await client.run_tactic(left.state_id, "exact hq")
        assert done.status == "COMPLETED" and done.verification_status == "VALID"
        assert done.rebuilt and done.worker != holder.name
        stats = app.prover.registry.stats
        assert (
            stats.states_rebuilt >= 1
            and stats.replayed_tactics == 2
            and stats.replayed_commands == 1
        )


async def test_a_thousand_concurrent_expansions_over_four_workers_are_answered_once():
    async with running_server(4) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        first = await client.run_tactic(root, "constructor")
        tactics = ["constructor", "exact hp", "simp", "intro h", "frobnicate"]
        pairs = [
            (root if k % 2 else first.state_id, tactics[k % len(tactics)]) for k in range(1000)
        ]
        seen: dict[str, int] = {}
        async for result in client.expand(pairs):
            seen[result.request_id] = seen.get(result.request_id, 0) + 1
            assert result.status in ("INCOMPLETE", "ERROR", "COMPLETED", "REFUTED"), result.error
        assert sorted(seen, key=int) == [str(k) for k in range(1000)]
        assert set(seen.values()) == {1}
        used = {w.name for w in app.pool.workers if w.requests_served}
        assert len(used) >= 2  # the frontier of one proof spread over the pool


async def test_quota_and_ttl_free_states():
    async with running_server(1) as (app, client):
        registry = app.prover.registry
        registry.max_states_per_client = 3
        proof = await client.start_proof(AND_STATEMENT, ttl_s=1.0)
        root = proof.states[0].state_id
        await client.run_tactic(root, "constructor")
        await client.run_tactic(root, "constructor")
        with pytest.raises(ClientError) as info:
            await client.run_tactic(root, "constructor")
        assert (
            info.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
            and "release" in info.value.details
        )
        assert len(registry) == 3

        def all_expired():
            registry.sweep(every_s=0.0)
            return len(registry) == 0

        await wait_until(all_expired, 5, "states to pass their TTL")
        assert len(registry) == 0 and registry.proofs == 0 and registry.stats.states_expired == 3
        with pytest.raises(ClientError) as info:
            await client.run_tactic(root, "constructor")
        assert info.value.code is grpc.StatusCode.NOT_FOUND


async def test_best_first_search_helper_finds_and_releases():
    async with running_server(2) as (app, client):

        def propose(goals):
            if "∧" in goals[0]:
                return ["frobnicate", "constructor"]
            return ["exact hq" if goals[0].endswith("⊢ q") else "exact hp", "frobnicate"]

        found = await best_first_search(client, AND_STATEMENT, propose, max_expansions=100)
        assert found.tactics == ["constructor", "exact hp", "exact hq"]
        assert found.proof_text is not None and found.proof_text.count("exact") == 2
        assert len(app.prover.registry) == 0  # released at the end


async def test_whole_proof_check_is_pinned_to_the_start_statement():
    """Issue 25: the whole-proof check uses the StartProof statement as its
    reference, so COMPLETED means a proof of *that* statement."""
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        split = await client.run_tactic(proof.states[0].state_id, "constructor")
        left = await client.run_tactic(split.state_id, "exact hp")
        done = await client.run_tactic(left.state_id, "exact hq")
        assert done.status == "COMPLETED" and done.verification_status == "VALID"
        # The start statement was elaborated as a reference (once) and pinned.
        assert app.service.references.elaborations == 1
