"""gRPC servicer for leanrpc.v1.Formalizer: protobuf <-> leanrpc.formalize types.

One bidirectional stream is one FormalizeSession: a reader task turns inbound
messages into `submit`/`cancel` calls, and the handler forwards the session's
events. When the client half-closes, the stream ends after the last job's
Outcome; when the client cancels (or the deadline passes), every job on the
stream is cancelled and generation stops within a few tokens.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import grpc

from ..errors import LeanServiceError, RequestError
from ..formalize.config import FormalizeConfig, find_mathlib_names
from ..formalize.types import (
    Candidate,
    FormalizeEvent,
    FormalizeRequest,
    Outcome,
    Sampling,
    TokenChunk,
)
from ..formalize.wellformed import WellFormedness
from ..services.formalize import FormalizeService
from ..v1 import formalizer_pb2 as pb
from ..v1 import formalizer_pb2_grpc
from .convert import result_to_pb, seconds_of
from .errors import abort_with, duration_of

log = logging.getLogger("leanrpc.edge.formalizer")


def request_from_pb(msg: pb.FormalizeRequest) -> FormalizeRequest:
    s = msg.sampling
    return FormalizeRequest(
        id=msg.id,
        informal_statement=msg.informal_statement,
        header=msg.header,
        max_iterations=msg.max_iterations,
        sampling=Sampling(
            temperature=s.temperature, top_p=s.top_p, max_new_tokens=s.max_new_tokens, seed=s.seed
        ),
        stream_tokens=msg.stream_tokens,
        retrieval=msg.retrieval,
        candidates=msg.candidates,
        adapter=msg.adapter,
        budget_s=_budget_s(msg),
    )


def _budget_s(msg: pb.FormalizeRequest) -> float:
    if not msg.HasField("budget"):
        return 0.0
    seconds = seconds_of(msg.budget, "request.budget")
    if seconds < 0:
        raise RequestError(
            f"request.budget is negative ({seconds:g} s); leave it unset for the server default",
            field="request.budget",
        )
    return seconds


def info_to_pb(info: dict) -> pb.FormalizerInfo:
    """FormalizeService.adapter_info() (budgets in seconds) as the message (budgets as Durations)."""
    fields = dict(info)
    job_budget_s = fields.pop("job_budget_s", 0.0)
    stream_budget_s = fields.pop("stream_budget_s", 0.0)
    return pb.FormalizerInfo(
        **fields, job_budget=duration_of(job_budget_s), stream_budget=duration_of(stream_budget_s)
    )


def well_formed_to_pb(wf: WellFormedness) -> pb.WellFormedness:
    return pb.WellFormedness(
        balanced_delimiters=wf.balanced_delimiters,
        has_theorem_signature=wf.has_theorem_signature,
        ends_with_by_sorry=wf.ends_with_by_sorry,
        ok=wf.ok,
        reason=wf.reason,
    )


def event_to_pb(event: FormalizeEvent) -> pb.FormalizeEvent:
    p = event.payload
    if isinstance(p, TokenChunk):
        return pb.FormalizeEvent(
            id=event.job_id,
            token=pb.TokenChunk(iteration=p.iteration, text=p.text, candidate=p.candidate),
        )
    if isinstance(p, Candidate):
        cand = pb.Candidate(
            iteration=p.iteration,
            lean_statement=p.lean_statement,
            well_formed=well_formed_to_pb(p.well_formed),
            error_category=p.error_category or "",
            index=p.index,
            duplicate_of=p.duplicate_of,
            suspect_trivial=p.suspect_trivial,
            trivial_reason=p.trivial_reason,
            generated_tokens=p.generated_tokens,
            finish_reason=p.finish_reason,
            suggestions=[pb.Suggestion(name=n, candidates=c) for n, c in p.suggestions.items()],
        )
        if p.verify_result is not None:
            cand.verify_result.CopyFrom(result_to_pb(p.verify_result))
        return pb.FormalizeEvent(id=event.job_id, candidate=cand)
    if isinstance(p, Outcome):
        return pb.FormalizeEvent(
            id=event.job_id,
            outcome=pb.Outcome(
                status=int(p.status),
                iterations=p.iterations,
                lean_statement=p.lean_statement,
                error=p.error,
                generation=duration_of(p.generation_s),
                generated_tokens=p.generated_tokens,
                elapsed=duration_of(p.elapsed_s),
                budget=duration_of(p.budget_s),
                budget_exhausted=p.budget_exhausted,
                candidates_verified=p.candidates_verified,
                duplicates=p.duplicates,
            ),
        )
    raise TypeError(f"unknown Formalize payload {type(p).__name__}")


class FormalizerServicer(formalizer_pb2_grpc.FormalizerServicer):
    """Formalizer.Formalize on top of a FormalizeService."""

    def __init__(self, service: FormalizeService) -> None:
        self.service = service

    async def Formalize(self, request_iterator, context: grpc.aio.ServicerContext):
        try:
            session = self.service.open_session()  # ModelNotConfigured -> FAILED_PRECONDITION
        except LeanServiceError as exc:
            await abort_with(context, exc)
            return
        reader = asyncio.create_task(self._read(request_iterator, session))
        try:
            async for event in session.events():
                yield event_to_pb(event)
            await reader
        except LeanServiceError as exc:
            await abort_with(context, exc)
        finally:
            reader.cancel()
            await session.aclose()

    async def GetFormalizerInfo(
        self, request: pb.FormalizerInfoRequest, context: grpc.aio.ServicerContext
    ):
        try:
            info = self.service.adapter_info()  # ModelNotConfigured -> FAILED_PRECONDITION
        except LeanServiceError as exc:
            await abort_with(context, exc)
            return None
        return info_to_pb(info)

    @staticmethod
    async def _read(request_iterator, session) -> None:
        try:
            async for msg in request_iterator:
                kind = msg.WhichOneof("kind")
                if kind == "request":
                    session.submit(request_from_pb(msg.request))
                elif kind == "cancel_id":
                    session.cancel(msg.cancel_id)
                else:
                    raise RequestError("FormalizeClientMessage has neither request nor cancel_id")
        except asyncio.CancelledError:
            raise
        except LeanServiceError as exc:
            session.fail(exc)
            return
        except Exception as exc:  # the client stream broke; nothing more will come
            log.debug("Formalize request stream ended: %r", exc)
            session.cancel_all()
        session.end_input()


def formalize_config_from(section) -> FormalizeConfig:
    """FormalizeConfig from the server's `[formalize]` section (any object with matching attributes)."""
    cfg = FormalizeConfig()
    for field in dataclasses.fields(FormalizeConfig):
        if hasattr(section, field.name):
            value = getattr(section, field.name)
            if value == "" and "None" in str(field.type):  # TOML's spelling of None
                value = None
            if field.name == "mathlib_names_path" and value == "auto":
                value = find_mathlib_names()
            setattr(cfg, field.name, list(value) if field.name == "adapter_dirs" else value)
    return cfg


def add_formalizer_to_server(server: grpc.aio.Server, config, verify_service) -> FormalizeService:
    """Registers the Formalizer on `server`; returns the FormalizeService (serving_status(), close()).

    `config` is the server Config (its `formalize` section is read) and
    `verify_service` a leanrpc.services.ports.Verifier. The model loads
    in a background thread; until then serving_status() is (False, "loading ...").
    """
    from ..services.verify import VerifyOptions

    async def verify(code: str):
        return await verify_service.verify("formalize", code, VerifyOptions())

    fconfig = formalize_config_from(getattr(config, "formalize", config))
    service = FormalizeService.start_loading(fconfig, verify)
    formalizer_pb2_grpc.add_FormalizerServicer_to_server(FormalizerServicer(service), server)
    return service
