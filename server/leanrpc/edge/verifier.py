"""The Verifier gRPC servicer: protobuf at the door, internal types inside."""

from __future__ import annotations

import asyncio
import logging
import time

import grpc
import lz4.frame

from .. import __version__
from ..errors import NotFoundError, OverloadedError, RequestError
from ..results import Position, Status, VerifyResult
from ..services.extract import ExtractService
from ..services.verify import VerifyOptions, VerifyService
from ..v1 import verifier_pb2 as pb
from ..v1 import verifier_pb2_grpc as pb_grpc
from . import convert
from .errors import maps_errors

log = logging.getLogger("leanrpc.edge")


def _deadline(context: grpc.aio.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    if remaining is None:
        return None
    return time.monotonic() + remaining


class VerifierServicer(pb_grpc.VerifierServicer):
    def __init__(self, verify: VerifyService, extract: ExtractService, *, sandbox_description: str = "", native: bool = False) -> None:
        self._verify = verify
        self._extract = extract
        self._config = verify.config
        self._sandbox = sandbox_description
        self._native = native

    @maps_errors
    async def Verify(self, request: pb.VerifyRequest, context):
        snippets = list(request.snippets)
        if not snippets:
            raise RequestError("the batch is empty: send at least one snippet")
        limit = self._config.server.max_snippets_per_batch
        if len(snippets) > limit:
            raise RequestError(f"the batch has {len(snippets)} snippets, over the limit of {limit}; split it or use VerifyStream")
        options = convert.options_from_pb(request.options if request.HasField("options") else None)
        for index, snippet in enumerate(snippets):
            try:
                self._verify.validate(snippet.code, options)
            except RequestError as exc:
                # Keep the subclass (an unknown session is NOT_FOUND, not INVALID_ARGUMENT).
                kind = NotFoundError if isinstance(exc, NotFoundError) else RequestError
                raise kind(f"snippet {index} ({snippet.id or 'no id'}): {exc.message}") from exc
        self._verify.admission(len(snippets))
        deadline = _deadline(context)
        tasks = [
            asyncio.ensure_future(
                self._verify.verify(snippet.id or str(index), snippet.code, options, deadline=deadline)
            )
            for index, snippet in enumerate(snippets)
        ]
        try:
            results = await asyncio.gather(*tasks)
        except BaseException:
            for task in tasks:
                task.cancel()
            raise
        return pb.VerifyResponse(results=[convert.result_to_pb(r) for r in results])

    async def VerifyStream(self, request_iterator, context):
        out: asyncio.Queue = asyncio.Queue()
        running: dict[str, asyncio.Task] = {}
        reading_done = object()

        def emit(result: VerifyResult) -> None:
            running.pop(result.id, None)
            out.put_nowait(pb.VerifyStreamResponse(result=convert.result_to_pb(result)))

        async def run_one(snippet_id: str, code: str, opts: VerifyOptions) -> None:
            try:
                result = await self._verify.verify(snippet_id, code, opts, deadline=_deadline(context))
            except asyncio.CancelledError:
                result = VerifyResult(id=snippet_id, status=Status.CANCELLED, error="cancelled by the client")
            except OverloadedError as exc:
                # A stream cannot fail one snippet with a status code: the
                # code goes into the error text, which clients parse.
                result = VerifyResult(id=snippet_id, status=Status.REJECTED, error=convert.overloaded_error_text(exc))
            except RequestError as exc:
                result = VerifyResult(id=snippet_id, status=Status.REJECTED, error=exc.message)
            except Exception as exc:  # not serving, internal: still one answer
                result = VerifyResult(id=snippet_id, status=Status.REJECTED, error=str(exc))
            emit(result)

        async def read_requests() -> None:
            options = VerifyOptions()
            try:
                async for message in request_iterator:
                    kind = message.WhichOneof("kind")
                    if kind == "options":
                        options = convert.options_from_pb(message.options)
                    elif kind == "snippet":
                        snippet = message.snippet
                        if not snippet.id:
                            out.put_nowait(pb.VerifyStreamResponse(result=convert.result_to_pb(
                                VerifyResult(id="", status=Status.REJECTED, error="VerifyStream snippets need a non-empty id"))))
                        elif snippet.id in running:
                            out.put_nowait(pb.VerifyStreamResponse(result=convert.result_to_pb(
                                VerifyResult(id=snippet.id, status=Status.REJECTED,
                                             error="duplicate id: a snippet with this id is in flight"))))
                        else:
                            running[snippet.id] = asyncio.ensure_future(run_one(snippet.id, snippet.code, options))
                    elif kind == "cancel_id":
                        task = running.get(message.cancel_id)
                        if task is not None:
                            task.cancel()
            finally:
                out.put_nowait(reading_done)

        reader = asyncio.ensure_future(read_requests())
        finished_reading = False
        try:
            while True:
                if finished_reading and not running and out.empty():
                    break
                item = await out.get()
                if item is reading_done:
                    finished_reading = True
                    try:
                        await reader
                    except RequestError as exc:
                        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, exc.message)
                    continue
                yield item
        finally:
            reader.cancel()
            for task in list(running.values()):
                task.cancel()

    @maps_errors
    async def Extract(self, request: pb.ExtractRequest, context):
        options = convert.options_from_pb(
            request.options if request.HasField("options") else None, default_infotree="original"
        )
        result, declarations = await self._extract.extract(request.code, options, deadline=_deadline(context))
        response = pb.ExtractResponse(result=convert.result_to_pb(result))
        decls = [_declaration_to_pb(d) for d in declarations]
        if request.lz4:
            payload = pb.ExtractedDeclarations(declarations=decls).SerializeToString()
            response.compressed = lz4.frame.compress(payload)
        else:
            response.declarations.extend(decls)
        return response

    @maps_errors
    async def GetServerInfo(self, request, context):
        snapshot = self._verify.info()
        info = pb.ServerInfo(
            version=__version__,
            workers=snapshot.size,
            worker_states=snapshot.worker_states,
            queue_depth=snapshot.queue_depth,
            queue_limit=snapshot.queue_limit,
            serving=snapshot.serving,
            not_serving_reason=snapshot.not_serving_reason,
            native_core=self._native,
            sandbox=self._sandbox,
        )
        identity = convert.identity_to_pb(snapshot.identity)
        if identity is not None:
            info.verifier.CopyFrom(identity)
        return info

    # ---- sessions (docs/REUSE.md) ----

    @maps_errors
    async def OpenSession(self, request: pb.OpenSessionRequest, context):
        options = convert.options_from_pb(request.options if request.HasField("options") else None)
        ran = await self._verify.sessions.open(request.name, request.code, options, deadline=_deadline(context))
        return convert.session_result_to_pb(ran)

    @maps_errors
    async def RunInSession(self, request: pb.RunInSessionRequest, context):
        options = convert.options_from_pb(request.options if request.HasField("options") else None)
        env = request.env if request.HasField("env") else None
        ran = await self._verify.sessions.run(request.session, request.code, env, options, deadline=_deadline(context))
        return convert.session_result_to_pb(ran)

    @maps_errors
    async def CloseSession(self, request: pb.CloseSessionRequest, context):
        return pb.CloseSessionResponse(closed=self._verify.sessions.close(request.session))


