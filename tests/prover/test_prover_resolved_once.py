"""The Prover's requests are resolved once, at the door (issue 42 item 2).

A real gRPC server with stand-in workers. The doors' one resolver
(services.resolve `Resolver.start` / `Resolver.expand`, and the range check
of a timeout, `Resolver.timeout`) is counted around real calls: each
StartProof, RunTactic and Expand request is resolved exactly once, the
service runs the immutable resolved request it gets, and bad input (a
negative timeout, an unknown state, another client's state) is answered at
the door with its status code (a REJECTED pair on an Expand stream) before
any pool job exists. A pair that fails in an unexpected way is answered
through the one error table (edge.errors: INTERNAL).
"""

from __future__ import annotations

import collections
import dataclasses

import grpc
import pytest
from google.protobuf import duration_pb2

from leanrpc.client import AsyncClient, ClientError
from leanrpc.services.requests import ResolvedExpand, ResolvedStart
from leanrpc.services.resolve import Resolver
from leanrpc.v1 import prover_pb2 as ppb
from leanrpc.v1 import prover_pb2_grpc
from prover_support import AND_STATEMENT, running_server

pytestmark = pytest.mark.timeout(120)

TOKENS = ["alice-token-1", "bob-token-2"]


@pytest.fixture
def counted(monkeypatch):
    """Counts calls of the resolver's Prover rules (per method; `timeout` only
    where the Prover's Duration field `timeout` is checked) and the pool jobs."""
    calls: collections.Counter = collections.Counter()
    for name in ("start", "expand"):
        real = getattr(Resolver, name)

        def wrapper(self, *args, _real=real, _name=name, **kwargs):
            calls[_name] += 1
            return _real(self, *args, **kwargs)

        monkeypatch.setattr(Resolver, name, wrapper)
    real_timeout = Resolver.timeout

    def timeout(self, timeout_s, *, field=None):
        if field == "timeout":
            calls["timeout"] += 1
        return real_timeout(self, timeout_s, field=field)

    monkeypatch.setattr(Resolver, "timeout", timeout)
    return calls


def _count_jobs(app) -> collections.Counter:
    jobs: collections.Counter = collections.Counter()
    real = app.pool.submit

    async def submit(job, *args, **kwargs):
        jobs["submitted"] += 1
        return await real(job, *args, **kwargs)

    app.pool.submit = submit
    return jobs


def _seen_by_service(app) -> list:
    """What the service's `expand` is handed (the door's resolved request)."""
    seen = []
    real = app.prover.expand

    async def expand(request):
        seen.append(request)
        return await real(request)

    app.prover.expand = expand
    return seen


async def test_one_expand_walks_through_the_service_resolved_once(counted):
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT, timeout_s=30.0)
        assert (counted["start"], counted["expand"], counted["timeout"]) == (1, 0, 1)
        root = proof.states[0].state_id
        seen = _seen_by_service(app)
        counted.clear()
        [result] = [r async for r in client.expand([(root, "constructor")], timeout_s=30.0)]
        assert result.status == "INCOMPLETE", result.error
        # One request: resolved once (the timeout checked once), run once as what was resolved.
        assert (counted["start"], counted["expand"], counted["timeout"]) == (0, 1, 1)
        [request] = seen
        assert isinstance(request, ResolvedExpand)
        assert request.tactics == ("constructor",) and request.timeout_s == 30.0
        assert request.state.state_id == root and request.request_id == result.request_id
        assert request.caller.client_id == "peer:ipv4:127.0.0.1"
        assert request.caller.deadline is None  # the client's stream set no deadline
        with pytest.raises(dataclasses.FrozenInstanceError):
            request.timeout_s = 1.0  # immutable below the door
        # A request with several tactics is one resolution too; so is a RunTactic.
        counted.clear()
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = prover_pb2_grpc.ProverStub(channel)
            many = ppb.ExpandRequest(request_id="m", state_id=root, tactics=["constructor", "skip"])
            answers = [r async for r in stub.Expand(iter([many]), timeout=60)]
        assert [a.index for a in answers] == [0, 1]
        assert (counted["expand"], counted["timeout"]) == (1, 1)
        assert seen[1].tactics == ("constructor", "skip")
        assert seen[1].caller.deadline is not None  # this call's deadline, taken at the door
        counted.clear()
        step = await client.run_tactic(root, "constructor")
        assert step.status == "INCOMPLETE"
        assert (counted["start"], counted["expand"], counted["timeout"]) == (0, 1, 1)
        assert len(seen) == 3


