"""Lenient request parsing: a request that does not parse gets INVALID_ARGUMENT.

gRPC answers a request its deserializer rejects (invalid UTF-8 in a string
field, broken wire format) with a generic UNKNOWN. `LenientRegistrar` takes
a generated method table (so new RPCs are covered without edits here) and
registers it with a deserializer that turns the failure into a marker, which
the wrapped behavior answers with INVALID_ARGUMENT and the parser's reason.
It is a registrar rather than a `ServerInterceptor` because the
deserializer is fixed at registration; an interceptor cannot swap it.

May import: grpc, leanrpc.errors, leanrpc.edge.errors.
"""

from __future__ import annotations

import grpc

from ...errors import RequestError
from ..errors import abort_with


class _Undecodable:
    def __init__(self, reason: str) -> None:
        self.reason = reason


class LenientRegistrar:
    """Takes the generated method table (so new RPCs are covered without
    edits here) and registers it with lenient request parsing."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers) -> None:
        pass  # rebuilt from the method table in add_registered_method_handlers

    def add_registered_method_handlers(self, service: str, method_handlers: dict) -> None:
        lenient = {name: lenient_handler(handler) for name, handler in method_handlers.items()}
        self._server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(service, lenient),)
        )
        self._server.add_registered_method_handlers(service, lenient)


def lenient_handler(handler):
    parse = handler.request_deserializer

    def deserialize(data: bytes):
        try:
            return parse(data)
        except Exception as exc:  # protobuf DecodeError; anything else is as bad
            return _Undecodable(f"the request does not parse: {exc}")

    if handler.unary_unary is not None:
        behavior = handler.unary_unary

        async def unary_unary(request, context):
            if isinstance(request, _Undecodable):
                await abort_with(context, RequestError(request.reason))
            return await behavior(request, context)

        return handler._replace(request_deserializer=deserialize, unary_unary=unary_unary)
    if handler.stream_stream is not None:
        behavior = handler.stream_stream

        async def checked(request_iterator):
            async for request in request_iterator:
                if isinstance(request, _Undecodable):
                    raise RequestError(request.reason)
                yield request

        async def stream_stream(request_iterator, context):
            async for response in behavior(checked(request_iterator), context):
                yield response

        return handler._replace(request_deserializer=deserialize, stream_stream=stream_stream)
    return handler  # no other shapes in this service
