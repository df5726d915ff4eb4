"""Formalize service: repair-loop jobs on internal types (no protobuf here).

    FormalizeService.from_config(config, verify)
      loads the model (leanrpc.formalize.loading) and starts a GenerationEngine,
      or records why it cannot (serving_status() -> (False, reason)).

    FormalizeService.open_session() -> FormalizeSession      one per bidi stream
      submit(request) -> starts a job task         cancel(job_id), end_input()
                         (unknown adapter, empty or duplicate id: RequestError)
      events()        -> FormalizeEvent(job_id, TokenChunk | Candidate | Outcome)
                         from every job, as they happen; ends after the last
                         Outcome once end_input() was called.

Every job ends with exactly one Outcome. Jobs of all sessions share one engine,
which decodes their sequences together in one batch.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, AsyncIterator, Awaitable, Callable

from leanrpc.errors import InternalError, ModelNotConfigured, RequestError
from leanrpc.formalize.config import FormalizeConfig
from leanrpc.formalize.repair import FormalizeJob, Formalizer
from leanrpc.formalize.retrieval import MathlibNames
from leanrpc.formalize.types import (
    FormalizeEvent,
    FormalizeRequest,
    Outcome,
    OutcomeStatus,
    Payload,
)
from leanrpc.results import VerifyResult

log = logging.getLogger(__name__)

Verify = Callable[[str], Awaitable[VerifyResult]]

NOT_CONFIGURED = "Formalize: no model weights configured (formalize.model_dir is unset)"


class FormalizeService:
    """The Formalize feature behind the gRPC edge.

    Args:
        engine: a ChatGenerator (normally a `GenerationEngine`), or None when no
            model is available; then the service is NOT_SERVING with `not_serving_reason`.
        verify: async `verify(code) -> VerifyResult` for full Lean code (header + statement).
        config: the FormalizeConfig.
        not_serving_reason: why `engine` is None (default: no weights configured).
        names: a prebuilt Mathlib name index (default: loaded lazily from the config).
    """

    def __init__(
        self,
        engine: Any | None,
        verify: Verify,
        config: FormalizeConfig,
        *,
        not_serving_reason: str = "",
        names: MathlibNames | None = None,
        model_info: dict[str, Any] | None = None,
        adapters: list[str] | None = None,
        default_adapter: str | None = None,
    ) -> None:
        config.validate()
        self.engine = engine
        self.verify = verify
        self.config = config
        self.model_info = dict(model_info or {})
        self._reason = "" if engine is not None else (not_serving_reason or NOT_CONFIGURED)
        self._closed = False
        self._formalizer = (
            Formalizer(
                engine,
                verify,
                config,
                names=names,
                adapters=adapters or [],
                default_adapter=default_adapter,
            )
            if engine is not None
            else None
        )
        self._sessions: set[FormalizeSession] = set()
        self._loaded = threading.Event()
        if engine is not None or not config.model_dir or not_serving_reason:
            self._loaded.set()

    @classmethod
    def start_loading(cls, config: FormalizeConfig, verify: Verify) -> "FormalizeService":
        """Returns at once and loads the model in a background thread.

        Until the load ends, serving_status() is (False, "Formalize: loading ...");
        then it is what `from_config` would have given. For servers whose event
        loop must not block for the minutes a 30B model takes.
        """
        config.validate()
        if not config.model_dir:
            return cls(None, verify, config, not_serving_reason=NOT_CONFIGURED)
        service = cls(
            None,
            verify,
            config,
            not_serving_reason=f"Formalize: loading the model from {config.model_dir}",
        )
        service._loaded.clear()
        threading.Thread(
            target=service._load_in_background, name="formalize-load", daemon=True
        ).start()
        return service

    def _load_in_background(self) -> None:
        try:
            loaded = type(self).from_config(self.config, self.verify)
            if self._closed:
                if loaded.engine is not None and hasattr(loaded.engine, "close"):
                    loaded.engine.close()
                return
            self.model_info = loaded.model_info
            self._reason = loaded._reason
            self._formalizer = loaded._formalizer
            self.engine = loaded.engine  # last: serving_status() reads it
        finally:
            self._loaded.set()

    async def wait_loaded(self, timeout: float | None = None) -> bool:
        """Waits for a background load to end (either way); False on timeout."""
        return await asyncio.to_thread(self._loaded.wait, timeout)

    @classmethod
    def from_config(cls, config: FormalizeConfig, verify: Verify) -> "FormalizeService":
        """Loads the configured model (blocking: seconds for the tiny model, minutes for 30B).

        Never raises for a missing or broken model: the service then reports
        NOT_SERVING with the reason. Raises ValueError for an invalid config.
        """
        config.validate()
        if not config.model_dir:
            return cls(None, verify, config, not_serving_reason=NOT_CONFIGURED)
        try:
            from leanrpc.formalize.engine import GenerationEngine
            from leanrpc.formalize.loading import ModelLoadError, load
        except ImportError as exc:
            return cls(
                None,
                verify,
                config,
                not_serving_reason=f"Formalize: the model extra is not installed ({exc})",
            )
        try:
            loaded = load(config)
        except ModelLoadError as exc:
            log.error("Formalize model not loaded: %s", exc)
            return cls(None, verify, config, not_serving_reason=f"Formalize: {exc}")
        except Exception as exc:  # CUDA or bitsandbytes failures come in many types
            log.exception("Formalize model load crashed")
            return cls(
                None,
                verify,
                config,
                not_serving_reason=f"Formalize: loading the model failed: {type(exc).__name__}: {exc}",
            )
        engine = GenerationEngine(
            loaded.model,
            loaded.tokenizer,
            device=loaded.device,
            max_batch=config.max_batch,
            max_prompt_tokens=config.max_prompt_tokens,
            adapter_names=loaded.adapters,
        )
        info = dict(loaded.info, quantized=loaded.quantized)
        return cls(
            engine,
            verify,
            config,
            model_info=info,
            adapters=loaded.adapters,
            default_adapter=loaded.default_adapter,
        )

    # ------------------------------------------------------------- health
    def serving_status(self) -> tuple[bool, str]:
        """(True, "") when Formalize can take requests, else (False, why). For the health service."""
        if self._closed:
            return False, "Formalize: shutting down"
        if self.engine is None:
            return False, self._reason
        return True, ""

    def _require_serving(self) -> Formalizer:
        ok, reason = self.serving_status()
        if not ok or self._formalizer is None:
            raise ModelNotConfigured(reason)
        return self._formalizer

    # ---------------------------------------------------------------- API
    def open_session(self) -> "FormalizeSession":
        """A session for one bidirectional stream. Raises ModelNotConfigured when not serving."""
        session = FormalizeSession(
            self._require_serving(),
            self.config.max_jobs_per_stream,
            self._sessions,
            stream_budget_s=self.config.stream_budget_s,
        )
        self._sessions.add(session)
        return session

    async def formalize(self, request: FormalizeRequest) -> AsyncIterator[Payload]:
        """One job's events, ending with its Outcome (convenience for benchmarks and tests)."""
        job = self._require_serving().job(request)
        try:
            async for ev in job.events():
                yield ev
        finally:
            job.cancel()

    def adapter_info(self) -> dict[str, Any]:
        """The loaded adapters and limits (Formalizer.GetFormalizerInfo). Raises ModelNotConfigured."""
        f = self._require_serving()
        return {
            "adapters": list(f.adapters),
            "default_adapter": f.default_adapter or "",
            "quantized": bool(self.model_info.get("quantized", False)),
            "device": str(self.model_info.get("device", "")),
            "grouped_dispatch_layers": int(self.model_info.get("grouped_dispatch_layers") or 0),
            "max_candidates": self.config.max_candidates,
            "job_budget_s": self.config.job_budget_s,
            "stream_budget_s": self.config.stream_budget_s,
        }

    def info(self) -> dict[str, Any]:
        ok, reason = self.serving_status()
        d: dict[str, Any] = {"serving": ok, "reason": reason, "model": self.model_info}
        stats = getattr(self.engine, "stats", None)
        if stats is not None and hasattr(stats, "as_dict"):
            d["engine"] = stats.as_dict()
        return d

    async def close(self) -> None:
        """NOT_SERVING from now on; cancels every job and stops the engine."""
        self._closed = True
        for session in list(self._sessions):
            await session.aclose()
        close = getattr(self.engine, "close", None)
        if close is not None:
            await asyncio.to_thread(close)


