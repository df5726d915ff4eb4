"""Access control at the edge: bearer tokens and per-client concurrency.

`build_access_interceptors(server_config)` decides, at startup, what guards
the server: tokens when any are configured; none only on loopback with
`allow_unauthenticated_loopback`, or when mTLS client certificates
authenticate every caller. Anything else refuses to start.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import inspect
import os

import grpc

from ..config import ServerConfig

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


class AccessConfigError(ValueError):
    """The server's access settings are unsafe or unreadable; it will not start."""

# Health and reflection stay public so load balancers and grpcurl work.
PUBLIC_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def load_tokens(server: ServerConfig) -> list[str]:
    """Tokens from the config, `auth_token_file` (one per line, # comments) and
    `auth_token_env` (comma-separated)."""
    tokens = [t for t in server.auth_tokens if t]
    if server.auth_token_file:
        try:
            with open(server.auth_token_file, encoding="utf-8") as f:
                tokens += [line.strip() for line in f if line.strip() and not line.startswith("#")]
        except OSError as exc:
            raise AccessConfigError(f"cannot read server.auth_token_file {server.auth_token_file!r}: {exc.strerror}") from exc
    if server.auth_token_env:
        tokens += [t.strip() for t in os.environ.get(server.auth_token_env, "").split(",") if t.strip()]
    return tokens


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls without `authorization: Bearer <token>` (UNAUTHENTICATED)."""

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = [t.encode() for t in tokens]

    def _valid(self, header: str | None) -> bool:
        return bearer_token_valid(header, self._tokens)

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        if method.startswith(PUBLIC_METHOD_PREFIXES):
            return await continuation(handler_call_details)
        metadata = dict(handler_call_details.invocation_metadata or ())
        if self._valid(metadata.get("authorization")):
            return await continuation(handler_call_details)
        return _deny(method)


def bearer_token_valid(header: str | None, tokens: list[bytes]) -> bool:
    """Whether `Bearer <token>` names one of `tokens` (shared by gRPC and the REST gateway)."""
    if not header or not header.startswith("Bearer "):
        return False
    presented = header[len("Bearer "):].strip().encode()
    # Compare against every token in constant time.
    return any(hmac.compare_digest(presented, token) for token in tokens)


def _deny(method: str):
    message = "missing or invalid bearer token (metadata 'authorization: Bearer <token>')"

    async def unary(request, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def stream(request_iterator, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    if method.endswith("Stream") or method.endswith("/Formalize"):
        return grpc.stream_stream_rpc_method_handler(stream)
    return grpc.unary_unary_rpc_method_handler(unary)


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS


def build_access_interceptors(server: ServerConfig) -> list[grpc.aio.ServerInterceptor]:
    """Interceptors for auth and per-client limits; raises AccessConfigError."""
    tokens = load_tokens(server)
    interceptors: list[grpc.aio.ServerInterceptor] = []
    if tokens:
        interceptors.append(AuthInterceptor(tokens))
    elif not (server.allow_unauthenticated_loopback and is_loopback(server.host)) and not server.tls_client_ca:
        raise AccessConfigError(
            f"refusing to serve {server.host} without authentication: set server.auth_tokens, "
            f"server.auth_token_file or ${server.auth_token_env}, or mTLS (server.tls_client_ca); "
            "unauthenticated access is allowed only on loopback with server.allow_unauthenticated_loopback"
        )
    if server.max_concurrent_per_client > 0:
        interceptors.append(ClientConcurrencyInterceptor(server.max_concurrent_per_client))
    return interceptors


def client_key(metadata, peer: str) -> str:
    """Who a call counts against: its token (hashed) if any, else its peer address."""
    header = dict(metadata or ()).get("authorization", "")
    if header.startswith("Bearer "):
        return "token:" + hashlib.sha256(header[len("Bearer "):].strip().encode()).hexdigest()[:16]
    # "ipv4:127.0.0.1:53412" -> "ipv4:127.0.0.1": one client, many ports.
    return "peer:" + peer.rpartition(":")[0] if peer.count(":") >= 2 else "peer:" + peer


class ClientConcurrencyInterceptor(grpc.aio.ServerInterceptor):
    """At most `limit` RPCs in flight per client; the next gets RESOURCE_EXHAUSTED.

    A VerifyStream counts as one call for as long as it is open.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight: collections.Counter[str] = collections.Counter()

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith(PUBLIC_METHOD_PREFIXES):
            return handler
        metadata = handler_call_details.invocation_metadata
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                self._guard(handler.unary_unary, metadata), handler.request_deserializer, handler.response_serializer)
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                self._guard(handler.unary_stream, metadata), handler.request_deserializer, handler.response_serializer)
        if handler.stream_unary:
            return grpc.stream_unary_rpc_method_handler(
                self._guard(handler.stream_unary, metadata), handler.request_deserializer, handler.response_serializer)
        return grpc.stream_stream_rpc_method_handler(
            self._guard(handler.stream_stream, metadata), handler.request_deserializer, handler.response_serializer)

    async def _admit(self, key: str, context) -> None:
        if self.in_flight[key] >= self.limit:
            await context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"this client already has {self.in_flight[key]} calls in flight, the limit "
                f"(server.max_concurrent_per_client) is {self.limit}; wait for one to finish",
            )
        self.in_flight[key] += 1

    def _leave(self, key: str) -> None:
        self.in_flight[key] -= 1
        if self.in_flight[key] <= 0:
            del self.in_flight[key]

    def _guard(self, behavior, metadata):
        if inspect.isasyncgenfunction(behavior):

            async def guarded_stream(request, context):
                key = client_key(metadata, context.peer())
                await self._admit(key, context)
                try:
                    async for item in behavior(request, context):
                        yield item
                finally:
                    self._leave(key)

            return guarded_stream

        async def guarded(request, context):
            key = client_key(metadata, context.peer())
            await self._admit(key, context)
            try:
                return await behavior(request, context)
            finally:
                self._leave(key)

        return guarded
