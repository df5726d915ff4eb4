"""The access interceptors: bearer tokens and per-client concurrency.

`build_access_interceptors(server_config)` decides, at startup, what guards
the server: tokens when any are configured; none only on loopback with
`allow_unauthenticated_loopback`, or when mTLS client certificates
authenticate every caller. Anything else refuses to start. A call with more
than one `authorization` value is UNAUTHENTICATED. The policy (tokens, public
methods) is edge/auth.py; who a caller is, edge/identity.py.

A refusal has the cardinality of the method it refuses, and on a method the
client streams to it first reads (and drops, unparsed) what the client is
still sending, until it half-closes or `DRAIN_S` / `DRAIN_MESSAGES` /
`DRAIN_BYTES` run out: a grpc client whose write is in flight when the call
ends reports a local INTERNAL ("Internal error from Core") instead of the
server's status, so refusing at once made an unauthenticated VerifyStream
INTERNAL at random.

May import: grpc, leanrpc.config, leanrpc.errors, leanrpc.edge.{auth,errors,identity,limiter},
leanrpc.edge.interceptors.wrap.
"""

from __future__ import annotations

import asyncio

import grpc

from ...config import ServerConfig
from ...errors import AuthError
from ..auth import (
    PUBLIC_METHOD_PREFIXES,
    AccessConfigError,
    authorization_values,
    bearer_token_valid,
    is_loopback,
    load_tokens,
)
from ..errors import abort_with
from ..identity import CallerIdentity
from ..limiter import ClientLimiter
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
            message = f"{len(values)} 'authorization' values; send exactly one"
        elif not self._tokens or self._valid(values[0] if values else None):
            return await continuation(handler_call_details)
        else:
            message = "missing or invalid bearer token (metadata 'authorization: Bearer <token>')"
        # The refusal takes the real handler's shape (its kind); nothing of it runs.
        return _deny(await continuation(handler_call_details), message)


# How long, for how many messages and (unauthenticated: raw) bytes a refusal
# waits for the client to stop sending.
DRAIN_S = 5.0
DRAIN_MESSAGES = 10_000
DRAIN_BYTES = 16 * 2**20


def _deny(handler: grpc.RpcMethodHandler | None, message: str) -> grpc.RpcMethodHandler:
    """A handler of `handler`'s kind (unary-unary for an unknown method) that
    ends the call UNAUTHENTICATED with `message`."""
    error = AuthError(message)

    async def unary(request, context):
        await abort_with(context, error)

    async def streamed(request_iterator, context):
        await _drain(request_iterator.__aiter__().__anext__)
        await abort_with(context, error)

    # No deserializers: nothing the caller sent is parsed.
    if handler is None or not (handler.request_streaming or handler.response_streaming):
        return grpc.unary_unary_rpc_method_handler(unary)
    if not handler.request_streaming:
        return grpc.unary_stream_rpc_method_handler(unary)
    if not handler.response_streaming:
        return grpc.stream_unary_rpc_method_handler(streamed)
    return grpc.stream_stream_rpc_method_handler(streamed)


async def _drain(next_message) -> None:
    """Drops what the client sends until it half-closes, at most DRAIN_MESSAGES
    messages and DRAIN_S seconds (see the module doc). `next_message()` is the
    request iterator's `__anext__` or the context's `read`."""
    loop = asyncio.get_running_loop()
    until = loop.time() + DRAIN_S
    drained = 0
    for _ in range(DRAIN_MESSAGES):
        read = asyncio.ensure_future(next_message())
        done, _pending = await asyncio.wait([read], timeout=max(0.0, until - loop.time()))
        if not done:
            # Left pending: the call's end finishes it; its outcome is read then.
            read.add_done_callback(_consume)
            return
        if read.cancelled() or read.exception() is not None or read.result() is grpc.aio.EOF:
            return  # half-closed, or the call already ended
        message = read.result()
        drained += len(message) if isinstance(message, (bytes, bytearray)) else 0
        if drained > DRAIN_BYTES:
            return


def _consume(future: asyncio.Future) -> None:
    if not future.cancelled():
        future.exception()


def build_access_interceptors(server: ServerConfig) -> list[grpc.aio.ServerInterceptor]:
    """Interceptors for auth and per-client limits; raises AccessConfigError."""
    tokens = load_tokens(server)
    interceptors: list[grpc.aio.ServerInterceptor] = [AuthInterceptor(tokens)]
    if (
        not tokens
        and not (server.allow_unauthenticated_loopback and is_loopback(server.host))
        and not server.tls_client_ca
    ):
        raise AccessConfigError(
            f"refusing to serve {server.host} without authentication: set server.auth_tokens, "
            f"server.auth_token_file or ${server.auth_token_env}, or mTLS (server.tls_client_ca); "
            "unauthenticated access is allowed only on loopback with server.allow_unauthenticated_loopback"
        )
    if server.max_concurrent_per_client > 0:
        interceptors.append(
            ClientConcurrencyInterceptor(
                server.max_concurrent_per_client, CallerIdentity(tokens_checked=bool(tokens))
            )
        )
    return interceptors


class ClientConcurrencyInterceptor(CallWrapper):
    """At most `limit` RPCs in flight per client; the next gets RESOURCE_EXHAUSTED.

    The counting and the refusal text are edge/limiter.py's ClientLimiter,
    the same one the REST gateway uses.

    A VerifyStream counts as one call for as long as it is open. A refused
    call the client streams to is drained first, as AuthInterceptor's are.
    """

    def __init__(self, limit: int, identity: CallerIdentity) -> None:
        self.limiter = ClientLimiter(limit)  # the one limiter every door uses (edge/limiter.py)
        self.identity = identity
        self._client_streams: dict[
            str, bool
        ] = {}  # method -> whether the client streams (registered ones only)

    @property
    def limit(self) -> int:
        return self.limiter.limit

    @property
    def in_flight(self):
        return self.limiter.in_flight

    def wants(self, method: str) -> bool:
        return not method.startswith(PUBLIC_METHOD_PREFIXES)

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or not self.wants(handler_call_details.method):
            return handler
        self._client_streams[handler_call_details.method] = handler.request_streaming
        return self.wrapped(handler, handler_call_details.method)

    async def enter(self, details, context) -> str:
        key = self.identity.of_call(context)
        await self._admit(key, context, drain=self._client_streams.get(details.method, False))
        return key

    def exit(self, key, context, error) -> None:
        self._leave(key)

    async def _admit(self, key: str, context, *, drain: bool = False) -> None:
        refused = self.limiter.refusal(key)
        if refused is not None:
            if drain:  # refused whatever happens meanwhile: its messages are dropped
                await _drain(context.read)
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, refused.message)
        self.limiter.enter(key)

    def _leave(self, key: str) -> None:
        self.limiter.leave(key)
