"""Issue 44 item 1 at the gRPC door: request messages are charged to their peer
address before they are parsed (edge/interceptors/budget.py); past the budget
the call gets RESOURCE_EXHAUSTED with RetryInfo and names the budget, and the
bytes are given back when the call ends."""

from __future__ import annotations

import contextlib

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from leanrpc.app import create_server
from leanrpc.edge.interceptors.budget import message_cost, peer_address
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc
from testkit import loopback_config

OK = "import Mathlib\n\ntheorem t : 1 = 1 := rfl\n"


@contextlib.asynccontextmanager
async def running_server(**overrides):
    app = await create_server(loopback_config(1, **overrides))
    try:
        yield app, None
    finally:
        await app.stop(2.0)


def _retry_delay_ns(exc: grpc.aio.AioRpcError) -> int:
    for packed in rpc_status.from_call(exc).details:
        if packed.Is(error_details_pb2.RetryInfo.DESCRIPTOR):
            info = error_details_pb2.RetryInfo()
            packed.Unpack(info)
            return info.retry_delay.ToNanoseconds()
    raise AssertionError("no RetryInfo")


def test_peer_address_drops_the_port_and_cost_counts_three_copies():
    assert peer_address("ipv4:127.0.0.1:5123") == "127.0.0.1"
    assert peer_address("ipv6:[::1]:5123") == "::1"
    assert peer_address("unix:/tmp/s") == "unix:/tmp/s"
    assert message_cost(b"abc") == 9  # raw, parsed, the str
    assert message_cost("😀".encode()) == 4 + 4 + 16


async def test_a_message_past_the_budget_is_refused_before_it_is_parsed():
    async with running_server(memory__in_flight_mb_per_peer=8) as (app, _client):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)
            big = pb.VerifyRequest(snippets=[pb.Snippet(id="big", code="a" * 3 * 2**20)])
            try:
                await stub.Verify(big, timeout=60)
            except grpc.aio.AioRpcError as exc:
                refused = exc
            else:
                raise AssertionError("a 9 MB charge passed an 8 MB budget")
            assert refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "memory.in_flight_mb_per_peer" in refused.details()
            assert _retry_delay_ns(refused) > 0
            assert app.budget.refused["peer"] == 1
            small = await stub.Verify(pb.VerifyRequest(snippets=[pb.Snippet(code=OK)]), timeout=60)
            assert small.results[0].status == pb.STATUS_VALID
            assert app.budget.held_total == 0  # every charge given back

            async def requests():
                yield pb.VerifyStreamRequest(snippet=pb.Snippet(id="a", code=OK))
                yield pb.VerifyStreamRequest(snippet=pb.Snippet(id="b", code="a" * 3 * 2**20))

            call = stub.VerifyStream(requests(), timeout=60)
            try:
                async for _ in call:
                    pass
            except grpc.aio.AioRpcError as exc:
                assert exc.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, exc
            else:
                raise AssertionError("the streamed 9 MB message passed an 8 MB budget")
            assert app.budget.refused["peer"] == 2 and app.budget.held_total == 0


async def test_a_stream_past_the_budget_answers_what_it_accepted_then_ends_refused():
    """The refusal ends the call from the handler's own task, after the snippet already
    running is answered: no snippet accepted goes unanswered, and the status comes (an
    abort from the stream's reader task, while that answer was still to be sent, left
    the client waiting for its deadline in about one run in ten)."""
    slow = OK + "--@standin: burn=0.5\n"
    async with running_server(memory__in_flight_mb_per_peer=8) as (app, _client):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)

            async def requests():
                yield pb.VerifyStreamRequest(snippet=pb.Snippet(id="a", code=slow))
                yield pb.VerifyStreamRequest(snippet=pb.Snippet(id="b", code="a" * 3 * 2**20))

            answered = []
            call = stub.VerifyStream(requests(), timeout=60)
            try:
                async for response in call:
                    answered.append((response.result.id, response.result.status))
            except grpc.aio.AioRpcError as exc:
                assert exc.code() is grpc.StatusCode.RESOURCE_EXHAUSTED, exc
                assert "memory.in_flight_mb_per_peer" in exc.details()
                assert _retry_delay_ns(exc) > 0
            else:
                raise AssertionError("the streamed 9 MB message passed an 8 MB budget")
            assert answered == [("a", pb.STATUS_VALID)]
            assert app.budget.refused["peer"] == 1 and app.budget.held_total == 0