def _position(p: Position) -> pb.Position:
    return pb.Position(line=p.line, column=p.column)


def _declaration_to_pb(declaration) -> pb.ExtractedDeclaration:
    return pb.ExtractedDeclaration(
        name=declaration.name,
        start=_position(declaration.start),
        end=_position(declaration.end),
        steps=[
            pb.TacticStep(
                text=step.text,
                start=_position(step.start),
                end=_position(step.end),
                goals_before=list(step.goals_before),
                goals_after=list(step.goals_after),
                kind=step.kind or "",
            )
            for step in declaration.steps
        ],
    )


# ---- registration -------------------------------------------------------------


def add_verifier_to_server(servicer: pb_grpc.VerifierServicer, server: grpc.aio.Server) -> None:
    """Registers the Verifier so that a request which does not parse (invalid
    UTF-8 in a string field, broken wire format) gets INVALID_ARGUMENT with the
    parser's reason, not gRPC's generic UNKNOWN."""
    pb_grpc.add_VerifierServicer_to_server(servicer, _LenientRegistrar(server))


class _Undecodable:
    def __init__(self, reason: str) -> None:
        self.reason = reason


class _LenientRegistrar:
    """Takes the generated method table (so new RPCs are covered without
    edits here) and registers it with lenient request parsing."""

    def __init__(self, server: grpc.aio.Server) -> None:
        self._server = server

    def add_generic_rpc_handlers(self, handlers) -> None:
        pass  # rebuilt from the method table in add_registered_method_handlers

    def add_registered_method_handlers(self, service: str, method_handlers: dict) -> None:
        lenient = {name: _lenient_handler(handler) for name, handler in method_handlers.items()}
        self._server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, lenient),))
        self._server.add_registered_method_handlers(service, lenient)


def _lenient_handler(handler):
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
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.reason)
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
