"""Bad input gets a clear status code, and the server keeps serving."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import duration_pb2

from leanrpc.v1 import verifier_pb2 as pb
from leanrpc.v1 import verifier_pb2_grpc
from verify_support import running_server

OK = "example : True := trivial"


async def _expect(call, code: grpc.StatusCode, *words: str) -> str:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await call
    assert info.value.code() is code, info.value
    details = info.value.details()
    for word in words:
        assert word in details, details
    return details


def _raw_verify_request(code: bytes) -> bytes:
    """VerifyRequest{snippets: [{id: "a", code: <bytes>}]} on the wire, unchecked."""

    def field(number: int, payload: bytes) -> bytes:
        return bytes([number << 3 | 2]) + _varint(len(payload)) + payload

    return field(1, field(1, b"a") + field(2, code))


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


async def test_bad_requests_get_clear_codes_and_server_keeps_serving():
    async with running_server(server__max_snippets_per_batch=1000) as (app, _client):
        channel = grpc.aio.insecure_channel(
            f"127.0.0.1:{app.port}", options=[("grpc.max_send_message_length", 200 * 2**20)]
        )
        stub = verifier_pb2_grpc.VerifierStub(channel)

        def verify(snippets, **options):
            request = pb.VerifyRequest(
                snippets=[pb.Snippet(id=f"s{i}", code=c) for i, c in enumerate(snippets)],
                options=pb.VerifyOptions(**options),
            )
            return stub.Verify(request, timeout=60)

        await _expect(verify([]), grpc.StatusCode.INVALID_ARGUMENT, "empty")
        await _expect(verify([OK, ""]), grpc.StatusCode.INVALID_ARGUMENT, "snippet 1", "empty")
        await _expect(verify([" \n\t"]), grpc.StatusCode.INVALID_ARGUMENT, "empty")
        ten_mb = "theorem x : True := trivial\n" + "-- pad\n" * (10 * 2**20 // 7)
        await _expect(verify([ten_mb]), grpc.StatusCode.INVALID_ARGUMENT, "characters", "limit")
        await _expect(verify([OK], infotree=99), grpc.StatusCode.INVALID_ARGUMENT, "infotree", "99")
        await _expect(
            verify([OK], timeout=duration_pb2.Duration(seconds=-1)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "timeout",
        )
        await _expect(
            verify([OK], timeout=duration_pb2.Duration(seconds=1, nanos=2_000_000_000)),
            grpc.StatusCode.INVALID_ARGUMENT,
            "options.timeout",
            "not a valid Duration",
        )
        await _expect(verify([OK + "\x00"]), grpc.StatusCode.INVALID_ARGUMENT, "NUL")
        await _expect(
            verify([OK] * 100_000),
            grpc.StatusCode.INVALID_ARGUMENT,
            "100000 snippets",
            "VerifyStream",
        )

        # Invalid UTF-8 in a string field: only a hand-made wire message can carry it.
        raw = channel.unary_unary(
            "/leanrpc.v1.Verifier/Verify",
            request_serializer=lambda b: b,
            response_deserializer=pb.VerifyResponse.FromString,
        )
        await _expect(
            raw(_raw_verify_request(b"example : True := trivial -- \xff\xfe"), timeout=30),
            grpc.StatusCode.INVALID_ARGUMENT,
            "UTF-8",
        )
        # The same bytes, valid, go through: the framing above is right.
        ok = await raw(_raw_verify_request("example : True := trivial -- é".encode()), timeout=30)
        assert ok.results[0].status == pb.STATUS_VALID

        # A VerifyStreamRequest with a snippet has the same wire shape.
        raw_stream = channel.stream_stream(
            "/leanrpc.v1.Verifier/VerifyStream",
            request_serializer=lambda b: b,
            response_deserializer=pb.VerifyStreamResponse.FromString,
        )
        call = raw_stream(timeout=30)
        await call.write(_raw_verify_request(b"example : True := trivial -- \xff"))
        await call.done_writing()
        assert await call.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "UTF-8" in await call.details()

        # An unknown enum value inside a stream ends the stream with
        # INVALID_ARGUMENT; a stream snippet without an id is refused alone.
        call = stub.VerifyStream(timeout=60)
        await call.write(pb.VerifyStreamRequest(snippet=pb.Snippet(id="", code=OK)))
        await call.write(pb.VerifyStreamRequest(options=pb.VerifyOptions(infotree=42)))
        await call.done_writing()
        answers = []
        with pytest.raises(grpc.aio.AioRpcError):
            async for message in call:
                answers.append(message.result)
        assert [(a.id, a.status) for a in answers] == [
            ("", pb.STATUS_REJECTED)
        ] and "id" in answers[0].error
        assert await call.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "infotree" in await call.details()

        [after] = (await verify([OK])).results
        assert after.status == pb.STATUS_VALID
        await channel.close()


async def test_message_size_limit_is_resource_exhausted():
    async with running_server(server__max_message_mb=1) as (app, client):
        two_mb = "theorem x : True := trivial\n" + "-- pad\n" * (2 * 2**20 // 7)
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{app.port}")
        stub = verifier_pb2_grpc.VerifierStub(channel)
        request = pb.VerifyRequest(snippets=[pb.Snippet(id="big", code=two_mb)])
        await _expect(
            stub.Verify(request, timeout=60), grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max"
        )
        [ok] = await client.verify_batch([OK])
        assert ok.status == "VALID"
        await channel.close()
