"""Access control at the edge: bearer tokens and per-client concurrency.

`build_access_interceptors(server_config)` decides, at startup, what guards
the server: tokens when any are configured; none only on loopback with
`allow_unauthenticated_loopback`, or when mTLS client certificates
authenticate every caller. Anything else refuses to start. A token file
readable by group or others refuses to start too (as ssh does with keys); a
call with more than one `authorization` value is UNAUTHENTICATED.

`client_identity(context, tokens_checked)` says who a call counts against for
per-client limits and fair queuing: the (hashed) token only when tokens are
checked, else the peer address, so a made-up token buys no new identity.

Owns authentication and per-client admission; may import config and grpc.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import inspect
import os
import stat

import grpc

from ..config import ServerConfig
from ..errors import AuthError
from .errors import abort_with

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
        check_private(server.auth_token_file, "server.auth_token_file")
        try:
            with open(server.auth_token_file, encoding="utf-8") as f:
                tokens += [line.strip() for line in f if line.strip() and not line.startswith("#")]
        except OSError as exc:
            raise AccessConfigError(f"cannot read server.auth_token_file {server.auth_token_file!r}: {exc.strerror}") from exc
    if server.auth_token_env:
        tokens += [t.strip() for t in os.environ.get(server.auth_token_env, "").split(",") if t.strip()]
    return tokens


def check_private(path: str, what: str) -> None:
    """AccessConfigError unless `path` is readable by its owner only."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise AccessConfigError(f"cannot read {what} {path!r}: {exc.strerror}") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AccessConfigError(
            f"{what} {path!r} is readable by group or others (mode {stat.S_IMODE(mode):04o}); "
            f"run chmod 600 {path!r}"
        )


def authorization_values(metadata) -> list[str]:
    return [value for key, value in (metadata or ()) if key == "authorization"]


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls without exactly one `authorization: Bearer <token>` (UNAUTHENTICATED).

    With no tokens (loopback or mTLS only), it only rejects repeated values.
    """

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = [t.encode() for t in tokens]

    def _valid(self, header: str | None) -> bool:
        return bearer_token_valid(header, self._tokens)

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        if method.startswith(PUBLIC_METHOD_PREFIXES):
            return await continuation(handler_call_details)
        values = authorization_values(handler_call_details.invocation_metadata)
        if len(values) > 1:
            return _deny(method, f"{len(values)} 'authorization' values; send exactly one")
        if not self._tokens or self._valid(values[0] if values else None):
            return await continuation(handler_call_details)
        return _deny(method)


def bearer_token_valid(header: str | None, tokens: list[bytes]) -> bool:
    """Whether `Bearer <token>` names one of `tokens` (shared by gRPC and the REST gateway)."""
    if not header or not header.startswith("Bearer "):
        return False
    presented = header[len("Bearer "):].strip().encode()
    # Compare against every token in constant time.
    return any(hmac.compare_digest(presented, token) for token in tokens)


def _deny(method: str, message: str = "missing or invalid bearer token (metadata 'authorization: Bearer <token>')"):

    async def unary(request, context):
        await abort_with(context, AuthError(message))

    async def stream(request_iterator, context):
        await abort_with(context, AuthError(message))

    if method.endswith("Stream") or method.endswith("/Formalize"):
        return grpc.stream_stream_rpc_method_handler(stream)
    return grpc.unary_unary_rpc_method_handler(unary)


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS


def build_access_interceptors(server: ServerConfig) -> list[grpc.aio.ServerInterceptor]:
    """Interceptors for auth and per-client limits; raises AccessConfigError."""
    tokens = load_tokens(server)
    interceptors: list[grpc.aio.ServerInterceptor] = [AuthInterceptor(tokens)]
    if not tokens and not (server.allow_unauthenticated_loopback and is_loopback(server.host)) and not server.tls_client_ca:
        raise AccessConfigError(
            f"refusing to serve {server.host} without authentication: set server.auth_tokens, "
            f"server.auth_token_file or ${server.auth_token_env}, or mTLS (server.tls_client_ca); "
            "unauthenticated access is allowed only on loopback with server.allow_unauthenticated_loopback"
        )
    if server.max_concurrent_per_client > 0:
        interceptors.append(ClientConcurrencyInterceptor(server.max_concurrent_per_client, tokens_checked=bool(tokens)))
    return interceptors


def client_identity(context, tokens_checked: bool) -> str:
    """Who a call counts against (per-client limits, fair queuing); see the module doc."""
    return client_key(context.invocation_metadata(), context.peer(), tokens_checked)


def client_key(metadata, peer: str, tokens_checked: bool = True) -> str:
    """The token (hashed) when tokens are checked (AuthInterceptor ran), else the peer address."""
    values = authorization_values(metadata)
    header = values[0] if len(values) == 1 else ""
    if tokens_checked and header.startswith("Bearer "):
        return "token:" + hashlib.sha256(header[len("Bearer "):].strip().encode()).hexdigest()[:16]
    # "ipv4:127.0.0.1:53412" -> "ipv4:127.0.0.1": one client, many ports.
    return "peer:" + peer.rpartition(":")[0] if peer.count(":") >= 2 else "peer:" + peer


class ClientConcurrencyInterceptor(grpc.aio.ServerInterceptor):
    """At most `limit` RPCs in flight per client; the next gets RESOURCE_EXHAUSTED.

    A VerifyStream counts as one call for as long as it is open.
    """

    def __init__(self, limit: int, tokens_checked: bool = False) -> None:
        self.limit = limit
        self.tokens_checked = tokens_checked
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
                key = client_key(metadata, context.peer(), self.tokens_checked)
                await self._admit(key, context)
                try:
                    async for item in behavior(request, context):
                        yield item
                finally:
                    self._leave(key)

            return guarded_stream

        async def guarded(request, context):
            key = client_key(metadata, context.peer(), self.tokens_checked)
            await self._admit(key, context)
            try:
                return await behavior(request, context)
            finally:
                self._leave(key)

        return guarded