_JOB_DONE = object()


class FormalizeSession:
    """The jobs of one Formalize stream, their events merged into one async iterator."""

    def __init__(
        self, formalizer: Formalizer, max_jobs: int, registry: set, *, stream_budget_s: float = 0.0
    ) -> None:
        self._f = formalizer
        # The stream's wall-clock budget ends here (loop time); every job ends with it.
        self._deadline = (
            asyncio.get_running_loop().time() + stream_budget_s if stream_budget_s else None
        )
        self._max_jobs = max_jobs
        self._registry = registry
        self._jobs: dict[str, tuple[FormalizeJob, asyncio.Task]] = {}
        self._queue: asyncio.Queue = asyncio.Queue()
        self._input_done = False
        self._error: BaseException | None = None
        self._closed = False

    def submit(self, request: FormalizeRequest) -> None:
        """Starts a job. Raises RequestError for an empty or in-flight duplicate id, or too many jobs."""
        if self._closed:
            raise InternalError("submit on a closed Formalize session")
        if not request.id:
            raise RequestError("FormalizeRequest.id is required")
        if request.id in self._jobs:
            raise RequestError(f"job id {request.id!r} is already in flight on this stream")
        if len(self._jobs) >= self._max_jobs:
            raise RequestError(f"more than {self._max_jobs} jobs in flight on one stream")
        self._f.adapter_for(request.adapter)  # an unknown adapter: RequestError for the stream
        job = self._f.job(request, self._deadline)
        task = asyncio.create_task(self._pump(request.id, job), name=f"formalize:{request.id}")
        self._jobs[request.id] = (job, task)

    def cancel(self, job_id: str) -> bool:
        """Cancels a job in flight; unknown or finished ids are ignored (returns False)."""
        entry = self._jobs.get(job_id)
        if entry is None:
            return False
        entry[0].cancel()
        return True

    def cancel_all(self) -> None:
        for job, _ in self._jobs.values():
            job.cancel()

    def end_input(self) -> None:
        """No more requests will come; events() ends once every job has its Outcome."""
        self._input_done = True
        self._queue.put_nowait(_JOB_DONE)  # wake events() to re-check

    def fail(self, exc: BaseException) -> None:
        """Aborts the session: jobs are cancelled and events() raises `exc`."""
        self._error = exc
        self.cancel_all()
        self._queue.put_nowait(_JOB_DONE)

    @property
    def in_flight(self) -> int:
        return len(self._jobs)

    async def _pump(self, job_id: str, job: FormalizeJob) -> None:
        ended = False
        try:
            async for payload in job.events():
                ended = ended or isinstance(payload, Outcome)
                self._queue.put_nowait(FormalizeEvent(job_id, payload))
        except asyncio.CancelledError:
            if not ended:
                self._queue.put_nowait(FormalizeEvent(job_id, Outcome(OutcomeStatus.CANCELLED, 0)))
            raise
        except Exception as exc:  # a bug in the loop: the job still gets its one Outcome
            log.exception("formalize job %s crashed", job_id)
            if not ended:
                self._queue.put_nowait(
                    FormalizeEvent(
                        job_id,
                        Outcome(
                            OutcomeStatus.FAILED,
                            0,
                            error=f"internal error: {type(exc).__name__}: {exc}",
                        ),
                    )
                )
        finally:
            self._jobs.pop(job_id, None)
            self._queue.put_nowait(_JOB_DONE)

    async def events(self) -> AsyncIterator[FormalizeEvent]:
        while True:
            if self._error is not None:
                raise self._error
            if self._input_done and not self._jobs and self._queue.empty():
                return
            item = await self._queue.get()
            if item is _JOB_DONE:
                continue
            yield item

    async def aclose(self) -> None:
        """Cancels every job and waits for them to stop."""
        self._closed = True
        self._registry.discard(self)
        tasks = []
        for job, task in list(self._jobs.values()):
            job.cancel()
            tasks.append(task)
        if tasks:
            # Jobs stop on their own within a few tokens; the task cancel is the backstop.
            done, pending = await asyncio.wait(tasks, timeout=5.0)
            for t in pending:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
