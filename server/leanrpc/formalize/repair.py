"""The Formalizer: request defaults and limits, adapters, retrieval; it creates repair-loop jobs.

Owns `Formalizer` and `ResolvedRequest`; the loop itself is `FormalizeJob`
(job.py, re-exported here). Imports config, generation, prompts, retrieval,
types and job from this package.

`resolve(request)` applies defaults and limits (iterations, sampling, k
candidates per round, the adapter, the wall-clock budget) and raises
RequestError for values the server will not run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Awaitable, Callable, Sequence

from leanrpc.errors import RequestError
from leanrpc.results import VerifyResult

from . import prompts
from .config import FormalizeConfig
from .generation import ChatGenerator, SamplingParams
from .job import FormalizeJob
from .retrieval import MathlibNames, load_names
from .types import FormalizeRequest

log = logging.getLogger(__name__)

Verify = Callable[[str], Awaitable[VerifyResult]]

MAX_UNKNOWN_NAMES = 5

__all__ = ["Formalizer", "FormalizeJob", "ResolvedRequest", "Verify"]


@dataclasses.dataclass(frozen=True)
class ResolvedRequest:
    header: str
    max_iterations: int
    params: SamplingParams
    retrieval: bool
    candidates: int
    budget_s: float  # 0 = none


class Formalizer:
    """Runs repair loops on one generator and one verify function.

    Args:
        generator: a ChatGenerator (GenerationEngine, or a test double).
        verify: async `verify(code) -> VerifyResult` on full Lean code (header + statement).
        config: limits and defaults.
        names: the Mathlib name index; default: loaded lazily from config.mathlib_names_path.
        adapters: the loaded adapters a request may name; default_adapter: the one it gets otherwise.
    """

    def __init__(
        self,
        generator: ChatGenerator,
        verify: Verify,
        config: FormalizeConfig,
        names: MathlibNames | None = None,
        *,
        adapters: Sequence[str] = (),
        default_adapter: str | None = None,
    ) -> None:
        self.generator = generator
        self.adapters = list(adapters)
        self.default_adapter = default_adapter
        self.verify = verify
        self.config = config
        self._names = names
        self._dense_tried = False
        self._names_failed = False
        self._names_lock = asyncio.Lock()

    def job(self, request: FormalizeRequest, deadline: float | None = None) -> "FormalizeJob":
        """A job; `deadline` (loop.time()) is the stream's budget end, if any."""
        return FormalizeJob(self, request, deadline)

    def adapter_for(self, requested: str) -> str | None:
        """The adapter a request runs with; RequestError (INVALID_ARGUMENT) for an unknown name."""
        if not requested:
            return self.default_adapter
        if requested == "none":
            return None
        if requested not in self.adapters:
            raise RequestError(
                f"unknown adapter {requested!r}; loaded: {', '.join(self.adapters) or 'none'}"
            )
        return requested

    def resolve(self, request: FormalizeRequest) -> ResolvedRequest:
        """Applies defaults and limits; raises RequestError for values the server will not run."""
        cfg = self.config
        if not request.informal_statement.strip():
            raise RequestError("informal_statement is empty")
        iters = request.max_iterations or cfg.default_max_iterations
        if iters > cfg.max_iterations_limit:
            raise RequestError(
                f"max_iterations {iters} exceeds the server limit {cfg.max_iterations_limit}"
            )
        s = request.sampling
        if s.temperature < 0 or s.top_p < 0 or s.top_p > 1:
            raise RequestError("sampling: temperature must be >= 0 and top_p in [0, 1]")
        max_new = s.max_new_tokens or cfg.max_new_tokens
        if max_new > cfg.max_new_tokens:
            raise RequestError(
                f"sampling.max_new_tokens {max_new} exceeds the server limit {cfg.max_new_tokens}"
            )
        params = SamplingParams(
            adapter=self.adapter_for(request.adapter),
            temperature=s.temperature,
            top_p=s.top_p if s.top_p > 0 else 1.0,
            top_k=cfg.top_k,
            repetition_penalty=cfg.repetition_penalty,
            max_new_tokens=max_new,
            seed=s.seed or None,
            stop=prompts.STOP,
        )
        k = request.candidates or cfg.default_candidates
        if not 1 <= k <= cfg.max_candidates:
            raise RequestError(f"candidates {k} is outside 1..{cfg.max_candidates}")
        if params.temperature == 0:
            k = 1  # greedy decoding gives k identical candidates
        if request.budget_s < 0:
            raise RequestError("budget_s must be >= 0")
        budget = cfg.job_budget_s
        if request.budget_s:
            budget = min(request.budget_s, budget) if budget else request.budget_s
        header = request.header if request.header.strip() else cfg.default_header
        return ResolvedRequest(
            header=header,
            max_iterations=iters,
            params=params,
            retrieval=request.retrieval or cfg.retrieval_default,
            candidates=k,
            budget_s=budget,
        )

    async def names(self) -> MathlibNames | None:
        """The name index, loaded in a thread on first use; None if unavailable."""
        if self._names is not None or self._names_failed:
            return self._names
        async with self._names_lock:
            if self._names is None and not self._names_failed:
                if not self.config.names_available():
                    self._names_failed = True
                    log.warning(
                        "Mathlib names file %r not found; retrieval is off",
                        self.config.mathlib_names_path,
                    )
                else:
                    try:
                        self._names = await asyncio.to_thread(
                            load_names, self.config.mathlib_names_path
                        )
                    except Exception:
                        log.exception("loading Mathlib names failed; retrieval is off")
                        self._names_failed = True
        return self._names

    async def _dense(self, names: MathlibNames) -> None:
        """Turns System B's dense stage on once (embedding or reading the cache, in a thread)."""
        if self._dense_tried or self.config.retrieval_embedder == "none":
            return
        async with self._names_lock:
            if self._dense_tried:
                return
            self._dense_tried = True
            if names.dense is not None:
                return
            from .dense import make_embedder

            try:
                embedder = await asyncio.to_thread(make_embedder, self.config.retrieval_embedder)
                await asyncio.to_thread(
                    names.enable_dense,
                    embedder,
                    self.config.retrieval_cache_dir,
                    dense_n=self.config.retrieval_dense_n,
                )
            except Exception:  # no wordllama, a bad model path: BM25 alone rather than fail
                log.exception("System B's dense stage is off (BM25 alone)")

    async def retrieve(self, informal: str) -> list[tuple[str, str, str]]:
        names = await self.names()
        if names is None or self.config.retrieval_top_k <= 0:
            return []
        await self._dense(names)
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
        return await asyncio.to_thread(
            lambda: {n: names.did_you_mean(n, k) for n in unknown[:MAX_UNKNOWN_NAMES]}
        )
