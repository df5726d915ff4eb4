"""Request limits: each one a clear status and message, and the server keeps serving."""

from __future__ import annotations

import grpc
import pytest

from leanrpc.edge.identity import CallerIdentity, client_key
from leanrpc.v1 import verifier_pb2 as pb
from security_support import HEADER, bearer, make_config, one_snippet, running_server, stub

CODE = HEADER + "theorem t : 1 = 1 := rfl\n"


async def _refusal(call) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    return refused.value.code(), refused.value.details()


async def test_code_length_batch_size_and_message_size(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    config = make_config(
        server__max_code_chars=200, server__max_snippets_per_batch=3, server__max_message_mb=1
    )
    async with running_server(config) as app:
        async with grpc.aio.insecure_channel(
            f"127.0.0.1:{app.port}", options=[("grpc.max_send_message_length", 8 * 2**20)]
        ) as channel:
            verifier = stub(channel)
            code, details = await _refusal(verifier.Verify(one_snippet(CODE + "-- " + "x" * 300)))
            assert code == grpc.StatusCode.INVALID_ARGUMENT
            assert "over the limit of 200" in details and "snippet 0" in details
            batch = pb.VerifyRequest(snippets=[pb.Snippet(id=str(i), code=CODE) for i in range(4)])
            code, details = await _refusal(verifier.Verify(batch))
            assert (
                code == grpc.StatusCode.INVALID_ARGUMENT
                and "4 snippets, over the limit of 3" in details
            )
            code, details = await _refusal(verifier.Verify(one_snippet("x" * (2 * 2**20))))
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "larger than max" in details.lower() or "message" in details.lower(), details
            ok = await verifier.Verify(
                pb.VerifyRequest(snippets=[pb.Snippet(id=str(i), code=CODE) for i in range(3)])
            )
            assert [r.status for r in ok.results] == [pb.STATUS_VALID] * 3


async def _open_stream_with_one_answer(verifier, metadata):
    """A VerifyStream that has certainly been admitted (it answered) and is still open."""
    call = verifier.VerifyStream(metadata=metadata)
    await call.write(pb.VerifyStreamRequest(snippet=pb.Snippet(id="held", code=CODE)))
    response = await call.read()
    assert response.result.status == pb.STATUS_VALID
    return call


async def test_per_client_concurrency(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    config = make_config(server__max_concurrent_per_client=1, server__auth_tokens=["alice", "bob"])
    async with running_server(config) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            verifier = stub(channel)
            held = await _open_stream_with_one_answer(verifier, bearer("alice"))
            code, details = await _refusal(
                verifier.Verify(one_snippet(CODE), metadata=bearer("alice"))
            )
            assert code == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert "max_concurrent_per_client" in details and "1 calls in flight" in details
            # Another client is not affected; health is never limited.
            other = await verifier.Verify(one_snippet(CODE), metadata=bearer("bob"))
            assert other.results[0].status == pb.STATUS_VALID
            await held.done_writing()
            assert await held.read() is grpc.aio.EOF
            assert await held.code() == grpc.StatusCode.OK
            again = await verifier.Verify(one_snippet(CODE), metadata=bearer("alice"))
            assert again.results[0].status == pb.STATUS_VALID


async def test_a_refused_stream_is_resource_exhausted_every_time(monkeypatch):
    """The refusal waits for the client's writes (else grpc reports a local INTERNAL)."""
    from leanrpc.client import AsyncClient, ClientError

    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(make_config(server__max_concurrent_per_client=1)) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            held = await _open_stream_with_one_answer(stub(channel), ())
            codes = []
            for _ in range(40):
                async with AsyncClient(f"127.0.0.1:{app.port}", max_retries=0) as client:
                    try:
                        await client.verify([CODE] * 5)
                        codes.append("OK")
                    except ClientError as exc:
                        codes.append(exc.code.name)
            assert codes == ["RESOURCE_EXHAUSTED"] * 40
            await held.done_writing()
            assert await held.read() is grpc.aio.EOF
            # Once the held stream is done, a stream gets in again.
            async with AsyncClient(f"127.0.0.1:{app.port}", max_retries=0) as client:
                assert [r.status for r in await client.verify([CODE] * 3)] == ["VALID"] * 3


def test_client_key_prefers_token_then_peer_host():
    def key(metadata, peer):
        return client_key(metadata, peer, tokens_checked=True)

    assert key(bearer("a"), "ipv4:127.0.0.1:5000") == key(bearer("a"), "ipv4:10.0.0.9:6000")
    assert key(bearer("a"), "ipv4:127.0.0.1:5000") != key(bearer("b"), "ipv4:127.0.0.1:5000")
    assert key((), "ipv4:127.0.0.1:5000") == key((), "ipv4:127.0.0.1:5001") == "peer:ipv4:127.0.0.1"
    assert key((), "ipv6:[::1]:5000") == "peer:ipv6:[::1]"


def test_identity_is_one_rule_for_grpc_and_rest():
    checked, unchecked = CallerIdentity(tokens_checked=True), CallerIdentity(tokens_checked=False)
    grpc_caller = checked.of_metadata(bearer("tok"), "ipv4:10.0.0.1:4000")
    # Kimina's REST form, with or without "Bearer ", is the same token, the same caller.
    assert (
        checked.of_http("Bearer tok", "10.0.0.2")
        == checked.of_http("tok", "10.0.0.3")
        == grpc_caller
    )
    # Tokens not checked: a bearer, made up or not, is no identity; the host is, on both doors.
    assert unchecked.of_metadata(bearer("made-up"), "ipv4:127.0.0.1:4000") == "peer:ipv4:127.0.0.1"
    assert unchecked.of_http("made-up", "127.0.0.1") == "peer:ipv4:127.0.0.1"
    assert (
        unchecked.of_http(None, "::1")
        == unchecked.of_metadata((), "ipv6:[::1]:5000")
        == "peer:ipv6:[::1]"
    )
