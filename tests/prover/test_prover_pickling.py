"""Proof states moved by pickling: the server holds the bytes, a recycled
worker's live states are pickled before it stops and unpickled on the next
worker; a REPL without pickling gets replay; a bad pickle falls back to
replay; the over-the-limit refusals name the proto fields."""

from __future__ import annotations

import sys

import grpc
import pytest

from leanrpc.client import ClientError
from leanrpc.services.prover.pickles import can_pickle
from leanrpc.services.prover.rebuild import Rebuilder
from leanrpc.services.prover.registry import StateRegistry
from prover_support import AND_STATEMENT, running_server
from testkit import wait_until

OLD_REPL = [
    sys.executable,
    "-m",
    "leanrpc.standin",
    "--lean-version",
    "4.2.0",
]  # before pickling (v4.3.0)


async def _search_then_expand_each_state_after_recycles(app, client):
    """Expands three states, then expands each again with every job on a
    fresh worker (max_requests_per_worker 1); returns (before, after) answers."""
    proof = await client.start_proof(AND_STATEMENT)
    root = proof.states[0].state_id
    split = await client.run_tactic(root, "constructor")
    left = await client.run_tactic(split.state_id, "exact hp")
    done = await client.run_tactic(left.state_id, "exact hq")
    assert done.status == "COMPLETED", done.error
    pairs = [
        (root, "constructor"),
        (split.state_id, "exact hp"),
        (left.state_id, "exact hq"),
        (split.state_id, "frobnicate"),
    ]
    before = [split, left, done, await client.run_tactic(split.state_id, "frobnicate")]
    served = {w.name for w in app.pool.workers}
    app.config.limits.max_requests_per_worker = 1  # every later job recycles its worker
    after = [await client.run_tactic(state, tactic) for state, tactic in pairs]
    assert {w.name for w in app.pool.workers}.isdisjoint(served)  # the first worker was recycled
    return before, after


def _same_answers(before, after) -> None:
    for old, new in zip(before, after):
        assert (new.status, new.goals, new.repl_status, new.proof_text) == (
            old.status,
            old.goals,
            old.repl_status,
            old.proof_text,
        )
        assert new.state_id != old.state_id or not new.state_id


@pytest.mark.parametrize("sandbox", ["off", "unshare"])
async def test_live_states_are_pickled_before_a_recycle_and_unpickled_after(sandbox):
    async with running_server(1, sandbox__mode=sandbox) as (app, client):
        before, after = await _search_then_expand_each_state_after_recycles(app, client)
        _same_answers(before, after)
        stats = app.prover.registry.stats
        assert stats.states_pickled >= 3  # root, split, left (and done) before the first recycle
        assert stats.states_rebuilt_by_pickle >= 3  # every expansion after it ran on a fresh worker
        assert stats.states_rebuilt_by_replay == 0 and stats.unpickle_failures == 0
        assert stats.replayed_tactics == 0 and stats.replayed_commands == 0
        assert (
            not after[0].rebuilt and after[1].rebuilt and after[2].rebuilt
        )  # the first ran on the old worker
        assert app.prover.registry.pickle_bytes > 0  # the server holds the bytes itself


async def test_a_repl_without_pickling_gets_replay_and_nothing_is_pickled():
    async with running_server(1, repl__command=OLD_REPL) as (app, client):
        assert app.pool.identity.lean_version == "4.2.0"
        before, after = await _search_then_expand_each_state_after_recycles(app, client)
        _same_answers(before, after)
        stats = app.prover.registry.stats
        assert stats.states_pickled == 0 and stats.states_rebuilt_by_pickle == 0
        assert app.prover.registry.pickle_bytes == 0
        # moved eagerly to the next worker, or replayed on the expansion itself
        assert stats.states_moved_eagerly + stats.states_rebuilt_by_replay >= 1
        assert stats.replayed_commands >= 1


