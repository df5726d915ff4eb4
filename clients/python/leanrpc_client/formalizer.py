"""The Formalizer calls: informal statement in, Lean statement out, with the repair loop's events.

Owns `FormalizerCalls` (mixed into AsyncClient) and `SyncFormalizerCalls` (into
Client), and the event types they yield:

    async for event in client.formalize_events("Show that 2 + 2 = 4.", max_iterations=3):
        ...   # TokenEvent / CandidateEvent while it runs, FormalizeResult last
    result = await client.formalize("Show that 2 + 2 = 4.")   # just the result

One Formalize stream per call (bidi on the wire: one request, half-close, read
the job's events until its Outcome). The server answers every job with exactly
one Outcome; a stream that ends without one is a ClientError (UNAVAILABLE or the
stream's status), never an empty result. Cancelling the consumer cancels the call,
and the server stops the job. The blocking `Client.formalize_events` steps the
same async generator on the client's loop thread.

May import: _proto, _convert, _retry (client_error), _types, grpc.
"""

from __future__ import annotations

import dataclasses
from typing import AsyncIterator, Callable, Iterator

import grpc

from ._convert import result_from_pb
from ._proto import fpb, fpb_grpc
from ._retry import client_error
from ._types import ClientError, Result

_OUTCOME = {
    v: k.removeprefix("FORMALIZE_OUTCOME_STATUS_") for k, v in fpb.FormalizeOutcomeStatus.items()
}


@dataclasses.dataclass(frozen=True)
class TokenEvent:
    iteration: int
    candidate: int
    text: str


@dataclasses.dataclass(frozen=True)
class CandidateEvent:
    iteration: int
    index: int
    lean_statement: str
    well_formed: bool
    not_well_formed_reason: str
    verify_result: Result | None  # None: not well-formed, a duplicate, or not verified
    error_category: str  # unknown_ident, syntax, typeclass, type_mismatch, other; "" = none
    suggestions: dict[str, list[str]]
    duplicate_of: str
    suspect_trivial: bool
    trivial_reason: str
    generated_tokens: int
    finish_reason: str


@dataclasses.dataclass(frozen=True)
class FormalizeResult:
    id: str
    status: str  # FORMALIZED, EXHAUSTED, CANCELLED, FAILED
    iterations: int
    lean_statement: str
    error: str
    generated_tokens: int
    generation_s: float
    elapsed_s: float
    budget_exhausted: bool
    candidates_verified: int
    duplicates: int

    @property
    def formalized(self) -> bool:
        return self.status == "FORMALIZED"


def _seconds(d) -> float:
    return d.seconds + d.nanos / 1e9


def _candidate(c) -> CandidateEvent:
    return CandidateEvent(
        iteration=c.iteration,
        index=c.index,
        lean_statement=c.lean_statement,
        well_formed=c.well_formed.ok,
        not_well_formed_reason=c.well_formed.reason,
        verify_result=result_from_pb(c.verify_result) if c.HasField("verify_result") else None,
        error_category=c.error_category,
        suggestions={s.name: list(s.candidates) for s in c.suggestions},
        duplicate_of=c.duplicate_of,
        suspect_trivial=c.suspect_trivial,
        trivial_reason=c.trivial_reason,
        generated_tokens=c.generated_tokens,
        finish_reason=c.finish_reason,
    )


def _result(job_id: str, o) -> FormalizeResult:
    return FormalizeResult(
        id=job_id,
        status=_OUTCOME.get(o.status, str(o.status)),
        iterations=o.iterations,
        lean_statement=o.lean_statement,
        error=o.error,
        generated_tokens=o.generated_tokens,
        generation_s=_seconds(o.generation),
        elapsed_s=_seconds(o.elapsed),
        budget_exhausted=o.budget_exhausted,
        candidates_verified=o.candidates_verified,
        duplicates=o.duplicates,
    )


