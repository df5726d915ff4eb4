"""Bearer tokens: who gets in, from which sources, and when the server refuses to start."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from leanrpc.app import create_server
from leanrpc.edge.auth import AccessConfigError, load_tokens
from leanrpc.edge.interceptors.auth import build_access_interceptors
from leanrpc.v1 import verifier_pb2 as pb
from security_support import HEADER, bearer, make_config, one_snippet, running_server, stub

GOOD = "tok-good-123"
CODE = HEADER + "theorem t : 1 = 1 := rfl\n"


async def _status_of(call) -> grpc.StatusCode:
    try:
        await call
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return grpc.StatusCode.OK


async def _stream_status(verifier, metadata) -> grpc.StatusCode:
    call = verifier.VerifyStream(metadata=metadata)
    try:
        await call.write(pb.VerifyStreamRequest(snippet=pb.Snippet(id="a", code=CODE)))
        await call.done_writing()
        async for _ in call:
            pass
    except grpc.aio.AioRpcError as exc:
        return exc.code()
    return await call.code()


async def test_tokens_guard_every_rpc_but_health(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(make_config(server__auth_tokens=[GOOD])) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            verifier = stub(channel)
            for metadata in (
                (),
                bearer("wrong"),
                (("authorization", GOOD),),
            ):  # none, wrong, not Bearer
                assert (
                    await _status_of(verifier.Verify(one_snippet(CODE), metadata=metadata))
                    == grpc.StatusCode.UNAUTHENTICATED
                )
                assert (
                    await _status_of(
                        verifier.GetServerInfo(pb.GetServerInfoRequest(), metadata=metadata)
                    )
                    == grpc.StatusCode.UNAUTHENTICATED
                )
                assert await _stream_status(verifier, metadata) == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await verifier.Verify(one_snippet(CODE))
            assert "authorization: Bearer" in refused.value.details()
            response = await verifier.Verify(one_snippet(CODE), metadata=bearer(GOOD))
            assert response.results[0].status == pb.STATUS_VALID
            assert await _stream_status(verifier, bearer(GOOD)) == grpc.StatusCode.OK
            health = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="")
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING


def test_token_sources_file_and_env(tmp_path, monkeypatch):
    token_file = tmp_path / "tokens"
    token_file.write_text("# one per line\nfrom-file-1\n\n  from-file-2  \n")
    token_file.chmod(0o600)  # a token file readable by others refuses to start (test_attacks.py)
    monkeypatch.setenv("MY_TOKENS", "from-env-1, from-env-2")
    config = make_config(
        server__auth_tokens=["inline"],
        server__auth_token_file=str(token_file),
        server__auth_token_env="MY_TOKENS",
    )
    assert load_tokens(config.server) == [
        "inline",
        "from-file-1",
        "from-file-2",
        "from-env-1",
        "from-env-2",
    ]
    config.server.auth_token_file = str(tmp_path / "missing")
    with pytest.raises(AccessConfigError, match="cannot read server.auth_token_file"):
        load_tokens(config.server)


async def test_env_token_admits_over_rpc(monkeypatch):
    monkeypatch.setenv("LEANRPC_TOKENS", "env-token-a,env-token-b")
    async with running_server(make_config()) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            verifier = stub(channel)
            assert (
                await _status_of(verifier.Verify(one_snippet(CODE)))
                == grpc.StatusCode.UNAUTHENTICATED
            )
            response = await verifier.Verify(one_snippet(CODE), metadata=bearer("env-token-b"))
            assert response.results[0].status == pb.STATUS_VALID


async def test_refuses_to_start_without_tokens_unless_loopback_allowed(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    # Raised before anything binds or spawns, so the wildcard host is never opened.
    with pytest.raises(AccessConfigError, match="refusing to serve 0.0.0.0 without authentication"):
        await create_server(make_config(server__host="0.0.0.0"))
    with pytest.raises(AccessConfigError, match="refusing to serve 127.0.0.1"):
        await create_server(make_config(server__allow_unauthenticated_loopback=False))
    # Allowed: loopback by explicit config (the default), tokens anywhere, mTLS anywhere.
    # (Always one AuthInterceptor: without tokens it still refuses repeated authorization values.)
    assert [type(i).__name__ for i in build_access_interceptors(make_config().server)] == [
        "AuthInterceptor"
    ]
    assert (
        len(
            build_access_interceptors(
                make_config(server__host="0.0.0.0", server__auth_tokens=["x"]).server
            )
        )
        == 1
    )
    assert (
        len(
            build_access_interceptors(
                make_config(server__host="0.0.0.0", server__tls_client_ca="/ca.pem").server
            )
        )
        == 1
    )


async def test_loopback_without_tokens_is_open(monkeypatch):
    monkeypatch.delenv("LEANRPC_TOKENS", raising=False)
    async with running_server(make_config()) as app:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{app.port}") as channel:
            response = await stub(channel).Verify(one_snippet(CODE))
            assert response.results[0].status == pb.STATUS_VALID
