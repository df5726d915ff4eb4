"""The Prover's times on the wire are google.protobuf.Duration (timeout, ttl,
elapsed): a negative or invalid one is INVALID_ARGUMENT naming the field (a
REJECTED result on an Expand stream), and the Python and Node clients convert
their float seconds both ways."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import duration_pb2

from leanrpc.client import ClientError
from leanrpc.v1 import prover_pb2 as ppb
from leanrpc.v1 import prover_pb2_grpc
from prover_support import AND_STATEMENT, running_server
from testkit import node_json


def _fields(info: pytest.ExceptionInfo) -> list[str]:
    return [field for field, _description in info.value.field_violations]


async def test_negative_durations_are_invalid_argument_naming_the_field():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        state = proof.states[0].state_id
        for call, field in (
            (client.start_proof(AND_STATEMENT, timeout_s=-1.0), "timeout"),
            (client.start_proof(AND_STATEMENT, ttl_s=-0.5), "ttl"),
            (client.run_tactic(state, "constructor", timeout_s=-2.0), "timeout"),
        ):
            with pytest.raises(ClientError) as info:
                await call
            assert info.value.code is grpc.StatusCode.INVALID_ARGUMENT
            assert _fields(info) == [field] and "negative" in info.value.details
        # A value over the server's limit reaches the service as seconds.
        with pytest.raises(ClientError) as info:
            await client.run_tactic(
                state, "constructor", timeout_s=app.config.pool.max_timeout_s + 1.5
            )
        assert (
            info.value.code is grpc.StatusCode.INVALID_ARGUMENT
            and "over the limit" in info.value.details
        )
        # Nothing was left behind by the refused calls: only the first proof's root.
        assert len(app.prover.registry) == 1


async def test_a_duration_that_is_not_one_is_invalid_argument_naming_the_field():
    async with running_server(1) as (app, client):
        broken = duration_pb2.Duration(seconds=1, nanos=-5)  # signs disagree
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = prover_pb2_grpc.ProverStub(channel)
            for request, field in (
                (ppb.StartProofRequest(code=AND_STATEMENT, ttl=broken), "ttl"),
                (ppb.StartProofRequest(code=AND_STATEMENT, timeout=broken), "timeout"),
                (ppb.RunTacticRequest(state_id="s-x", tactic="simp", timeout=broken), "timeout"),
            ):
                method = (
                    stub.StartProof
                    if isinstance(request, ppb.StartProofRequest)
                    else stub.RunTactic
                )
                with pytest.raises(grpc.aio.AioRpcError) as info:
                    await method(request, timeout=30)
                assert info.value.code() is grpc.StatusCode.INVALID_ARGUMENT
                assert f"{field} is not a valid Duration" in info.value.details()


async def test_expand_rejects_a_negative_timeout_and_the_stream_goes_on():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT)
        root = proof.states[0].state_id
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = prover_pb2_grpc.ProverStub(channel)
            requests = [
                ppb.ExpandRequest(
                    request_id="bad",
                    state_id=root,
                    tactic="constructor",
                    timeout=duration_pb2.Duration(seconds=-1),
                ),
                ppb.ExpandRequest(
                    request_id="good",
                    state_id=root,
                    tactic="constructor",
                    timeout=duration_pb2.Duration(seconds=30),
                ),
            ]
            by_id = {r.request_id: r async for r in stub.Expand(iter(requests), timeout=60)}
        assert sorted(by_id) == ["bad", "good"]
        assert by_id["bad"].status == ppb.PROOF_STATUS_REJECTED
        assert by_id["bad"].error.startswith("INVALID_ARGUMENT: timeout is negative")
        assert by_id["good"].status == ppb.PROOF_STATUS_INCOMPLETE
        assert by_id["good"].elapsed.ToNanoseconds() > 0


async def test_the_python_client_reports_elapsed_seconds_from_the_durations():
    async with running_server(1) as (app, client):
        proof = await client.start_proof(AND_STATEMENT, timeout_s=30.0, ttl_s=60.25)
        assert isinstance(proof.elapsed_s, float) and 0 < proof.elapsed_s < 30
        state = app.prover.registry.get(proof.states[0].state_id, "peer:ipv4:127.0.0.1")
        assert state.ttl_s == 60.25  # the TTL arrived as seconds
        step = await client.run_tactic(proof.states[0].state_id, "constructor", timeout_s=30.0)
        assert step.status == "INCOMPLETE" and 0 < step.elapsed_s < 30
        [streamed] = [
            r
            async for r in client.expand(
                [(proof.states[0].state_id, "constructor")], timeout_s=30.0
            )
        ]
        assert streamed.status == "INCOMPLETE" and 0 < streamed.elapsed_s < 30


NODE_SCRIPT = """
const { ProverClient } = require('./lib/prover');
(async () => {
  const client = new ProverClient(process.argv[1]);
  const out = {};
  const proof = await client.startProof(process.argv[2], { timeoutS: 30, ttlS: 60.5 });
  out.start_elapsed_s = proof.elapsed_s;
  out.root = proof.states[0].state_id;
  const step = await client.runTactic(proof.states[0].state_id, 'constructor', { timeoutS: 30 });
  out.step = [step.status, step.goals.length, step.elapsed_s];
  try {
    await client.runTactic(proof.states[0].state_id, 'constructor', { timeoutS: -1 });
    out.negative = 'accepted';
  } catch (error) {
    out.negative = [error.code, error.details];
  }
  client.close();
  console.log(JSON.stringify(out));
})().catch((error) => { console.error(error); process.exit(1); });
"""


async def test_the_node_client_sends_and_reads_durations(node_client):
    # The contract copy the client loads (tests/conftest.py's fixture makes it) is the Duration one.
    assert (
        "google.protobuf.Duration timeout"
        in (node_client / "proto" / "leanrpc" / "v1" / "prover.proto").read_text()
    )
    async with running_server(1) as (app, _client):
        out = await node_json(
            node_client, "-e", NODE_SCRIPT, f"127.0.0.1:{app.port}", AND_STATEMENT, timeout=120
        )
        assert 0 < out["start_elapsed_s"] < 30
        status, goals, elapsed_s = out["step"]
        assert (status, goals) == ("INCOMPLETE", 2) and 0 < elapsed_s < 30
        code, details = out["negative"]
        assert code == grpc.StatusCode.INVALID_ARGUMENT.value[0] and details.startswith(
            "timeout is negative"
        )
        assert (
            app.prover.registry.get(out["root"], "peer:ipv4:127.0.0.1").ttl_s == 60.5
        )  # the TTL arrived as seconds