def _request(informal: str, job_id: str, options: dict) -> fpb.FormalizeClientMessage:
    sampling = fpb.SamplingOptions(
        temperature=options.pop("temperature", 0.0),
        top_p=options.pop("top_p", 0.0),
        max_new_tokens=options.pop("max_new_tokens", 0),
        seed=options.pop("seed", 0),
    )
    budget_s = options.pop("budget_s", 0.0)
    request = fpb.FormalizeRequest(
        id=job_id, informal_statement=informal, sampling=sampling, **options
    )
    if budget_s:
        request.budget.FromNanoseconds(int(budget_s * 1e9))
    return fpb.FormalizeClientMessage(request=request)


Event = TokenEvent | CandidateEvent | FormalizeResult


class FormalizerCalls:
    """Formalize and GetFormalizerInfo on an AsyncClient's channel."""

    @property
    def _formalizer_stub(self) -> fpb_grpc.FormalizerStub:
        stub = self.__dict__.get("_formalizer_stub_cache")
        if stub is None:
            stub = self.__dict__["_formalizer_stub_cache"] = fpb_grpc.FormalizerStub(self._channel)
        return stub

    async def formalize_events(
        self,
        informal_statement: str,
        *,
        header: str = "",
        max_iterations: int = 0,
        candidates: int = 0,
        retrieval: bool = False,
        adapter: str = "",
        temperature: float = 0.0,
        top_p: float = 0.0,
        max_new_tokens: int = 0,
        seed: int = 0,
        stream_tokens: bool = False,
        budget_s: float = 0.0,
        timeout_s: float | None = None,
        job_id: str = "formalize",
    ) -> AsyncIterator[Event]:
        """The job's events as they come; the last one is its FormalizeResult.

        0 / "" / False mean the server's default. `timeout_s` is the gRPC deadline
        of the whole stream; `budget_s` the job's wall-clock budget (the server's
        cap applies)."""
        if not isinstance(informal_statement, str):
            raise TypeError("informal_statement must be a str")
        message = _request(
            informal_statement,
            job_id,
            dict(
                header=header,
                max_iterations=max_iterations,
                candidates=candidates,
                retrieval=retrieval,
                adapter=adapter,
                temperature=temperature,
                top_p=top_p,
                max_new_tokens=max_new_tokens,
                seed=seed,
                stream_tokens=stream_tokens,
                budget_s=budget_s,
            ),
        )
        call = self._formalizer_stub.Formalize(timeout=timeout_s, metadata=self._metadata)
        try:
            await call.write(message)
            await call.done_writing()
            async for event in call:
                kind = event.WhichOneof("kind")
                if kind == "token":
                    yield TokenEvent(event.token.iteration, event.token.candidate, event.token.text)
                elif kind == "candidate":
                    yield _candidate(event.candidate)
                elif kind == "outcome":
                    yield _result(event.id, event.outcome)
                    return
        except grpc.aio.AioRpcError as exc:
            raise client_error(exc) from exc
        finally:
            call.cancel()
        raise ClientError(
            grpc.StatusCode.UNAVAILABLE, "the Formalize stream ended without an outcome"
        )

    async def formalize(
        self, informal_statement: str, *, on_event: Callable[[Event], None] | None = None, **kwargs
    ) -> FormalizeResult:
        """Runs the repair loop on the server and returns its result (events to `on_event`)."""
        result = None
        async for event in self.formalize_events(informal_statement, **kwargs):
            if on_event is not None:
                on_event(event)
            if isinstance(event, FormalizeResult):
                result = event
        assert result is not None  # formalize_events raises when no outcome came
        return result

    async def formalizer_info(self, *, timeout_s: float = 10.0) -> fpb.FormalizerInfo:
        return await self._call(
            self._formalizer_stub.GetFormalizerInfo, fpb.FormalizerInfoRequest(), timeout_s
        )


class SyncFormalizerCalls:
    """The blocking Client's Formalizer calls (its private loop thread runs the AsyncClient's)."""

    def formalize(self, informal_statement: str, **kwargs) -> FormalizeResult:
        return self._run(self._async.formalize(informal_statement, **kwargs))

    def formalize_events(self, informal_statement: str, **kwargs) -> Iterator[Event]:
        agen = self._async.formalize_events(informal_statement, **kwargs)
        try:
            while True:
                try:
                    yield self._run(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._run(agen.aclose())

    def formalizer_info(self, **kwargs) -> fpb.FormalizerInfo:
        return self._run(self._async.formalizer_info(**kwargs))
