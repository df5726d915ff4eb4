"""Failed calls carry a google.rpc.Status (ErrorInfo, RetryInfo, BadRequest), and
the Python client reads it: no text to parse, no custom trailer."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf import duration_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from leanrpc.client import ClientError
from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc
from verify_support import running_server

HANG = "import Mathlib\n\ntheorem stuck : True := trivial\n--@standin: hang\n"
OK = "import Mathlib\n\ntheorem t : 1 = 1 := rfl\n"


def _details(exc: grpc.aio.AioRpcError) -> dict[str, object]:
    status = rpc_status.from_call(exc)
    assert status is not None, "no grpc-status-details-bin trailer"
    assert status.code == exc.code().value[0] and status.message == exc.details()
    out = {}
    for packed in status.details:
        for kind in (
            error_details_pb2.ErrorInfo,
            error_details_pb2.RetryInfo,
            error_details_pb2.BadRequest,
        ):
            if packed.Is(kind.DESCRIPTOR):
                out[kind.__name__] = message = kind()
                packed.Unpack(message)
    return out


async def _fails(call) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value


async def test_bad_input_names_the_field_and_the_reason():
    async with running_server() as (app, client):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)
            empty = await _fails(stub.Verify(pb.VerifyRequest(), timeout=30))
            assert empty.code() is grpc.StatusCode.INVALID_ARGUMENT
            details = _details(empty)
            assert (details["ErrorInfo"].reason, details["ErrorInfo"].domain) == (
                "INVALID_REQUEST",
                "leanrpc.dev",
            )
            assert [v.field for v in details["BadRequest"].field_violations] == ["snippets"]
            assert "RetryInfo" not in details
            # A Duration that is not one (nanos out of range) is bad input too.
            broken = pb.VerifyRequest(
                snippets=[pb.Snippet(code=OK)],
                options=pb.VerifyOptions(timeout=duration_pb2.Duration(seconds=1, nanos=-5)),
            )
            details = _details(await _fails(stub.Verify(broken, timeout=30)))
            assert [v.field for v in details["BadRequest"].field_violations] == ["options.timeout"]
            unknown = await _fails(
                stub.RunInSession(
                    pb.RunInSessionRequest(session="nope", code="#check 1"), timeout=30
                )
            )
            assert (
                unknown.code() is grpc.StatusCode.NOT_FOUND
                and _details(unknown)["ErrorInfo"].reason == "NOT_FOUND"
            )
        # The client hands the same facts over as attributes.
        with pytest.raises(ClientError) as caught:
            await client.verify_batch([])
        assert (caught.value.reason, caught.value.field_violations[0][0]) == (
            "INVALID_REQUEST",
            "snippets",
        )
        assert caught.value.retry_after_s is None


async def test_a_full_queue_sends_retry_info_not_a_trailer():
    async with running_server(workers=1, pool__queue_limit=1) as (app, client):
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)
            stuck = asyncio.ensure_future(
                stub.Verify(pb.VerifyRequest(snippets=[pb.Snippet(id="s", code=HANG)]), timeout=60)
            )
            for _ in range(500):  # the hanging snippet holds the only worker
                if any(w.state.name in ("BUSY", "RUNNING") for w in app.pool.workers):
                    break
                await asyncio.sleep(0.01)
            refused = await _fails(
                stub.Verify(pb.VerifyRequest(snippets=[pb.Snippet(code=OK)] * 3), timeout=30)
            )
            assert refused.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
            details = _details(refused)
            assert details["ErrorInfo"].reason == "OVERLOADED"
            assert details["RetryInfo"].retry_delay.ToNanoseconds() > 0
            assert "retry-after-ms" not in dict(refused.trailing_metadata() or ())
            with pytest.raises(ClientError) as caught:
                await client.verify_batch([OK] * 3)
            assert caught.value.code is grpc.StatusCode.RESOURCE_EXHAUSTED
            assert caught.value.reason == "OVERLOADED" and caught.value.retry_after_s > 0
            stuck.cancel()
