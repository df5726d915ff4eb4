"""The one helper that runs code around a gRPC handler's behavior.

`CallWrapper` is the base of every interceptor that acts around a call. A
subclass says which calls it wants (`wants`) and what happens when a call
starts (`enter`, which may abort it), for each response sent (`sent`), and
when the call ends, however it ends (`exit`, with the exception if any).
Unary and streaming behaviors are wrapped the same way; a handler that is
not async (none in this server) is passed through untouched.

A handler is wrapped once per method and reused for every call (issue 28:
no inspection and no closures per call), so `enter` gets the method's
details (`.method` only), never a call's metadata: per-call facts come from
the `context`. The cache is bounded (refusals make new handlers per call).

May import: grpc and the standard library.
"""

from __future__ import annotations

import collections
import inspect

import grpc

_BEHAVIORS = ("unary_unary", "unary_stream", "stream_unary", "stream_stream")
# Wrapped handlers kept per wrapper; cleared when full.
_CACHED_HANDLERS = 256

MethodDetails = collections.namedtuple("MethodDetails", "method")


class CallWrapper(grpc.aio.ServerInterceptor):
    """An interceptor that runs `enter`/`sent`/`exit` around each call it wants."""

    def wants(self, method: str) -> bool:
        return True

    async def enter(self, details, context) -> object:
        """Runs before the behavior; the return value is handed to `sent` and
        `exit`. Raising (or aborting) here ends the call without `exit`."""
        return None

    def sent(self, token: object, response) -> None:
        """Runs for every response the behavior returns or yields."""

    def exit(self, token: object, context, error: BaseException | None) -> None:
        """Runs once when a call that entered ends (error: None when it returned)."""

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or not self.wants(handler_call_details.method):
            return handler
        return self.wrapped(handler, handler_call_details.method)

    def wrapped(self, handler: grpc.RpcMethodHandler, method: str) -> grpc.RpcMethodHandler:
        """`wrap_handler` for `method`, made once and reused."""
        cache = self.__dict__.get("_wrapped_handlers")
        if cache is None:
            cache = self.__dict__["_wrapped_handlers"] = {}
        key = (method, handler)
        found = cache.get(key)
        if found is None:
            if len(cache) >= _CACHED_HANDLERS:
                cache.clear()
            found = cache[key] = wrap_handler(handler, self, MethodDetails(method))
        return found


def wrap_handler(
    handler: grpc.RpcMethodHandler, wrapper: CallWrapper, details
) -> grpc.RpcMethodHandler:
    """`handler` with its behavior run inside `wrapper`'s enter/sent/exit."""
    for field in _BEHAVIORS:
        behavior = getattr(handler, field)
        if behavior is None:
            continue
        if inspect.isasyncgenfunction(behavior):
            return handler._replace(**{field: _around_stream(behavior, wrapper, details)})
        if inspect.iscoroutinefunction(behavior):
            return handler._replace(**{field: _around_unary(behavior, wrapper, details)})
        return handler
    return handler


def _around_unary(behavior, wrapper: CallWrapper, details):
    async def unary(request, context):
        token = await wrapper.enter(details, context)
        error: BaseException | None = None
        try:
            response = await behavior(request, context)
            if response is not None:
                wrapper.sent(token, response)
            return response
        except BaseException as exc:
            error = exc
            raise
        finally:
            wrapper.exit(token, context, error)

    return unary


def _around_stream(behavior, wrapper: CallWrapper, details):
    async def stream(request, context):
        token = await wrapper.enter(details, context)
        error: BaseException | None = None
        try:
            async for response in behavior(request, context):
                wrapper.sent(token, response)
                yield response
        except BaseException as exc:
            error = exc
            raise
        finally:
            wrapper.exit(token, context, error)

    return stream
