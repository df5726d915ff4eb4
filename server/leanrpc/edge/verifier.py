"""The Verifier gRPC servicer: protobuf at the door, internal types inside."""

from __future__ import annotations

import asyncio
import logging
import time

import grpc
import lz4.frame

from .. import __version__
from ..errors import OverloadedError, RequestError
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
                raise RequestError(f"snippet {index} ({snippet.id or 'no id'}): {exc.message}") from exc
        pool = self._verify.pool
        if pool.queue_depth + len(snippets) > self._config.pool.queue_limit:
            raise OverloadedError(
                f"queue cannot take {len(snippets)} more snippets ({pool.queue_depth} waiting)",
                retry_after_s=1.0,
            )
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
        pool = self._verify.pool
        info = pb.ServerInfo(
            version=__version__,
            workers=pool.size,
            worker_states=pool.worker_states(),
            queue_depth=pool.queue_depth,
            queue_limit=self._config.pool.queue_limit,
            serving=pool.serving,
            not_serving_reason=pool.not_serving_reason,
            native_core=self._native,
            sandbox=self._sandbox,
        )
        identity = convert.identity_to_pb(pool.identity)
        if identity is not None:
            info.verifier.CopyFrom(identity)
        return info


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
