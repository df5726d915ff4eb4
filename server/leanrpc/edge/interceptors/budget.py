"""The byte budget (edge/budget.py) at the gRPC door: request messages charged before they are parsed.

What grpc aio lets Python see, and so where the count can honestly happen:
C-core reads a whole request message (at most
`grpc.max_receive_message_length` = server.max_message_mb) before Python
sees a byte of it, and Python has no hook into C-core's buffers (its
ResourceQuota is not exposed to Python). Interceptors see messages after
they are deserialized. So this interceptor takes the deserializer out of
each handler (the behavior receives the raw bytes) and deserializes itself,
after charging the peer address's budget: a message past the budget is
refused with RESOURCE_EXHAUSTED and RetryInfo (edge/errors.py) before it is
parsed, and nothing the server would build from it (the parsed message, its
strings) exists. What C-core itself buffers is bounded by the message size
and the number of concurrent streams, not by this budget.

A message is charged what it really costs, measured (issue 44,
benchmarks/memory_bench.py): its raw bytes (grpc keeps them for the whole
call), the parsed message (upb copies string fields into its arena: 1x), and
the Python strings the servicer reads from it (`decoded_bound`: 1x, 2x or
4x by the widest character). A unary request is charged for the whole call;
a streamed one from its arrival until the servicer asks for the next message
(what a stream holds after that is bounded by its own flow control).

A refused unary request is aborted here, in the handler's own task. A refused
streamed message is not: `BudgetExceeded` is raised to whoever reads the
stream, and the servicer ends the call from its handler's task (VerifyStream
and Expand: edge/streaming.py, after the requests already running are
answered; Formalize: edge/formalizer.py). Their readers are tasks of their
own, and grpc aio's `abort` from such a task, while the handler's task was
sending an answer, left the client waiting out its deadline in about one run
in ten (tests/memory/test_grpc_budget.py, 2026-12-07).

May import: grpc, edge.budget, edge.errors.
"""

from __future__ import annotations

import inspect

import grpc

from ..budget import BudgetExceeded, ByteBudget, decoded_bound
from ..errors import abort_with

__all__ = ["BudgetInterceptor", "peer_address", "message_cost"]

_CACHED_HANDLERS = 256  # wrapped handlers kept, as edge/interceptors/wrap.py does


def peer_address(peer: str) -> str:
    """grpc's peer string ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000") without its port."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1 : rest.find("]")]
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    return peer  # unix sockets and the like: the whole string


def message_cost(raw: bytes) -> int:
    """Bytes a request message holds: raw, parsed, and its strings as Python reads them."""
    return 2 * len(raw) + decoded_bound(raw, json=False)


class BudgetInterceptor(grpc.aio.ServerInterceptor):
    """Charges every request message to its peer address before it is parsed."""

    def __init__(self, budget: ByteBudget) -> None:
        self.budget = budget
        self._wrapped: dict = {}

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None or handler.request_deserializer is None:
            return handler
        found = self._wrapped.get(handler)
        if found is None:
            if len(self._wrapped) >= _CACHED_HANDLERS:  # handlers made per call: bounded
                self._wrapped.clear()
            found = self._wrapped[handler] = self._wrap(handler)
        return found

    def _wrap(self, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        deserialize = handler.request_deserializer
        budget = self.budget
        if handler.unary_unary is not None:
            behavior = handler.unary_unary

            async def unary_unary(raw, context):
                with budget.ticket(peer_address(context.peer())) as ticket:
                    if not await _charge(ticket, raw, context):
                        return None
                    return await behavior(deserialize(raw), context)

            return handler._replace(request_deserializer=None, unary_unary=unary_unary)
        if handler.unary_stream is not None:
            behavior = handler.unary_stream

            async def unary_stream(raw, context):
                with budget.ticket(peer_address(context.peer())) as ticket:
                    if not await _charge(ticket, raw, context):
                        return
                    async for response in behavior(deserialize(raw), context):
                        yield response

            async def unary_writer(raw, context):  # a servicer that answers by context.write
                with budget.ticket(peer_address(context.peer())) as ticket:
                    if await _charge(ticket, raw, context):
                        await behavior(deserialize(raw), context)

            # grpc runs an async generator and a context.write coroutine differently (and
            # refuses a mix of the two), so the wrapper keeps the servicer's own kind.
            wrapped = unary_stream if inspect.isasyncgenfunction(behavior) else unary_writer
            return handler._replace(request_deserializer=None, unary_stream=wrapped)
        field = "stream_unary" if handler.stream_unary is not None else "stream_stream"
        behavior = getattr(handler, field)

        def charged(raw_messages, context):
            async def messages():
                with budget.ticket(peer_address(context.peer())) as ticket:
                    async for raw in raw_messages:
                        ticket.close()  # the previous message was handed on
                        # Raised to the servicer's reader (BudgetExceeded), not aborted here:
                        # see the module docstring.
                        ticket.acquire(message_cost(raw))
                        message = deserialize(raw)
                        del raw
                        yield message

            return messages()

        if field == "stream_unary":

            async def stream_unary(raw_messages, context):
                return await behavior(charged(raw_messages, context), context)

            return handler._replace(request_deserializer=None, stream_unary=stream_unary)

        async def stream_stream(raw_messages, context):
            async for response in behavior(charged(raw_messages, context), context):
                yield response

        async def stream_writer(raw_messages, context):  # answers by context.write
            await behavior(charged(raw_messages, context), context)

        wrapped = stream_stream if inspect.isasyncgenfunction(behavior) else stream_writer
        return handler._replace(request_deserializer=None, stream_stream=wrapped)


async def _charge(ticket, raw: bytes, context) -> bool:
    """Charges `raw`'s cost; on a refusal aborts the call (RESOURCE_EXHAUSTED) and returns False."""
    try:
        ticket.acquire(message_cost(raw))
    except BudgetExceeded as exc:
        await abort_with(context, exc)  # raises grpc's AbortError
        return False
    return True