async def test_a_pickle_that_does_not_unpickle_falls_back_to_replay():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        split = await client.run_tactic(proof.states[0].state_id, "constructor")
        left = await client.run_tactic(split.state_id, "exact hp")
        app.config.limits.max_requests_per_worker = 1
        again = await client.run_tactic(
            split.state_id, "exact hp"
        )  # runs on the old worker, which is recycled
        assert again.goals == left.goals
        await wait_until(
            lambda: again.worker not in {w.name for w in app.pool.workers}, 20, "the recycle"
        )
        registry = app.prover.registry
        [stored] = [p for p in registry._proofs.values() if p.pickles]
        assert (0, "constructor") in stored.pickles
        for path in list(stored.pickles):
            registry.store_pickle(stored, path, b"not a pickle", stored.pickles[path][1])
        # The REPL dies on the bad file (as Lean's does); the pool retries, the state is replayed.
        result = await client.run_tactic(left.state_id, "exact hq")
        assert result.status == "COMPLETED" and result.verification_status == "VALID"
        assert (
            registry.stats.unpickle_failures == 1 and registry.stats.states_rebuilt_by_replay >= 1
        )
        # every bad pickle of that proof was dropped with the one that failed (the last
        # worker's recycle may have pickled good ones since)
        assert all(not data.startswith(b"not a") for data, _goals in stored.pickles.values())


@pytest.mark.parametrize(
    "call, field, needle",
    [
        ("start_timeout", "timeout", "over the limit"),
        ("tactic_timeout", "timeout", "over the limit"),
        ("start_ttl", "ttl", "out of range"),
    ],
)
async def test_over_the_limit_refusals_name_the_proto_field(call, field, needle):
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        state = proof.states[0].state_id
        too_long = app.config.pool.max_timeout_s + 5
        with pytest.raises(ClientError) as info:
            if call == "start_timeout":
                await client.start_proof(AND_STATEMENT, timeout_s=too_long)
            elif call == "tactic_timeout":
                await client.run_tactic(state, "constructor", timeout_s=too_long)
            else:
                await client.start_proof(AND_STATEMENT, ttl_s=app.prover.limits.max_ttl_s + 1)
        assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert [f for f, _ in info.value.field_violations] == [field]
        # the proto field's name, not the old `timeout_s`/`ttl_s` (config keys may keep `_s`)
        assert needle in info.value.details and info.value.details.startswith(f"{field} ")
        [result] = [r async for r in client.expand([(state, "constructor")], timeout_s=too_long)]
        assert result.status == "REJECTED" and result.error.startswith("INVALID_ARGUMENT: timeout ")
        assert " timeout_s " not in result.error


def test_pickling_is_known_from_the_lean_version():
    assert (
        can_pickle("auto", "4.19.0")
        and can_pickle("auto", "v4.3.0")
        and can_pickle("auto", "4.22.0-rc1")
    )
    assert (
        not can_pickle("auto", "4.2.0")
        and not can_pickle("auto", "")
        and not can_pickle("auto", "nightly")
    )
    assert can_pickle("on", "") and not can_pickle("off", "4.19.0")


def test_the_cost_model_prefers_a_pickle_over_replaying_a_path():
    registry = StateRegistry(max_states_per_client=10, default_ttl_s=60, max_ttl_s=60)
    proof = registry.new_proof(None, "theorem t : p := by sorry\n", "c", False, roots=1)
    worker = type("W", (), {"name": "w1"})()
    rebuild = Rebuilder(registry, scratch=None, pickling=lambda w: True)
    deep = (0, "constructor", "exact hp")
    assert rebuild.pickle_start(proof, worker, deep, held=0) == 0  # nothing pickled
    registry.store_pickle(proof, (0, "constructor"), b"x", ["g"])
    assert rebuild.pickle_start(proof, worker, deep, held=0) == 2  # pickle + 1 tactic < command + 2
    assert rebuild.pickle_start(proof, worker, deep, held=2) == 0  # the worker holds as much
    registry.store_pickle(proof, (0,), b"y", ["g"])
    assert rebuild.pickle_start(proof, worker, (0,), held=0) == 1  # a tie goes to the pickle
    # the worker holds the parent: one short tactic is cheaper than unpickling the command's work
    registry.store_pickle(proof, deep, b"z", ["g"])
    assert rebuild.pickle_start(proof, worker, deep, held=2) == 0
    assert rebuild.pickle_start(proof, worker, deep, held=1) == 3
    assert (
        Rebuilder(registry, None, pickling=lambda w: False).pickle_start(
            proof, worker, deep, held=0
        )
        == 0
    )
