"""Bearer-token authentication for every RPC except health checks."""

from __future__ import annotations

import hmac
import os

import grpc

from ..config import ServerConfig

# Health and reflection stay public so load balancers and grpcurl work.
PUBLIC_METHOD_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


def load_tokens(server: ServerConfig) -> list[str]:
    tokens = [t for t in server.auth_tokens if t]
    if server.auth_token_file:
        with open(server.auth_token_file, encoding="utf-8") as f:
            tokens += [line.strip() for line in f if line.strip() and not line.startswith("#")]
    if server.auth_token_env:
        tokens += [t.strip() for t in os.environ.get(server.auth_token_env, "").split(",") if t.strip()]
    return tokens


class AuthInterceptor(grpc.aio.ServerInterceptor):
    """Rejects calls without `authorization: Bearer <token>` (UNAUTHENTICATED)."""

    def __init__(self, tokens: list[str]) -> None:
        self._tokens = [t.encode() for t in tokens]

    def _valid(self, header: str | None) -> bool:
        if not header or not header.startswith("Bearer "):
            return False
        presented = header[len("Bearer "):].strip().encode()
        # Compare against every token in constant time.
        return any(hmac.compare_digest(presented, token) for token in self._tokens)

    async def intercept_service(self, continuation, handler_call_details):
        method = handler_call_details.method
        if method.startswith(PUBLIC_METHOD_PREFIXES):
            return await continuation(handler_call_details)
        metadata = dict(handler_call_details.invocation_metadata or ())
        if self._valid(metadata.get("authorization")):
            return await continuation(handler_call_details)
        return _deny(method)


def _deny(method: str):
    message = "missing or invalid bearer token (metadata 'authorization: Bearer <token>')"

    async def unary(request, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    async def stream(request_iterator, context):
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

    if method.endswith("Stream") or method.endswith("/Formalize"):
        return grpc.stream_stream_rpc_method_handler(stream)
    return grpc.unary_unary_rpc_method_handler(unary)
