"""CallWrapper wraps a method's handler once and reuses it (issue 28: no
inspection or closures per call); `enter` sees the method only; the cache is
bounded although refusals make a new handler per call."""

from __future__ import annotations

from types import SimpleNamespace

import grpc

from leanrpc.edge.interceptors.wrap import _CACHED_HANDLERS, CallWrapper


class _Seen(CallWrapper):
    def __init__(self) -> None:
        self.entered = []

    async def enter(self, details, context):
        self.entered.append(details)
        return None


async def _behavior(request, context):
    return request * 2


async def test_a_method_s_handler_is_wrapped_once_and_reused():
    wrapper = _Seen()
    handler = grpc.unary_unary_rpc_method_handler(_behavior)

    async def continuation(details):
        return handler

    first = await wrapper.intercept_service(
        continuation, SimpleNamespace(method="/a.B/C", invocation_metadata=())
    )
    again = await wrapper.intercept_service(
        continuation,
        SimpleNamespace(method="/a.B/C", invocation_metadata=(("authorization", "x"),)),
    )
    other = await wrapper.intercept_service(
        continuation, SimpleNamespace(method="/a.B/D", invocation_metadata=())
    )
    assert first is again and other is not first
    assert first.unary_unary is not _behavior  # wrapped, not passed through
    assert await first.unary_unary(21, None) == 42
    assert [d.method for d in wrapper.entered] == ["/a.B/C"]
    assert not hasattr(
        wrapper.entered[0], "invocation_metadata"
    )  # per-call facts come from the context


async def test_new_handlers_per_call_do_not_grow_the_cache_without_bound():
    wrapper = _Seen()
    for n in range(3 * _CACHED_HANDLERS):
        handler = grpc.unary_unary_rpc_method_handler(lambda request, context, n=n: None)

        async def continuation(details, handler=handler):
            return handler

        await wrapper.intercept_service(
            continuation, SimpleNamespace(method="/a.B/C", invocation_metadata=())
        )
    assert len(wrapper._wrapped_handlers) <= _CACHED_HANDLERS
