"""One request's repair loop: k candidates per round, deduplicated, verified in parallel.

Owns `FormalizeJob`. Imports prompts, diagnostics, wellformed, triviality,
generation and types from this package, and leanrpc.results/errors; the
Formalizer (repair.py) that creates jobs is used duck-typed (no import back).

    round i (1..max_iterations):
      prompt = system + task [+ retrieved names] [+ the best failure of round i-1 and its feedback]
      k streams submitted together (one engine batch; seeds seed+k*(i-1)+j)
      each text -> extract_candidate -> well-formedness; canonical form (comments and
        whitespace ignored) seen before, in this round or an earlier one -> duplicate_of, not verified
        (a candidate whose verify timed out or crashed may be tried again)
      the distinct well-formed ones are verified in parallel
      any SORRY/VALID -> the first one passes the triviality gate -> Outcome FORMALIZED
      else a REJECTED (the verifier refused the code) -> Outcome FAILED
      else the best failure (fewest errors, the first error furthest into the statement)
        becomes the feedback: errors with their source lines, the goal at each sorry,
        and System A's "did you mean" for unknown names
    Outcome EXHAUSTED after the last round

Budget: the job ends when its wall-clock budget (or its stream's) is spent, by the
same path as cancel(): immediately, with Outcome EXHAUSTED and budget_exhausted.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any, AsyncIterator

from leanrpc.errors import LeanServiceError, RequestError
from leanrpc.results import Status, VerifyResult

from . import prompts
from .diagnostics import (
    error_category,
    error_count,
    first_error,
    format_feedback,
    unknown_identifiers,
)
from .generation import FINISH_CANCELLED, FINISH_ERROR, FINISH_LENGTH, GenerationResult
from .triviality import check_trivial
from .types import Candidate, FormalizeRequest, Outcome, OutcomeStatus, Payload, TokenChunk
from .wellformed import canonical_form, check, extract_candidate

log = logging.getLogger(__name__)

_SUCCESS = (Status.SORRY, Status.VALID)
# Lean did not finish or found errors: tell the model and try again.
_RETRY = (Status.INVALID, Status.TIMEOUT, Status.CRASH, Status.OUT_OF_MEMORY)


class _Stopped(Exception):
    """The job was cancelled or ran out of budget while waiting."""


@dataclasses.dataclass
class _Verified:
    candidate: Candidate
    result: VerifyResult | None = None
    error: str = ""  # verify raised


class FormalizeJob:
    """One request's repair loop. Iterate `events()` once; `cancel()` at any time."""

    def __init__(
        self, formalizer: Any, request: FormalizeRequest, deadline: float | None = None
    ) -> None:
        self.f = formalizer
        self.request = request
        self._stream_deadline = deadline  # loop.time() when the stream's budget ends
        self._cancelled = asyncio.Event()
        self._streams: list = []
        self.budget_exhausted = False
        self.budget_s = 0.0
        self.generation_s = 0.0
        self.generated_tokens = 0
        self.verified = 0
        self.duplicates = 0
        self._t0 = time.perf_counter()

    def cancel(self) -> None:
        self._cancelled.set()
        for stream in self._streams:
            stream.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def _outcome(
        self, status: OutcomeStatus, iterations: int, statement: str = "", error: str = ""
    ) -> Outcome:
        if self.budget_exhausted and status == OutcomeStatus.CANCELLED:
            status = OutcomeStatus.EXHAUSTED
            error = f"wall-clock budget of {self.budget_s:g} s spent"
        return Outcome(
            status=status,
            iterations=iterations,
            lean_statement=statement,
            error=error,
            generation_s=round(self.generation_s, 6),
            generated_tokens=self.generated_tokens,
            elapsed_s=round(time.perf_counter() - self._t0, 6),
            budget_s=self.budget_s,
            budget_exhausted=self.budget_exhausted,
            candidates_verified=self.verified,
            duplicates=self.duplicates,
        )

    async def events(self) -> AsyncIterator[Payload]:
        watchdog = None
        try:
            try:
                r = self.f.resolve(self.request)
            except RequestError as exc:
                yield self._outcome(OutcomeStatus.FAILED, 0, error=str(exc))
                return
            watchdog = self._start_watchdog(r.budget_s)
            async for ev in self._loop(r):
                yield ev
        finally:
            if watchdog is not None:
                watchdog.cancel()
            for stream in self._streams:  # the consumer left mid-generation
                stream.cancel()

    def _start_watchdog(self, budget_s: float):
        loop = asyncio.get_running_loop()
        ends = [
            d
            for d in (loop.time() + budget_s if budget_s else None, self._stream_deadline)
            if d is not None
        ]
        if not ends:
            return None
        end = min(ends)
        self.budget_s = round(max(0.0, end - loop.time()), 3)

        def spent():
            self.budget_exhausted = True
            self.cancel()

        return loop.call_at(end, spent)

    async def _generate(
        self, it: int, k: int, r, messages
    ) -> AsyncIterator[TokenChunk | list[GenerationResult]]:
        """Submits k sequences together; yields token chunks, then the list of results."""
        base = r.params
        streams = []
        for j in range(k):
            seed = None if base.seed is None else base.seed + k * (it - 1) + j
            streams.append(
                self.f.generator.submit_chat(
                    messages, prompts.ASSISTANT_PREFIX, dataclasses.replace(base, seed=seed)
                )
            )
        self._streams = streams
        if self.cancelled:
            for s in streams:
                s.cancel()
        queue: asyncio.Queue = asyncio.Queue()

        async def pump(j, stream):
            try:
                async for delta in stream:
                    if delta and self.request.stream_tokens:
                        queue.put_nowait(TokenChunk(it, delta, j))
            finally:
                queue.put_nowait(j)

        pumps = [asyncio.ensure_future(pump(j, s)) for j, s in enumerate(streams)]
        try:
            left = k
            while left:
                item = await queue.get()
                if isinstance(item, int):
                    left -= 1
                else:
                    yield item
            for p in pumps:
                await p  # re-raises a stream's failure
            yield [await s.result() for s in streams]
        finally:
            for p in pumps:
                p.cancel()
            self._streams = []

    async def _loop(self, r) -> AsyncIterator[Payload]:
        req = self.request
        retrieved = await self.f.retrieve(req.informal_statement) if r.retrieval else []
        task = prompts.task_message(req.informal_statement, r.header, retrieved)
        line_offset = len(r.header.rstrip().splitlines()) + 1
        seen: dict[str, str] = {}
        last: str | None = None
        feedback: str | None = None

        for it in range(1, r.max_iterations + 1):
            if self.cancelled:
                yield self._outcome(OutcomeStatus.CANCELLED, it - 1)
                return
            results: list[GenerationResult] = []
            try:
                async for item in self._generate(
                    it, r.candidates, r, prompts.build_messages(task, last, feedback)
                ):
                    if isinstance(item, list):
                        results = item
                    else:
                        yield item
            except Exception as exc:  # prompt too long, engine closed, unknown adapter
                yield self._outcome(
                    OutcomeStatus.FAILED, it, error=f"generation could not start: {exc}"
                )
                return
            for gen in results:
                self.generation_s += gen.generation_s
                self.generated_tokens += gen.generated_tokens
            if self.cancelled or any(g.finish_reason == FINISH_CANCELLED for g in results):
                yield self._outcome(OutcomeStatus.CANCELLED, it)
                return
            failed = [g for g in results if g.finish_reason == FINISH_ERROR]
            if failed:
                yield self._outcome(
                    OutcomeStatus.FAILED, it, error=f"generation failed: {failed[0].error}"
                )
                return

            round_ = [self._candidate(it, j, gen, seen) for j, gen in enumerate(results)]
            to_verify = [c for c in round_ if c.well_formed.ok and not c.duplicate_of]
            try:
                verified = await self._verify_all(r.header, to_verify)
            except _Stopped:
                for c in round_:
                    yield c
                yield self._outcome(OutcomeStatus.CANCELLED, it)
                return
            for (
                v
            ) in verified:  # a transient answer (timeout, crash) may be retried in a later round
                if v.result is None or v.result.status not in _SUCCESS + (Status.INVALID,):
                    seen.pop(canonical_form(v.candidate.lean_statement), None)
            by_id = {id(v.candidate): v for v in verified}
            winner = next(
                (v for v in verified if v.result is not None and v.result.status in _SUCCESS), None
            )
            if winner is not None and self.f.config.triviality_check:
                try:
                    reason = await self._until_stopped(
                        check_trivial(winner.candidate.lean_statement, r.header, self.f.verify)
                    )
                except _Stopped:
                    reason = ""
                winner.candidate.suspect_trivial = bool(reason)
                winner.candidate.trivial_reason = reason
            for c in round_:
                v = by_id.get(id(c))
                if v is not None and v.result is not None and v.result.status in _RETRY:
                    c.suggestions = await self.f.did_you_mean(
                        unknown_identifiers(v.result.messages)
                    )
                yield c
            if self.cancelled:
                yield self._outcome(OutcomeStatus.CANCELLED, it)
                return
            if winner is not None:
                yield self._outcome(OutcomeStatus.FORMALIZED, it, winner.candidate.lean_statement)
                return
            stop = self._stop_outcome(it, verified)
            if stop is not None:
                yield stop
                return
            last, feedback = self._feedback(round_, verified, line_offset)

        yield self._outcome(
            OutcomeStatus.EXHAUSTED,
            r.max_iterations,
            error=f"no candidate type-checked in {r.max_iterations} iterations",
        )

    def _candidate(self, it: int, j: int, gen: GenerationResult, seen: dict[str, str]) -> Candidate:
        statement = extract_candidate(gen.text)
        wf = check(statement)
        cand = Candidate(
            iteration=it,
            lean_statement=statement,
            well_formed=wf,
            verify_result=None,
            generated_tokens=gen.generated_tokens,
            generation_s=gen.generation_s,
            finish_reason=gen.finish_reason,
            index=j,
        )
        key = canonical_form(statement) if statement.strip() else gen.text
        if key in seen:
            cand.duplicate_of = seen[key]
            self.duplicates += 1
        else:
            seen[key] = f"{it}.{j}"
        return cand

    async def _verify_all(self, header: str, candidates: list[Candidate]) -> list[_Verified]:
        async def one(c: Candidate) -> _Verified:
            try:
                result = await self.f.verify(f"{header.rstrip()}\n\n{c.lean_statement}\n")
            except LeanServiceError as exc:
                return _Verified(c, error=f"verify failed: {exc}")
            except Exception as exc:
                log.exception("verify raised")
                return _Verified(c, error=f"verify failed: {type(exc).__name__}: {exc}")
            c.verify_result = result
            c.error_category = error_category(result)
            return _Verified(c, result)

        if not candidates:
            return []
        out = await self._until_stopped(asyncio.gather(*(one(c) for c in candidates)))
        self.verified += len(out)
        return out

    async def _until_stopped(self, awaitable):
        """Awaits `awaitable` unless the job is cancelled (or out of budget) first: then _Stopped."""
        work = asyncio.ensure_future(awaitable)
        stop = asyncio.ensure_future(self._cancelled.wait())
        try:
            done, _ = await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            if not work.done():
                work.cancel()
        if work in done:
            return work.result()
        raise _Stopped()

    def _stop_outcome(self, it: int, verified: list[_Verified]) -> Outcome | None:
        """An Outcome that ends the job without success, or None to go on."""
        cancelled = [
            v for v in verified if v.result is not None and v.result.status == Status.CANCELLED
        ]
        if cancelled:
            return self._outcome(OutcomeStatus.CANCELLED, it)
        refused = [v for v in verified if v.result is not None and v.result.status not in _RETRY]
        if refused:
            res = refused[0].result
            return self._outcome(
                OutcomeStatus.FAILED,
                it,
                error=f"verifier answered {res.status.name}: {res.error}".rstrip(": "),
            )
        if verified and all(v.result is None for v in verified):
            return self._outcome(OutcomeStatus.FAILED, it, error=verified[0].error)
        return None

    def _feedback(
        self, round_: list[Candidate], verified: list[_Verified], line_offset: int
    ) -> tuple[str, str]:
        """(attempt, feedback) from the best failure of the round."""
        failures = [v for v in verified if v.result is not None]
        if failures:
            best = min(failures, key=_failure_rank)
            c, res = best.candidate, best.result
            errors = format_feedback(
                res,
                c.lean_statement,
                line_offset=line_offset,
                limit=self.f.config.error_feedback_chars,
            )
            if res.status != Status.INVALID:
                errors = (
                    f"Lean did not finish checking ({res.status.name.lower()}). {errors}".strip()
                )
            return c.lean_statement, prompts.feedback_message(
                errors=errors or "(no message)", suggestions=c.suggestions
            )
        # Nothing reached Lean: all malformed (or duplicates of earlier attempts).
        c = next((c for c in round_ if not c.well_formed.ok), round_[0])
        if c.well_formed.ok:  # only duplicates: ask for something new
            return c.lean_statement, prompts.feedback_message(
                errors="This statement was already tried and failed. Write a different one."
            )
        return c.lean_statement or "(empty)", prompts.feedback_message(
            not_well_formed=c.well_formed.reason, truncated=c.finish_reason == FINISH_LENGTH
        )


def _failure_rank(v: _Verified) -> tuple:
    """Lower is better: Lean finished, fewer errors, the first error further into the statement."""
    res = v.result
    first = first_error(res)
    where = (first.start.line, first.start.column) if first is not None else (10**9, 0)
    return (res.status != Status.INVALID, error_count(res), (-where[0], -where[1]))
