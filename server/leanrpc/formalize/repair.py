"""The repair loop: generate a statement, check it, verify it, feed the errors back.

    iteration i (1..max_iterations):
      prompt = system + task [+ System B: top-k Mathlib declarations, first prompt]
               [+ attempt i-1 and its feedback]
      generate (streaming TokenChunk events if asked)
      candidate = extract_candidate(text); well-formedness check
        not well-formed -> Candidate event (no verify), feedback = the reason
      verify(header + candidate)
        SORRY / VALID   -> Candidate, Outcome FORMALIZED
        INVALID (or timeout, crash) -> Candidate; feedback = errors (<= 800 chars)
                           + System A "Did you mean" for unknown identifiers
        REJECTED        -> Candidate, Outcome FAILED (the verifier refused the code)
    Outcome EXHAUSTED after the last iteration

`FormalizeJob.cancel()` stops the job wherever it is: the current generation
(within a few tokens), or the pending verify call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import AsyncIterator, Awaitable, Callable

from leanrpc.errors import LeanServiceError, RequestError
from leanrpc.results import Status, VerifyResult

from . import prompts
from .config import FormalizeConfig
from .diagnostics import error_category, format_errors, unknown_identifiers
from .generation import FINISH_CANCELLED, FINISH_ERROR, FINISH_LENGTH, ChatGenerator, SamplingParams
from .retrieval import MathlibNames, load_names
from .types import Candidate, FormalizeRequest, Outcome, OutcomeStatus, Payload, TokenChunk
from .wellformed import check, extract_candidate

log = logging.getLogger(__name__)

Verify = Callable[[str], Awaitable[VerifyResult]]

MAX_UNKNOWN_NAMES = 5
_SUCCESS = (Status.SORRY, Status.VALID)
# Lean did not finish: tell the model and try again.
_RETRY = (Status.INVALID, Status.TIMEOUT, Status.CRASH, Status.OUT_OF_MEMORY)


@dataclasses.dataclass(frozen=True)
class ResolvedRequest:
    header: str
    max_iterations: int
    params: SamplingParams
    retrieval: bool


class Formalizer:
    """Runs repair loops on one generator and one verify function.

    Args:
        generator: a ChatGenerator (GenerationEngine, or a test double).
        verify: async `verify(code) -> VerifyResult` on full Lean code (header + statement).
        config: limits and defaults.
        names: the Mathlib name index; default: loaded lazily from config.mathlib_names_path.
    """

    def __init__(self, generator: ChatGenerator, verify: Verify, config: FormalizeConfig,
                 names: MathlibNames | None = None) -> None:
        self.generator = generator
        self.verify = verify
        self.config = config
        self._names = names
        self._names_failed = False
        self._names_lock = asyncio.Lock()

    def job(self, request: FormalizeRequest) -> "FormalizeJob":
        return FormalizeJob(self, request)

    def resolve(self, request: FormalizeRequest) -> ResolvedRequest:
        """Applies defaults and limits; raises RequestError for values the server will not run."""
        cfg = self.config
        if not request.informal_statement.strip():
            raise RequestError("informal_statement is empty")
        iters = request.max_iterations or cfg.default_max_iterations
        if iters > cfg.max_iterations_limit:
            raise RequestError(f"max_iterations {iters} exceeds the server limit {cfg.max_iterations_limit}")
        s = request.sampling
        if s.temperature < 0 or s.top_p < 0 or s.top_p > 1:
            raise RequestError("sampling: temperature must be >= 0 and top_p in [0, 1]")
        max_new = s.max_new_tokens or cfg.max_new_tokens
        if max_new > cfg.max_new_tokens:
            raise RequestError(f"sampling.max_new_tokens {max_new} exceeds the server limit {cfg.max_new_tokens}")
        params = SamplingParams(
            temperature=s.temperature,
            top_p=s.top_p if s.top_p > 0 else 1.0,
            top_k=cfg.top_k,
            repetition_penalty=cfg.repetition_penalty,
            max_new_tokens=max_new,
            seed=s.seed or None,
            stop=prompts.STOP,
        )
        header = request.header if request.header.strip() else cfg.default_header
        return ResolvedRequest(header=header, max_iterations=iters, params=params,
                               retrieval=request.retrieval or cfg.retrieval_default)

    async def names(self) -> MathlibNames | None:
        """The name index, loaded in a thread on first use; None if unavailable."""
        if self._names is not None or self._names_failed:
            return self._names
        async with self._names_lock:
            if self._names is None and not self._names_failed:
                if not self.config.names_available():
                    self._names_failed = True
                    log.warning("Mathlib names file %r not found; retrieval is off", self.config.mathlib_names_path)
                else:
                    try:
                        self._names = await asyncio.to_thread(load_names, self.config.mathlib_names_path)
                    except Exception:
                        log.exception("loading Mathlib names failed; retrieval is off")
                        self._names_failed = True
        return self._names

    async def retrieve(self, informal: str) -> list[tuple[str, str, str]]:
        names = await self.names()
        if names is None or self.config.retrieval_top_k <= 0:
            return []
        try:
            return await asyncio.to_thread(names.search, informal, self.config.retrieval_top_k)
        except Exception:  # e.g. numpy missing: formalize without System B rather than fail the job
            log.exception("System B retrieval failed")
            return []

    async def did_you_mean(self, unknown: list[str]) -> dict[str, list[str]]:
        if not unknown or self.config.did_you_mean_k <= 0:
            return {}
        names = await self.names()
        if names is None:
            return {}
        k = self.config.did_you_mean_k
        return await asyncio.to_thread(lambda: {n: names.did_you_mean(n, k) for n in unknown[:MAX_UNKNOWN_NAMES]})


class _Cancelled(Exception):
    pass


class FormalizeJob:
    """One request's repair loop. Iterate `events()` once; `cancel()` at any time."""

    def __init__(self, formalizer: Formalizer, request: FormalizeRequest) -> None:
        self.f = formalizer
        self.request = request
        self._cancelled = asyncio.Event()
        self._stream = None
        self.generation_s = 0.0
        self.generated_tokens = 0

    def cancel(self) -> None:
        self._cancelled.set()
        if self._stream is not None:
            self._stream.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def _outcome(self, status: OutcomeStatus, iterations: int, statement: str = "", error: str = "") -> Outcome:
        return Outcome(status=status, iterations=iterations, lean_statement=statement, error=error,
                       generation_s=round(self.generation_s, 6), generated_tokens=self.generated_tokens)

    async def events(self) -> AsyncIterator[Payload]:
        try:
            async for ev in self._loop():
                yield ev
        finally:
            if self._stream is not None:  # the consumer left mid-generation
                self._stream.cancel()

    async def _loop(self) -> AsyncIterator[Payload]:
        req = self.request
        try:
            r = self.f.resolve(req)
        except RequestError as exc:
            yield self._outcome(OutcomeStatus.FAILED, 0, error=str(exc))
            return
        retrieved = await self.f.retrieve(req.informal_statement) if r.retrieval else []
        task = prompts.task_message(req.informal_statement, r.header, retrieved)
        line_offset = len(r.header.rstrip().splitlines()) + 1
        last: str | None = None
        feedback: str | None = None

        for it in range(1, r.max_iterations + 1):
            if self.cancelled:
                yield self._outcome(OutcomeStatus.CANCELLED, it - 1)
                return
            params = r.params if r.params.seed is None else dataclasses.replace(r.params, seed=r.params.seed + it - 1)
            try:
                stream = self.f.generator.submit_chat(prompts.build_messages(task, last, feedback),
                                                      prompts.ASSISTANT_PREFIX, params)
            except Exception as exc:  # prompt too long, engine closed
                yield self._outcome(OutcomeStatus.FAILED, it, error=f"generation could not start: {exc}")
                return
            self._stream = stream
            if self.cancelled:
                stream.cancel()
            async for delta in stream:
                if req.stream_tokens and delta:
                    yield TokenChunk(it, delta)
            gen = await stream.result()
            self._stream = None
            self.generation_s += gen.generation_s
            self.generated_tokens += gen.generated_tokens
            if gen.finish_reason == FINISH_CANCELLED or self.cancelled:
                yield self._outcome(OutcomeStatus.CANCELLED, it)
                return
            if gen.finish_reason == FINISH_ERROR:
                yield self._outcome(OutcomeStatus.FAILED, it, error=f"generation failed: {gen.error}")
                return

            statement = extract_candidate(gen.text)
            wf = check(statement)
            cand = Candidate(iteration=it, lean_statement=statement, well_formed=wf, verify_result=None,
                             generated_tokens=gen.generated_tokens, generation_s=gen.generation_s,
                             finish_reason=gen.finish_reason)
            if not wf.ok:
                yield cand
                last = statement or gen.text
                feedback = prompts.feedback_message(not_well_formed=wf.reason,
                                                    truncated=gen.finish_reason == FINISH_LENGTH)
                continue

            code = f"{r.header.rstrip()}\n\n{statement}\n"
            try:
                result = await self._verify(code)
            except _Cancelled:
                yield cand
                yield self._outcome(OutcomeStatus.CANCELLED, it)
                return
            except LeanServiceError as exc:
                yield cand
                yield self._outcome(OutcomeStatus.FAILED, it, error=f"verify failed: {exc}")
                return
            except Exception as exc:
                log.exception("verify raised")
                yield cand
                yield self._outcome(OutcomeStatus.FAILED, it, error=f"verify failed: {type(exc).__name__}: {exc}")
                return
            cand.verify_result = result
            cand.error_category = error_category(result)
            if result.status in _SUCCESS:
                yield cand
                yield self._outcome(OutcomeStatus.FORMALIZED, it, statement)
                return
            if result.status == Status.CANCELLED:
                yield cand
                yield self._outcome(OutcomeStatus.CANCELLED, it)
                return
            if result.status not in _RETRY:
                yield cand
                yield self._outcome(OutcomeStatus.FAILED, it,
                                    error=f"verifier answered {result.status.name}: {result.error}".rstrip(": "))
                return
            cand.suggestions = await self.f.did_you_mean(unknown_identifiers(result.messages))
            yield cand
            errors = format_errors(result, line_offset=line_offset, limit=self.f.config.error_feedback_chars)
            if result.status != Status.INVALID:
                errors = f"Lean did not finish checking ({result.status.name.lower()}). {errors}".strip()
            last = statement
            feedback = prompts.feedback_message(errors=errors or "(no message)", suggestions=cand.suggestions)

        yield self._outcome(OutcomeStatus.EXHAUSTED, r.max_iterations,
                            error=f"no candidate type-checked in {r.max_iterations} iterations")

    async def _verify(self, code: str) -> VerifyResult:
        verify_task = asyncio.ensure_future(self.f.verify(code))
        cancel_task = asyncio.ensure_future(self._cancelled.wait())
        try:
            done, _ = await asyncio.wait({verify_task, cancel_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancel_task.cancel()
            if not verify_task.done():
                verify_task.cancel()
        if verify_task in done:
            return verify_task.result()
        raise _Cancelled()
