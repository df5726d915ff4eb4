"""The access interceptors: bearer tokens and per-client concurrency.

`build_access_interceptors(server_config)` decides, at startup, what guards
the server: tokens when any are configured; none only on loopback with
`allow_unauthenticated_loopback`, or when mTLS client certificates
authenticate every caller. Anything else refuses to start. A call with more
than one `authorization` value is UNAUTHENTICATED. The policy (tokens, client
identity, public methods) is edge/auth.py.

May import: grpc, leanrpc.config, leanrpc.errors, leanrpc.edge.{auth,errors},
leanrpc.edge.interceptors.wrap.
"""

from __future__ import annotations

import collections

import grpc

from ...config import ServerConfig
from ...errors import AuthError
from ..auth import (
    PUBLIC_METHOD_PREFIXES,
    AccessConfigError,
    authorization_values,
    bearer_token_valid,
    client_key,
    is_loopback,
    load_tokens,
)
from ..errors import abort_with
from .wrap import CallWrapper


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


def _deny(method: str, message: str = "missing or invalid bearer token (metadata 'authorization: Bearer <token>')"):

    async def unary(request, context):
        await abort_with(context, AuthError(message))

    async def stream(request_iterator, context):
        await abort_with(context, AuthError(message))

    if method.endswith("Stream") or method.endswith("/Formalize"):
        return grpc.stream_stream_rpc_method_handler(stream)
    return grpc.unary_unary_rpc_method_handler(unary)


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


class ClientConcurrencyInterceptor(CallWrapper):
    """At most `limit` RPCs in flight per client; the next gets RESOURCE_EXHAUSTED.

    A VerifyStream counts as one call for as long as it is open.
    """

    def __init__(self, limit: int, tokens_checked: bool = False) -> None:
        self.limit = limit
        self.tokens_checked = tokens_checked
        self.in_flight: collections.Counter[str] = collections.Counter()

    def wants(self, method: str) -> bool:
        return not method.startswith(PUBLIC_METHOD_PREFIXES)

    async def enter(self, details, context) -> str:
        key = client_key(details.invocation_metadata, context.peer(), self.tokens_checked)
        await self._admit(key, context)
        return key

    def exit(self, key, context, error) -> None:
        self._leave(key)

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