async def test_a_start_is_resolved_once_into_the_code_it_elaborates(counted, monkeypatch):
    starts = []
    async with running_server(1) as (app, client):
        real = app.prover.start_proof

        async def start_proof(start):
            starts.append(start)
            return await real(start)

        app.prover.start_proof = start_proof
        proof = await client.start_proof(AND_STATEMENT, ttl_s=60.0)
        assert len(proof.states) == 1 and counted["start"] == 1
        [start] = starts
        assert isinstance(start, ResolvedStart)
        # The bare statement was closed at the door, and split there once.
        assert start.code.rstrip().endswith(":= by sorry") and start.split.body.endswith(
            ":= by sorry\n"
        )
        assert start.ttl_s == 60.0 and start.timeout_s == app.config.pool.default_timeout_s


async def test_bad_input_is_answered_at_the_door_before_any_pool_job(counted, monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(1, server__auth_tokens=TOKENS) as (app, _client):
        address = f"127.0.0.1:{app.port}"
        alice = AsyncClient(address, token=TOKENS[0], max_retries=0)
        bob = AsyncClient(address, token=TOKENS[1], max_retries=0)
        try:
            proof = await alice.start_proof(AND_STATEMENT)
            root = proof.states[0].state_id
            jobs = _count_jobs(app)
            counted.clear()
            refusals = {
                "negative timeout": alice.run_tactic(root, "constructor", timeout_s=-1.0),
                "unknown state": alice.run_tactic("s-never-issued", "constructor"),
                "another client's state": bob.run_tactic(root, "constructor"),
                "negative ttl": alice.start_proof(AND_STATEMENT, ttl_s=-2.0),
            }
            codes = {}
            for what, call in refusals.items():
                with pytest.raises(ClientError) as info:
                    await call
                codes[what] = (info.value.code, info.value.details)
            assert codes["negative timeout"][0] is grpc.StatusCode.INVALID_ARGUMENT
            assert codes["negative timeout"][1].startswith("timeout is negative")
            assert codes["negative ttl"][0] is grpc.StatusCode.INVALID_ARGUMENT
            assert codes["negative ttl"][1].startswith("ttl is negative")
            # Another client's state is exactly an unknown one.
            unknown = codes["unknown state"]
            assert unknown[0] is grpc.StatusCode.NOT_FOUND
            assert codes["another client's state"] == (
                grpc.StatusCode.NOT_FOUND,
                unknown[1].replace("s-never-issued", root),
            )
            # The same on an Expand stream: REJECTED pairs, each resolved once, and the stream goes on.
            counted.clear()
            pairs = [(root, "constructor"), ("s-never-issued", "constructor"), (root, "simp")]
            bobs = [r async for r in bob.expand(pairs, batch=False)]
            assert [r.status for r in bobs] == ["REJECTED"] * 3
            assert [r.error.split(":")[0] for r in bobs] == ["NOT_FOUND"] * 3
            assert counted["expand"] == 3
            assert jobs["submitted"] == 0  # nothing refused reached the pool
            async with grpc.aio.insecure_channel(address) as channel:
                stub = prover_pb2_grpc.ProverStub(channel)
                metadata = (("authorization", f"Bearer {TOKENS[0]}"),)
                requests = [
                    ppb.ExpandRequest(
                        request_id="neg",
                        state_id=root,
                        tactic="constructor",
                        timeout=duration_pb2.Duration(seconds=-3),
                    ),
                    ppb.ExpandRequest(request_id="ok", state_id=root, tactic="constructor"),
                ]
                counted.clear()
                by_id = {
                    r.request_id: r
                    async for r in stub.Expand(iter(requests), timeout=60, metadata=metadata)
                }
            assert by_id["neg"].status == ppb.PROOF_STATUS_REJECTED
            assert by_id["neg"].error.startswith("INVALID_ARGUMENT: timeout is negative")
            assert by_id["ok"].status == ppb.PROOF_STATUS_INCOMPLETE
            # Each pair's timeout checked once (not at the edge and again below it).
            assert (counted["expand"], counted["timeout"]) == (2, 2)
            assert jobs["submitted"] == 1  # only the good pair ran
        finally:
            await alice.close()
            await bob.close()


async def test_a_pair_that_fails_unexpectedly_is_answered_through_the_error_table():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id

        async def broken(request):
            raise RuntimeError("a bug below the door")

        real = app.prover.expand
        app.prover.expand = broken
        [result] = [r async for r in client.expand([(root, "constructor")])]
        assert result.status == "REJECTED"
        assert result.error.startswith("INTERNAL: RuntimeError('a bug below the door')")
        app.prover.expand = real
        [again] = [r async for r in client.expand([(root, "constructor")])]
        assert again.status == "INCOMPLETE"  # the server keeps serving
